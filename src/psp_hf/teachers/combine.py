"""Two or more teachers as one: their label caches combined row by row into a new cache.

An ensemble of teachers costs no labelling of its own: each teacher labels the distillation corpus once (`psp prepare
label`), and the combined targets are made from the caches.

- ``concat``: each teacher's row L2-normalised, the rows concatenated and scaled by 1/sqrt(k) (unit norm, and the
  cosine of two combined rows is the mean of the teachers' cosines). Wider than a student's table: training
  learns the map to it, as for any teacher wider than `--dim`.
- ``mean``: the average of the L2-normalised rows, normalised again (one width, each teacher's direction weighted
  equally).

With ``transform="center"`` each teacher's rows first lose their mean (over the sentences combined) and are
normalised again; ``"whiten"`` also evens out the variance of every principal direction (`whiten_rows`); with one
input that is all that is done. A teacher whose embeddings share a large common direction
(multilingual-e5: unrelated sentences at cosine 0.7-0.8) otherwise spends the cosine loss on that direction, and
`--teacher-negative-threshold` reads its cosines as near-paraphrases.

Only sentences every cache holds are combined. The new cache records the corpus of the first input (so
`--corpus-weights` still finds each sentence's source) and the sum of the inputs' labelling times.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import PSPInputError
from ..io.writing import atomic_path
from .labels import CORPUS_REPORT, META_FILE, TeacherCache

logger = logging.getLogger(__name__)

HOW = ("concat", "mean")


TRANSFORMS = ("none", "center", "whiten")
# Whitening divides each principal direction by sqrt(variance + WHITEN_SHRINK x mean variance): the shrinkage keeps
# directions with next to no variance (float16 rounding, 1e-10) from being blown up into noise. English students of
# e5 (results/teachers-english.md), STS-B dev for shrinkage 0.01 / 0.1 / 1 / 3: 83.90 / 84.03 / 84.18 / 83.84; 0.1
# and 1 are within 0.15, and 0.1 is what the Turkish measurement of results/multilingual-distillation.md used.
WHITEN_SHRINK = 0.1


def center_rows(matrix: np.ndarray) -> np.ndarray:
    """`matrix`'s rows less their mean row, L2-normalised again, in `matrix`'s dtype (float32 arithmetic)."""
    rows = _unit_rows(matrix.astype(np.float32))
    return _unit_rows(rows - rows.mean(axis=0, keepdims=True)).astype(matrix.dtype, copy=False)


def whiten_rows(matrix: np.ndarray, shrink: float = WHITEN_SHRINK) -> np.ndarray:
    """`matrix`'s rows centred and whitened (PCA, each direction scaled to equal variance, with `shrink`), unit norm.

    Centring removes the one direction every row shares; whitening also evens out the few directions that still
    dominate the cosines after it, so that no small set of them decides every similarity.
    """
    rows = _unit_rows(matrix.astype(np.float32))
    rows -= rows.mean(axis=0, keepdims=True)
    variances, directions = np.linalg.eigh((rows.T @ rows) / max(len(rows), 1))
    variances = np.clip(variances, 0.0, None)
    scale = 1.0 / np.sqrt(variances + shrink * max(float(variances.mean()), 1e-12))
    # Rotated back (ZCA): the same cosines as the principal-axis coordinates, in the teacher's own axes.
    return _unit_rows(rows @ (directions * scale) @ directions.T).astype(matrix.dtype, copy=False)


def transform_rows(matrix: np.ndarray, transform: str, shrink: float = WHITEN_SHRINK) -> np.ndarray:
    """`matrix` under `transform` (one of `TRANSFORMS`); "none" only L2-normalises the rows."""
    if transform == "center":
        return center_rows(matrix)
    if transform == "whiten":
        return whiten_rows(matrix, shrink)
    if transform == "none":
        return _unit_rows(matrix.astype(np.float32)).astype(matrix.dtype, copy=False)
    raise PSPInputError(f"teacher transform {transform!r}: choose one of {', '.join(TRANSFORMS)}")


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


def combine_caches(
    inputs: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    how: str = "concat",
    name: str | None = None,
    transform: str = "none",
    shrink: float = WHITEN_SHRINK,
) -> tuple[int, int]:
    """Write the combination `how` of the label caches `inputs` to the cache `output`; returns (rows, dim).

    `transform` ("none", "center", "whiten") is applied to each teacher's rows before they are combined;
    `shrink` is whitening's shrinkage (`whiten_rows`).
    """
    if how not in HOW:
        raise PSPInputError(f"how={how!r}: choose one of {', '.join(HOW)}")
    if transform not in TRANSFORMS:
        raise PSPInputError(f"transform={transform!r}: choose one of {', '.join(TRANSFORMS)}")
    if len(inputs) < (1 if transform != "none" else 2):
        raise PSPInputError(f"combining teachers needs two or more label caches, got {len(inputs)}")
    caches = [TeacherCache(path) for path in inputs]
    metas = []
    for cache in caches:
        meta = cache.meta()
        if meta is None:
            raise PSPInputError(f"{cache.directory}: no {META_FILE}; label the corpus with this teacher first")
        metas.append(meta)
    out = TeacherCache(output)
    if out.chunk_files():
        raise PSPInputError(f"{out.directory} already holds labels; give an empty or new folder")
    sentences, first = caches[0].load()
    keep = set(sentences)
    for cache in caches[1:]:
        keep &= cache.labelled_sentences()
    # Each cache is keyed by sentence; later rows win on lookup, as in `TeacherCache.load`.
    order = list(dict.fromkeys(s for s in sentences if s in keep))
    if not order:
        raise PSPInputError("the caches have no sentence in common: were they labelled from the same corpus?")
    # The first cache is already in memory; later rows win on lookup, as in `TeacherCache.load`.
    row_of = {text: row for row, text in enumerate(sentences)}
    rows = [first[np.fromiter((row_of[s] for s in order), dtype=np.int64, count=len(order))]]
    rows += [cache.load(order)[1] for cache in caches[1:]]
    parts = [transform_rows(matrix, transform, shrink) for matrix in rows]
    if len(parts) == 1:
        combined = parts[0]
    elif how == "concat":
        combined = np.concatenate(parts, axis=1) / np.sqrt(len(parts))
    else:
        combined = _unit_rows(np.mean(parts, axis=0))
    kind = how if len(parts) > 1 else transform
    label = name or f"{kind}({'+'.join(str(meta.get('teacher')) for meta in metas)})"
    out.write(order, combined.astype(np.float32), name=label, backend="+".join(m.get("backend", "?") for m in metas))
    meta_path = out.directory / META_FILE
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["parts"] = [{"cache": os.fspath(Path(c.directory).resolve()), **m} for c, m in zip(caches, metas, strict=True)]
    meta["transform"] = transform
    if transform == "whiten":
        meta["whiten_shrink"] = shrink
    meta["label_seconds"] = round(sum(float(m.get("label_seconds", 0.0)) for m in metas), 1)
    if metas[0].get("corpus"):
        meta["corpus"] = metas[0]["corpus"]
    with atomic_path(meta_path) as tmp:
        tmp.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    report = caches[0].directory / CORPUS_REPORT
    if report.is_file():
        shutil.copyfile(report, out.directory / CORPUS_REPORT)
    dropped = len(dict.fromkeys(sentences)) - len(order)
    if dropped:
        logger.warning("combined %d sentences; %d of the first cache's are missing from another", len(order), dropped)
    return len(order), combined.shape[1]
