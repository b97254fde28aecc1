"""A word → pieces cache that tokenizes plain-ASCII sentences without the per-sentence Rust pipeline.

P-SP's tokenizer segments each whitespace-separated word on its own (sentencepiece splits by whitespace;
the converted tokenizer's Metaspace pre-tokenizer does the same), and for printable ASCII text its
normalizer is just lowercasing and whitespace folding. So a sentence's pieces are the concatenation of its
lowercased words' pieces, and each distinct word needs the real tokenizer only once. Anything else
(non-ASCII, control characters) goes through the real tokenizer; tests check both paths agree on real data.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence

import numpy as np


class WordPieceCache:
    """Piece ids per distinct word, stored as one flat array with per-word start and length."""

    def __init__(self, backend, max_words: int = 500_000):
        self._backend = backend
        self._max_words = max_words
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._index: dict[str, int] = {}
        self._starts = np.zeros(1024, dtype=np.int64)
        self._lengths = np.zeros(1024, dtype=np.int64)
        self._pieces = np.zeros(4096, dtype=np.int64)
        self._n_pieces = 0

    def __len__(self) -> int:
        return len(self._index)

    def _add(self, words: list[str]) -> None:
        """Tokenize and store new words."""
        encodings = self._backend.encode_batch_fast(words, add_special_tokens=False)
        ids = [encoding.ids for encoding in encodings]
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        pieces = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
        first = len(self._index)
        needed_words = first + len(words)
        if needed_words > len(self._starts):
            size = max(needed_words, 2 * len(self._starts))
            self._starts = np.resize(self._starts, size)
            self._lengths = np.resize(self._lengths, size)
        needed_pieces = self._n_pieces + len(pieces)
        if needed_pieces > len(self._pieces):
            self._pieces = np.resize(self._pieces, max(needed_pieces, 2 * len(self._pieces)))
        self._pieces[self._n_pieces : needed_pieces] = pieces
        starts = np.zeros(len(words), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        self._starts[first:needed_words] = starts + self._n_pieces
        self._lengths[first:needed_words] = lengths
        self._n_pieces = needed_pieces
        self._index.update(zip(words, range(first, needed_words), strict=True))

    def encode(self, sentences: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Piece ids of printable-ASCII sentences: `(flat_ids, lengths)` (pieces per sentence)."""
        words_per_sentence = [sentence.lower().split() for sentence in sentences]
        word_counts = np.fromiter(map(len, words_per_sentence), dtype=np.int64, count=len(sentences))
        words = list(itertools.chain.from_iterable(words_per_sentence))
        with self._lock:
            index = self._index
            word_ids = np.fromiter(map(index.get, words, itertools.repeat(-1)), dtype=np.int64, count=len(words))
            missing = np.flatnonzero(word_ids < 0)
            if len(missing):
                new_words = list(dict.fromkeys(words[i] for i in missing))
                if len(index) + len(new_words) > self._max_words:
                    # Bounded memory: start over rather than grow without limit. The fresh cache must then hold
                    # every word of this batch, not only the ones that were missing.
                    self._reset()
                    self._add(list(dict.fromkeys(words)))
                    index = self._index
                    word_ids = np.fromiter(map(index.__getitem__, words), dtype=np.int64, count=len(words))
                else:
                    self._add(new_words)
                    word_ids[missing] = [index[words[i]] for i in missing]
            starts = self._starts[word_ids]
            lengths = self._lengths[word_ids]
            # Gather each word's slice of the flat piece array in one vectorised step.
            ends = np.cumsum(lengths)
            positions = np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]) if len(ends) else 0)
            flat = self._pieces[positions]
        bounds = np.zeros(len(sentences) + 1, dtype=np.int64)
        np.cumsum(word_counts, out=bounds[1:])
        piece_bounds = np.concatenate([[0], ends])[bounds]
        return flat, np.diff(piece_bounds)
