"""Initial embedding tables for a P-SP model: from a teacher or from a word-vector text file.

P-SP starts from a random table; these give training a head start:

* `teacher_table`: every vocabulary piece (its text, without the ``▁`` word-start mark) embedded by the
  teacher, the way model2vec distils a static model.
* `word_vector_table`: rows of a word2vec/GloVe text file, matched to pieces by their text.

Both fit the vectors to the model's dimension with `fit_dimension`: PCA down when the model is smaller, a random
orthonormal map up when it is larger (which keeps every cosine). `set_table` copies a table into a `PSPEncoder`.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...errors import PSPInputError

WORD_START = "\u2581"  # sentencepiece's "▁"


def piece_texts(tokenizer) -> list[str]:
    """The text of every piece by id (``▁`` removed); special pieces map to an empty string."""
    vocab = tokenizer.get_vocab()
    texts = [""] * len(tokenizer)
    special = set(tokenizer.all_special_tokens)
    for piece, index in vocab.items():
        if index < len(texts) and piece not in special:
            texts[index] = piece.replace(WORD_START, " ").strip()
    return texts


def fit_dimension(vectors: np.ndarray, dim: int, seed: int = 0) -> np.ndarray:
    """`vectors` (n, d) as (n, dim): PCA when dim < d, a random orthonormal embedding when dim > d.

    PCA axes come from the centred vectors, but the uncentred vectors are projected, so the shared mean
    direction (which an average of pieces keeps most of) is not thrown away.
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    n, d = vectors.shape
    if dim == d:
        return vectors.copy()
    if dim < d:
        if dim > n:
            raise ValueError(f"PCA to {dim} dims needs at least {dim} vectors, got {n}")
        centred = vectors - vectors.mean(axis=0, keepdims=True)
        # Right singular vectors = principal axes; a (d x d) eigenproblem is cheap for d in the hundreds.
        covariance = centred.T @ centred / max(n - 1, 1)
        eigenvalues, eigenvectors = np.linalg.eigh(covariance)
        axes = eigenvectors[:, np.argsort(eigenvalues)[::-1][:dim]]
        return (vectors @ axes).astype(np.float32)
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((dim, d)))  # (dim, d) with orthonormal columns
    return (vectors @ basis.T).astype(np.float32)


def teacher_table(tokenizer, teacher, dim: int, batch_size: int = 256, seed: int = 0) -> np.ndarray:
    """A `(len(tokenizer), dim)` table: each piece's text embedded by `teacher`, fitted to `dim`.

    Special pieces (and pieces with no text) get the mean of the others.
    """
    texts = piece_texts(tokenizer)
    rows = [i for i, text in enumerate(texts) if text]
    if not rows:
        raise ValueError("the tokenizer has no piece with text to embed")
    embedded = np.asarray(
        teacher.encode([texts[i] for i in rows], batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False),
        dtype=np.float32,
    )
    table = np.empty((len(texts), embedded.shape[1]), dtype=np.float32)
    table[:] = embedded.mean(axis=0)
    table[rows] = embedded
    return fit_dimension(table, dim, seed=seed)


@dataclass
class WordVectorInit:
    """A table built from word vectors, and how much of the vocabulary they covered."""

    table: np.ndarray
    covered: int
    vocab_size: int
    dim_in_file: int

    @property
    def coverage(self) -> float:
        """Fraction of pieces that found a vector."""
        return self.covered / max(self.vocab_size, 1)


def read_word_vectors(path: str | os.PathLike, wanted: set[str] | None = None) -> dict[str, np.ndarray]:
    """Vectors of a word2vec/GloVe text file (`.gz` ok; an optional ``count dim`` header line is skipped).

    Only words in `wanted` (lowercased) are kept when it is given. Bad lines raise `PSPInputError` with file:line.
    """
    path = Path(path)
    if not path.is_file():
        raise PSPInputError(f"{path}: no such word-vector file")
    opener = gzip.open if path.suffix == ".gz" else open
    vectors: dict[str, np.ndarray] = {}
    dim = None
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            parts = line.rstrip("\n").rstrip(" ").split(" ")
            if number == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                continue
            if len(parts) < 2:
                continue
            if dim is None:
                dim = len(parts) - 1
            if len(parts) - 1 != dim:
                raise PSPInputError(f"{path}:{number}: {len(parts) - 1} values, expected {dim}")
            word = parts[0].lower()
            if (wanted is None or word in wanted) and word not in vectors:
                try:
                    vectors[word] = np.asarray(parts[1:], dtype=np.float32)
                except ValueError:
                    raise PSPInputError(f"{path}:{number}: not a number in the vector of {parts[0]!r}") from None
    if not vectors and dim is None:
        raise PSPInputError(f"{path}: no vectors found")
    return vectors


def word_vector_table(tokenizer, path: str | os.PathLike, dim: int, seed: int = 0) -> WordVectorInit:
    """A `(len(tokenizer), dim)` table from a word-vector file: a piece takes the vector of its text.

    Pieces not in the file get random rows with the found vectors' per-dimension mean and spread.
    """
    texts = piece_texts(tokenizer)
    wanted = {text.lower() for text in texts if text}
    vectors = read_word_vectors(path, wanted)
    if not vectors:
        raise PSPInputError(f"{path}: none of the {len(wanted)} vocabulary pieces has a vector in this file")
    file_dim = len(next(iter(vectors.values())))
    rng = np.random.default_rng(seed)
    found = np.stack(list(vectors.values()))
    table = rng.normal(found.mean(axis=0), found.std(axis=0) + 1e-6, size=(len(texts), file_dim)).astype(np.float32)
    covered = 0
    for index, text in enumerate(texts):
        vector = vectors.get(text.lower()) if text else None
        if vector is not None:
            table[index] = vector
            covered += 1
    return WordVectorInit(fit_dimension(table, dim, seed=seed), covered, len(texts), file_dim)


def set_table(encoder, table: np.ndarray) -> None:
    """Copy `table` into the encoder's embedding table (shapes must match)."""
    weight = encoder.model.embeddings.weight
    if tuple(table.shape) != tuple(weight.shape):
        raise ValueError(f"table shape {tuple(table.shape)} does not match the model's {tuple(weight.shape)}")
    with torch.no_grad():
        weight.copy_(torch.from_numpy(np.ascontiguousarray(table, dtype=np.float32)))


def save_untrained_like(like: str | os.PathLike, output: str | os.PathLike, seed: int = 0, std: float = 1.0) -> Path:
    """A random `N(0, std)` table with the tokenizer and dimension of the psp model `like`, saved in `output`: the
    floor that comparison tables put beside trained models."""
    from ...encoder import PSPEncoder

    model = PSPEncoder.from_pretrained(like)
    untrained = PSPEncoder.from_tokenizer(model.tokenizer, hidden_size=model.dim, seed=seed, initializer_range=std)
    untrained.save_pretrained(output)
    return Path(output)
