"""A toy X-English bitext and word-vector teachers for the bitext and multilingual distillation tests."""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import numpy as np

WORDS = [
    "man",
    "woman",
    "child",
    "dog",
    "cat",
    "bird",
    "horse",
    "boy",
    "girl",
    "runs",
    "walks",
    "jumps",
    "sits",
    "plays",
    "street",
    "park",
    "beach",
    "river",
    "snow",
    "ball",
]
TEACHER_DIM = 6


class WordTeacher:
    """A deterministic 'teacher' of English: the normalised sum of one fixed random vector per word."""

    def __init__(self):
        self.calls = 0

    def encode(self, sentences, **kwargs) -> np.ndarray:
        self.calls += 1

        def word(w: str) -> np.ndarray:
            return np.random.default_rng(zlib.crc32(w.encode())).standard_normal(TEACHER_DIM)

        out = np.stack([sum(word(w) for w in s.split()) + 1e-3 for s in sentences])
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def translate(sentence: str) -> str:
    """The toy foreign language: every word written backwards with a suffix."""
    return " ".join(word[::-1] + "o" for word in sentence.split())


def make_bitext(path: Path, n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    english = list(dict.fromkeys(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 6))) for _ in range(n)))
    pairs = [(translate(s), s) for s in english]
    path.write_text("de\ten\n" + "".join(f"{a}\t{b}\n" for a, b in pairs), encoding="utf-8")
    return pairs


class MultilingualWordTeacher(WordTeacher):
    """A 'multilingual' teacher of the toy language: a foreign word (English backwards + 'o') gets its English
    word's vector, so a sentence and its translation get the same embedding."""

    def __init__(self):
        super().__init__()
        self.labelled: list[str] = []

    def encode(self, sentences, **kwargs) -> np.ndarray:
        self.labelled += list(sentences)

        def english(word: str) -> str:
            return word[:-1][::-1] if word.endswith("o") and word[:-1][::-1] in WORDS + EXTRA else word

        return super().encode([" ".join(english(w) for w in s.split()) for s in sentences])


EXTRA = ["tree", "car", "house", "rain"]  # words only the monolingual text has
