"""STS scoring, the one place it happens: cosine of each pair's embeddings against the gold scores.

Every STS task of the harness (`tasks.py`) and `sts_dev_score` (training's dev check) encode through
`embed_sentences`, take cosines with `pair_cosines` and correlate with `correlation`, so a dev score and the
same set's score in `psp eval` are the same number. Scores are x100.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..data_folder import existing_data_dir
from ..errors import PSPInputError
from ..inference.similarity import cosine_pairs
from . import data as data_module
from .adapters import EncoderAdapter
from .wrapping import wrap_encoder

# Sets that `sts_dev_score` accepts: small, fast sets for checking a model during training.
DEV_SPLITS: tuple[str, ...] = (
    "stsb-train", "stsb-dev", "stsb-test", "sickr-train", "sickr-trial", "sickr-test",
    *(f"sts17-{pair}" for pair in data_module.STS17_FILES),
)  # fmt: skip


_THREAD_METRICS = threading.local()


def load_metric(name: str):
    """One of the project's `evaluate` metric modules (`sts_correlation`, `bitext_mining`), loaded by path.

    One instance per thread: a module keeps the rows of the `compute` in progress on itself, so two threads
    sharing one (two models evaluated side by side) would finalise each other's rows.
    """
    metrics = getattr(_THREAD_METRICS, "modules", None)
    if metrics is None:
        metrics = _THREAD_METRICS.modules = {}
    if name not in metrics:
        metrics[name] = _load_metric(name)
    return metrics[name]


def _load_metric(name: str):
    import evaluate

    path = Path(__file__).resolve().parent / "metrics" / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"metric module {path} is missing")
    # keep_in_memory: no cache files on disk, so concurrent runs never share or lock anything.
    return evaluate.load(str(path), keep_in_memory=True)


def correlation(predictions: np.ndarray, gold: np.ndarray) -> dict:
    """Pearson and Spearman x100 of `predictions` against `gold`, and the number of pairs `n`."""
    scores = load_metric("sts_correlation").compute(predictions=predictions, references=gold)
    return {"pearson": 100 * scores["pearson"], "spearman": 100 * scores["spearman"], "n": scores["n"]}


def embed_sentences(
    encoder: EncoderAdapter,
    sentences: Sequence[str],
    batch_size: int | None = None,
    progress: bool = False,
    description: str = "encode",
) -> np.ndarray:
    """Embeddings of `sentences`, each distinct sentence encoded once, shortest first."""
    from tqdm.auto import tqdm

    unique = list(dict.fromkeys(sentences))
    # Length order: transformers pad each batch to its longest sentence.
    order = sorted(range(len(unique)), key=lambda i: len(unique[i]))
    batch_size = batch_size or encoder.default_batch_size
    chunk = max(4 * batch_size, 1024)
    table: np.ndarray | None = None
    with tqdm(
        total=len(unique), desc=description, unit="sent", disable=not progress, leave=False, file=sys.stderr
    ) as bar:
        for start in range(0, len(order), chunk):
            rows = order[start : start + chunk]
            vectors = encoder.encode([unique[i] for i in rows], batch_size=batch_size)
            if table is None:
                table = np.empty((len(unique), vectors.shape[1]), dtype=np.float32)
            table[rows] = vectors
            bar.update(len(rows))
    if table is None:
        raise PSPInputError(f"{description}: nothing to encode")
    index = {sentence: i for i, sentence in enumerate(unique)}
    return table[[index[sentence] for sentence in sentences]]


def pair_cosines(
    embed: Callable[[Sequence[str], str], np.ndarray], pair_sets: Sequence[data_module.PairSet], description: str
) -> list[np.ndarray]:
    """Cosine similarity of every pair of every set, encoding all their sentences in one `embed` call."""
    sentences = [s for pairs in pair_sets for s in (*pairs.sentences1, *pairs.sentences2)]
    embeddings = embed(sentences, description)
    out, at = [], 0
    for pairs in pair_sets:
        n = len(pairs)
        out.append(cosine_pairs(embeddings[at : at + n], embeddings[at + n : at + 2 * n], np.float64))
        at += 2 * n
    return out


@functools.lru_cache(maxsize=32)
def _dev_pairs(data_dir: str, split: str) -> data_module.PairSet:
    name, _, part = split.partition("-")
    if name == "stsb":
        return data_module.read_stsb(Path(data_dir), part)
    if name == "sickr":
        return data_module.read_sick_relatedness(Path(data_dir), part)
    return data_module.read_sts17(Path(data_dir), part)


def sts_dev_score(
    encoder: Any, split: str = "stsb-dev", data_dir: str | os.PathLike | None = None, batch_size: int | None = None
) -> float:
    """Pearson x100 of cosine similarity on one STS set; fast enough to call during training.

    `split` is one of DEV_SPLITS, e.g. `stsb-dev` or `sts17-en-en` (the 250 pairs P-SP was tuned on).
    """
    if split not in DEV_SPLITS:
        raise PSPInputError(f"unknown STS split {split!r}; valid: {', '.join(DEV_SPLITS)}")
    data_dir = existing_data_dir(data_dir)
    pairs = _dev_pairs(str(data_dir), split)
    adapter = wrap_encoder(encoder)

    def embed(sentences: Sequence[str], description: str) -> np.ndarray:
        adapter.start_task(split, sentences, {"task_path": str(data_dir)})
        return embed_sentences(adapter, sentences, batch_size, progress=False, description=description)

    (similarity,) = pair_cosines(embed, [pairs], split)
    return correlation(similarity, pairs.gold)["pearson"]
