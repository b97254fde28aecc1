"""Sentences as the word cache reads them: one UTF-8 byte array, joined by newlines, without the sentences it leaves
to the tokenizer (a control character, or a word too long to hash)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from .kernels import load_kernel

_words_kernel = load_kernel("_words")  # join_plain: the join, encode and checks below in one C pass
NEWLINE = 10  # joins the sentences of a batch; a plain sentence has no control character of its own
_CONTROL = re.compile("[\x00-\x1f\x7f]")
# A sentence with a longer word goes to the tokenizer: word hashing keeps a table of 256 values per byte position
# of the longest word seen, and text without spaces (Chinese, a pasted blob) can make one word of a whole page.
MAX_WORD_BYTES = 4096


def split_plain(sentences: Sequence[str]) -> tuple[np.ndarray | None, np.ndarray]:
    """The sentences the cache can encode (no control character, no word over `MAX_WORD_BYTES`) as one UTF-8 byte
    array, joined by newlines, and which sentences they are: a boolean mask, or None when all are."""
    n = len(sentences)
    if n == 0:
        return None, np.zeros(0, dtype=np.uint8)
    if _words_kernel is not None and isinstance(sentences, (list, tuple)):
        joined = _words_kernel.join_plain(sentences, MAX_WORD_BYTES)
        if joined is not None:  # all plain (the usual batch); else the steps below find which are not
            return None, np.frombuffer(joined, dtype=np.uint8)
    text = "\n".join(sentences)
    raw = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    control = (raw < 32) | (raw == 127)
    newlines = np.flatnonzero(raw == NEWLINE)
    long_words = _long_word_starts(raw, newlines)
    if len(newlines) == n - 1 and np.count_nonzero(control) == n - 1 and not len(long_words):
        return None, raw
    if len(newlines) != n - 1:  # a sentence has a newline of its own: ask each sentence
        plain = np.fromiter((_cacheable(s) for s in sentences), dtype=bool, count=n)
        kept = "\n".join(s for s, ok in zip(sentences, plain.tolist(), strict=True) if ok)
        return plain, np.frombuffer(kept.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    plain = np.ones(n, dtype=bool)
    bad = np.union1d(np.flatnonzero(control & (raw != NEWLINE)), long_words)
    plain[np.searchsorted(newlines, bad)] = False
    # Keep the bytes of each plain sentence with the newline that ends it (a newline belongs to the sentence
    # before it); the last plain sentence then has one newline too many unless it is the last sentence.
    is_newline = (raw == NEWLINE).astype(np.int64)  # a running sum that casts as it goes holds the GIL
    sentence_of_byte = np.cumsum(is_newline)
    sentence_of_byte -= is_newline
    kept = raw[plain[sentence_of_byte]]
    if plain.any() and not plain[-1]:
        kept = kept[:-1]
    return plain, kept


def _long_word_starts(raw: np.ndarray, newlines: np.ndarray) -> np.ndarray:
    """Where the words longer than `MAX_WORD_BYTES` start in `raw` (`newlines`: where its newlines are)."""
    # No line is that long in the usual batch: answered from the newlines alone, without another pass over `raw`.
    if len(raw) <= MAX_WORD_BYTES or np.diff(newlines, prepend=-1, append=len(raw)).max() <= MAX_WORD_BYTES + 1:
        return np.zeros(0, dtype=np.int64)
    edges = np.concatenate(([-1], np.flatnonzero(raw <= 32), [len(raw)]))
    return edges[:-1][np.diff(edges) - 1 > MAX_WORD_BYTES] + 1


def _cacheable(sentence: str) -> bool:
    """`split_plain`'s rule for one sentence: no control character, no word longer than `MAX_WORD_BYTES` (four
    bytes a character at most)."""
    return _CONTROL.search(sentence) is None and 4 * max(map(len, sentence.split(" ")), default=0) <= MAX_WORD_BYTES


def plain_sentences(sentences: Sequence[str]) -> np.ndarray:
    """Which sentences the cache can try to encode: no control character, no word over `MAX_WORD_BYTES`."""
    plain, _ = split_plain(sentences)
    return np.ones(len(sentences), dtype=bool) if plain is None else plain
