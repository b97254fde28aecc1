"""Cosine similarity of embeddings (numpy in, numpy out): the one place the project computes it."""

from __future__ import annotations

import numpy as np


def unit_rows(embeddings: np.ndarray, dtype: np.dtype | type = np.float32) -> np.ndarray:
    """Rows scaled to length 1 (zero rows stay zero)."""
    embeddings = np.atleast_2d(np.asarray(embeddings, dtype=dtype))
    norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
    return embeddings / np.maximum(norms, 1e-12).astype(dtype)


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of every row of `a` with every row of `b`: shape `(len(a), len(b))`."""
    return unit_rows(a) @ unit_rows(b).T


def cosine_pairs(a: np.ndarray, b: np.ndarray, dtype: np.dtype | type = np.float32) -> np.ndarray:
    """Cosine of row i of `a` with row i of `b` (0 where a row is all zeros)."""
    a = np.asarray(a, dtype=dtype)
    b = np.asarray(b, dtype=dtype)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.einsum("ij,ij->i", a, b) / np.maximum(norms, 1e-12)
