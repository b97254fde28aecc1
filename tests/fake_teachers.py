"""A deterministic stand-in for a sentence-transformers teacher, shared by the distillation tests."""

from __future__ import annotations

import zlib

import numpy as np

TEACHER_DIM = 12


class BagOfWordsTeacher:
    """A deterministic 'teacher': the normalised sum of one fixed random vector per word."""

    def encode(self, sentences, **kwargs) -> np.ndarray:
        def word(w: str) -> np.ndarray:
            return np.random.default_rng(zlib.crc32(w.encode())).standard_normal(TEACHER_DIM)

        out = np.stack([sum(word(w) for w in s.split()) + 1e-3 for s in sentences])
        return out / np.linalg.norm(out, axis=1, keepdims=True)
