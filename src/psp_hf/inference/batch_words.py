"""The words of a batch and their ids in the word cache (`piece_cache.WordPieceCache`): found, lowercased, hashed,
looked up and checked byte for byte, and the pieces of a batch whose words are all cached, gathered.

Each step has two implementations that give the same arrays: one call of a small C function (`_words.c`, compiled at
install; it releases the GIL) and the numpy steps it replaced (`_split_words`, `verified_ids`), which run where the
package was installed without a C compiler or with `PSP_C_KERNELS=0`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .kernels import load_kernel
from .sentence_bytes import NEWLINE

if TYPE_CHECKING:
    from .piece_cache import _Snapshot

_words_kernel = load_kernel("_words")  # None: the numpy steps below


def _splitmix64(keys: np.ndarray) -> np.ndarray:
    """SplitMix64's output function: a well-spread 64-bit value for each key."""
    z = keys * np.uint64(0x9E3779B97F4A7C15)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


_table_lock = threading.Lock()
_table = _splitmix64(np.arange(1, 64 * 256 + 1, dtype=np.uint64))


def _hash_table(positions: int) -> np.ndarray:
    """A random 64-bit value per (position in a word, byte): entry 256 * position + byte. Tabulation hashing; a
    prefix never changes as the table grows for longer words."""
    global _table
    table = _table
    if len(table) < 256 * positions:
        with _table_lock:
            if len(_table) < 256 * positions:
                size = max(256 * positions, 2 * len(_table))
                _table = _splitmix64(np.arange(1, size + 1, dtype=np.uint64))
            table = _table
    return table


@dataclass(frozen=True)
class Words:
    """The words of one batch: lowercased bytes, word spans, hashes, and the first word of each sentence."""

    text: np.ndarray  # uint8, lowercased, sentences joined by newlines
    chars: np.ndarray  # the bytes of `text` that belong to words, word after word
    starts: np.ndarray
    ends: np.ndarray
    hashes: np.ndarray
    sentence_bounds: np.ndarray  # words of sentence i: sentence_bounds[i]:sentence_bounds[i + 1]


def _split_words(raw: np.ndarray, n: int) -> Words:
    """Words of `n` sentences without control characters, `raw` their UTF-8 bytes joined by newlines."""
    newlines = np.flatnonzero(raw == NEWLINE)
    upper = (raw >= 65) & (raw <= 90)
    low = raw | (upper.view(np.uint8) << np.uint8(5))
    padded = np.zeros(len(raw) + 2, dtype=np.int8)  # not np.diff(prepend=...): its concatenation holds the GIL
    padded[1:-1] = raw > 32
    edges = padded[1:] - padded[:-1]
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    sentence_bounds = np.empty(n + 1, dtype=np.int64)
    sentence_bounds[0], sentence_bounds[-1] = 0, len(starts)
    sentence_bounds[1:-1] = np.searchsorted(starts, newlines)
    chars = low[raw > 32]
    return Words(low, chars, starts, ends, _hash_words(chars, ends - starts), sentence_bounds)


