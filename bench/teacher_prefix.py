"""Which prefix a teacher should get, chosen on dev sets: STS-B dev (English) and PUD (X–English retrieval).

e5 models are trained with "query: " / "passage: " before the text; whether a prefix helps the labels is read here
on dev sets only (never Tatoeba or the STS test sets). For each prefix: STS-B dev Pearson ×100 of the cosines,
and for each PUD language the mining accuracy (nearest cosine, both directions, %) of its 1,000 pairs.

    python bench/teacher_prefix.py --teacher e5-small --prefixes "" "query: " "passage: " \\
        --langs ar de es fr ru tr zh [--backend onnx-int8 --work-dir DIR] [--threads 2]
"""

from __future__ import annotations

import argparse
import gzip
import os
from pathlib import Path

import numpy as np


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def read_pud(data_dir: Path, lang: str) -> tuple[list[str], list[str]]:
    """The PUD pairs of `lang` (other language, English)."""
    other, english = [], []
    with gzip.open(data_dir / "bitext" / "ud-pud" / f"{lang}-en.tsv.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            cells = line.rstrip("\n").split("\t")
            if len(cells) >= 2 and cells[0] and cells[1]:
                other.append(cells[0])
                english.append(cells[1])
    return other, english


def mining_accuracy(a: np.ndarray, b: np.ndarray) -> float:
    """Nearest-cosine retrieval accuracy (%), the mean of both directions."""
    similarity = _unit(a) @ _unit(b).T
    gold = np.arange(len(a))
    return 50.0 * (float((similarity.argmax(1) == gold).mean()) + float((similarity.argmax(0) == gold).mean()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", default="e5-small", help="a sentence-transformers folder or a named teacher")
    parser.add_argument("--prefixes", nargs="+", default=["", "query: ", "passage: "])
    parser.add_argument("--langs", nargs="*", default=["ar", "de", "es", "fr", "ru", "tr", "zh"])
    parser.add_argument("--no-stsb", dest="stsb", action="store_false")
    parser.add_argument("--backend", default="onnx-int8", choices=("onnx-int8", "onnx", "torch"))
    parser.add_argument("--work-dir", default=".cache/teacher-prefix", help="where the ONNX export is kept")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data-dir", default=os.environ.get("PSP_DATA", "../shared/data"))
    args = parser.parse_args(argv)

    from psp_hf.evaluation.data import read_stsb
    from psp_hf.teachers.labels import labelling_teacher

    data_dir = Path(args.data_dir)
    teacher = labelling_teacher(args.teacher, args.backend, args.threads, args.work_dir)
    sets: dict[str, tuple[list[str], list[str]]] = {}
    if args.stsb:
        stsb = read_stsb(data_dir, "dev")
        sets["stsb-dev"] = (stsb.sentences1, stsb.sentences2)
    for lang in args.langs:
        sets[f"pud-{lang}"] = read_pud(data_dir, lang)
    header = ["prefix", *sets, "PUD mean"]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header), flush=True)
    for prefix in args.prefixes:
        cells = []
        for name, (first, second) in sets.items():
            if args.backend == "torch":
                a = teacher.encode(first, prompt=prefix, convert_to_numpy=True)
                b = teacher.encode(second, prompt=prefix, convert_to_numpy=True)
            else:
                teacher.prompt = prefix  # the ONNX teacher puts its prompt before every sentence
                a, b = teacher.encode(first, batch_size=16), teacher.encode(second, batch_size=16)
            if name == "stsb-dev":
                from scipy.stats import pearsonr

                cosines = (_unit(a) * _unit(b)).sum(1)
                cells.append(100 * float(pearsonr(cosines, stsb.gold)[0]))
            else:
                cells.append(mining_accuracy(a, b))
        pud = [value for name, value in zip(sets, cells, strict=True) if name.startswith("pud-")]
        mean = f"{np.mean(pud):.2f}" if pud else "—"
        print(f"| {prefix!r} | " + " | ".join(f"{value:.2f}" for value in cells) + f" | {mean} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
