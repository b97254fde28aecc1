"""Cosine similarity of embeddings: the one place the project computes it.

numpy in, numpy out; given a torch tensor (either argument), the result is a torch tensor on its device, as
sentence-transformers' `similarity` returns. torch is imported only when a tensor is passed in.
"""

from __future__ import annotations

import sys

import numpy as np


def unit_rows(embeddings: np.ndarray, dtype: np.dtype | type = np.float32) -> np.ndarray:
    """Rows scaled to length 1 (zero rows stay zero)."""
    embeddings = np.atleast_2d(np.asarray(embeddings, dtype=dtype))
    norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
    return embeddings / np.maximum(norms, 1e-12).astype(dtype)


def _tensors(a, b):
    """`(a, b)` as float32 tensors on one device when either is a torch tensor, else None."""
    torch = sys.modules.get("torch")
    if torch is None or not (isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor)):
        return None
    device = a.device if isinstance(a, torch.Tensor) else b.device
    return tuple(torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x) for x in (a, b)), device


def cosine_matrix(a, b):
    """Cosine of every row of `a` with every row of `b`: shape `(len(a), len(b))`."""
    tensors = _tensors(a, b)
    if tensors is not None:
        import torch

        (a, b), device = tensors
        a, b = (torch.nn.functional.normalize(torch.atleast_2d(x).to(device, torch.float32), dim=1) for x in (a, b))
        return a @ b.T
    return unit_rows(a) @ unit_rows(b).T


def cosine_pairs(a, b, dtype: np.dtype | type = np.float32):
    """Cosine of row i of `a` with row i of `b` (0 where a row is all zeros)."""
    tensors = _tensors(a, b)
    if tensors is not None:
        import torch

        (a, b), device = tensors
        a, b = (torch.atleast_2d(x).to(device, torch.float32) for x in (a, b))
        return torch.nn.functional.cosine_similarity(a, b, dim=1, eps=1e-12)
    a = np.asarray(a, dtype=dtype)
    b = np.asarray(b, dtype=dtype)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.einsum("ij,ij->i", a, b) / np.maximum(norms, 1e-12)