def _hash_words(chars: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A 64-bit hash per word (`chars`: words back to back, `lengths` >= 1 each): the sum of one random value
    per (position, byte) of the word."""
    if len(lengths) == 0:
        return np.zeros(0, dtype=np.uint64)
    firsts = _run_starts(lengths)
    keys = concatenated_ranges(np.zeros_like(lengths), lengths, firsts)
    keys <<= 8
    keys += chars
    return np.add.reduceat(_hash_table(int(lengths.max()))[keys], firsts)


def _run_starts(lengths: np.ndarray) -> np.ndarray:
    """Where each of consecutive runs of these lengths starts."""
    firsts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=firsts[1:])
    return firsts


def concatenated_ranges(starts: np.ndarray, lengths: np.ndarray, firsts: np.ndarray | None = None) -> np.ndarray:
    """Concatenated `arange(start, start + length)` for each pair (`firsts`: `_run_starts(lengths)` if known).

    A running sum of steps: 1 inside a range, a jump at the first element of each. `np.repeat` would be shorter
    but holds the GIL, and this runs on every batch of every thread.
    """
    if firsts is None:
        firsts = _run_starts(lengths)
    total = int(firsts[-1] + lengths[-1]) if len(lengths) else 0
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    nonempty = lengths > 0
    starts, firsts, lengths = starts[nonempty], firsts[nonempty], lengths[nonempty]
    steps = np.ones(total, dtype=np.int64)
    steps[0] = starts[0]
    steps[firsts[1:]] = starts[1:] - (starts[:-1] + lengths[:-1] - 1)
    return np.cumsum(steps)  # not out=steps: an in-place running sum holds the GIL


def look_up_in_c() -> bool:
    """Whether a batch's words are looked up by the C function (built at install) rather than numpy's steps."""
    return _words_kernel is not None


def first_bad_sentence(sentences) -> int | None:
    """By the C function, the index of the first item of `sentences` that is not a str or not valid Unicode (-1:
    none); None where the function is not built or `sentences` is not a list or tuple (the caller checks itself)."""
    if _words_kernel is None or not isinstance(sentences, (list, tuple)):
        return None
    return _words_kernel.first_bad_sentence(sentences)


def look_up(snapshot: _Snapshot, raw: np.ndarray, n: int) -> tuple[Words, np.ndarray]:
    """The words of `n` sentences (`raw`: as `split_plain` gives them) and their ids in `snapshot`, -1 for a word not
    cached: one call of the C function where it was built, else the numpy steps."""
    if _words_kernel is None:
        words = _split_words(raw, n)
        return words, verified_ids(snapshot, words, np.arange(len(words.starts)))
    capacity = len(raw) // 2 + 1  # a word and a separator: at least two bytes each
    text, chars = np.empty(len(raw), dtype=np.uint8), np.empty(len(raw), dtype=np.uint8)
    starts, ends, ids = (np.empty(capacity, dtype=np.int64) for _ in range(3))
    hashes, bounds = np.empty(capacity, dtype=np.uint64), np.empty(n + 1, dtype=np.int64)
    main, recent = snapshot.main, snapshot.recent
    table = _hash_table(1)
    while True:
        n_words, n_chars, longest = _words_kernel.look_up(
            raw, n, table, main.hashes, main.ids, main.bucket_starts, int(main.shift), recent.hashes, recent.ids,
            recent.bucket_starts, int(recent.shift), snapshot.byte_bounds, snapshot.word_bytes,
            text, chars, starts, ends, hashes, ids, bounds,
        )  # fmt: skip
        if 256 * longest <= len(table):
            break
        table = _hash_table(longest)  # a word longer than any before: again, with a table that covers it
    words = Words(text, chars[:n_chars], starts[:n_words], ends[:n_words], hashes[:n_words], bounds)
    return words, ids[:n_words]


def gathered(snapshot: _Snapshot, words: Words, ids: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """`(flat, lengths)` of `n` sentences whose words all have ids in `snapshot`, by the C function."""
    piece_bounds = snapshot.piece_bounds[: snapshot.n_words + 1]
    lengths = np.empty(n, dtype=np.int64)
    total = _words_kernel.gather_pieces(ids, words.sentence_bounds, piece_bounds, snapshot.pieces, lengths, None)
    flat = np.empty(total, dtype=np.int64)
    _words_kernel.gather_pieces(ids, words.sentence_bounds, piece_bounds, snapshot.pieces, lengths, flat)
    return flat, lengths


def verified_ids(snapshot: _Snapshot, words: Words, which: np.ndarray) -> np.ndarray:
    """Word ids of `words` at positions `which`, -1 for words not cached or whose hash matched another word."""
    ids = snapshot.lookup(words.hashes[which])
    found = np.flatnonzero(ids >= 0)
    bounds = snapshot.byte_bounds
    lengths = (words.ends - words.starts)[which[found]]
    stored_starts = bounds[ids[found]]
    same_length = bounds[ids[found] + 1] - stored_starts == lengths
    if len(found) == len(words.starts) and same_length.all():  # the usual case: the batch's bytes in word order
        text = words.chars
    else:
        ids[found[~same_length]] = -1
        found, lengths, stored_starts = found[same_length], lengths[same_length], stored_starts[same_length]
        text = words.text[concatenated_ranges(words.starts[which[found]], lengths)]
    differs = text != snapshot.word_bytes[concatenated_ranges(stored_starts, lengths)]
    if differs.any():
        ids[found[np.repeat(np.arange(len(found)), lengths)[differs]]] = -1
    return ids
