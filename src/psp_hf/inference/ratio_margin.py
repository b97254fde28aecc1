"""Margin-based scoring of candidate translation pairs (Artetxe & Schwenk, 2019, "ratio margin").

A pair's cosine is divided by the average cosine of each side with its k nearest neighbours on the other side:

    margin(x, y) = cos(x, y) / (sum_{z in kNN(x)} cos(x, z) / 2k + sum_{z in kNN(y)} cos(y, z) / 2k)

so a pair stands out only if it is closer than both sentences usually are to anything. `ratio_margin` is the one
scoring function; `psp mine` feeds it Faiss neighbours, the Tatoeba evaluation a full similarity matrix.
"""

from __future__ import annotations

import numpy as np


def ratio_margin(cosine: np.ndarray, knn_mean_x: np.ndarray, knn_mean_y: np.ndarray) -> np.ndarray:
    """Ratio margin of pairs: `cosine / ((knn_mean_x + knn_mean_y) / 2)` (the arrays broadcast together).

    `knn_mean_x` is the mean cosine of x with its k nearest neighbours among the candidates for it, and
    `knn_mean_y` the same for y. A zero denominator gives a margin of 0.
    """
    cosine = np.asarray(cosine, dtype=np.float32)
    denominator = (np.asarray(knn_mean_x, dtype=np.float32) + np.asarray(knn_mean_y, dtype=np.float32)) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = cosine / denominator
    return np.where(denominator != 0, margin, np.float32(0)).astype(np.float32, copy=False)


def top_k_mean(similarity: np.ndarray, k: int, axis: int = 1) -> np.ndarray:
    """Mean of the `k` largest values along `axis` of a similarity matrix (k is capped at that axis' size)."""
    similarity = np.asarray(similarity, dtype=np.float32)
    k = min(k, similarity.shape[axis])
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    top = -np.partition(-similarity, k - 1, axis=axis)
    return np.take(top, range(k), axis=axis).mean(axis=axis)


def margin_matrix(similarity: np.ndarray, k: int) -> np.ndarray:
    """Ratio margins of every pair of a full `(n_x, n_y)` cosine matrix, neighbours taken within it."""
    similarity = np.asarray(similarity, dtype=np.float32)
    return ratio_margin(similarity, top_k_mean(similarity, k, axis=1)[:, None], top_k_mean(similarity, k, axis=0)[None])


def margin_retrieval_errors(source: np.ndarray, target: np.ndarray, k: int = 4) -> tuple[float, float]:
    """Error rates (source->target, target->source) of retrieval by highest margin; row i pairs with row i."""
    from .similarity import unit_rows

    similarity = unit_rows(np.asarray(source, dtype=np.float32)) @ unit_rows(np.asarray(target, dtype=np.float32)).T
    margins = margin_matrix(similarity, k)
    gold = np.arange(len(margins))
    # argmax takes the first maximum: ties resolve the same way on every run.
    return float(np.mean(margins.argmax(axis=1) != gold)), float(np.mean(margins.argmax(axis=0) != gold))
