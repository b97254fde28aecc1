"""A word → pieces cache that tokenizes sentences in bulk, without the per-sentence Rust pipeline.

P-SP's tokenizer segments each whitespace-separated word on its own (sentencepiece splits by whitespace;
the converted tokenizer's Metaspace pre-tokenizer does the same), and its normalizer works character by character
(lowercasing, the charsmap) apart from whitespace folding. So a sentence's pieces are the concatenation of its
words' pieces, and each distinct word needs the real tokenizer only once. `WordTokenizer` checks, once per word,
that a word with characters beyond ASCII cuts the same alone as in a sentence; a sentence holding a word that does
not (and any sentence with a control character) goes through the real tokenizer. Tests check both paths agree on
real data in several languages.

A batch is handled as one byte array (UTF-8): words are found, their ASCII letters lowercased and hashed,
looked up in a sorted hash index and then compared byte for byte with the stored word, so the result is exact (a
hash collision only costs a fresh tokenization). Finding, hashing and looking up a batch's words is one call of a
small C function (`_words.c`, compiled at install) that releases the GIL, so threads encoding separate batches
overlap; without it the same steps run as numpy calls (`_split_words`, `_verified_ids`). Readers use an immutable
snapshot of the cache; only adding words takes a lock. The cache is bounded: once full it keeps the words it has
(the frequent ones come first in any sizeable text) and tokenizes the words it lacks batch by batch, without storing
them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .sentence_bytes import NEWLINE, plain_sentences, split_plain
from .word_tokenizer import REFUSED, WordTokenizer

try:  # built from _words.c at install time; optional, like the pooling kernel
    from . import _words as _words_kernel
except ImportError:
    _words_kernel = None
if os.environ.get("PSP_C_KERNELS", "1") == "0":  # as in psp_hf.inference.pooling
    _words_kernel = None

__all__ = ["WordPieceCache", "concatenated_ranges", "merge_groups", "plain_sentences", "split_plain"]


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
class _Words:
    """The words of one batch: lowercased bytes, word spans, hashes, and the first word of each sentence."""

    text: np.ndarray  # uint8, lowercased, sentences joined by newlines
    chars: np.ndarray  # the bytes of `text` that belong to words, word after word
    starts: np.ndarray
    ends: np.ndarray
    hashes: np.ndarray
    sentence_bounds: np.ndarray  # words of sentence i: sentence_bounds[i]:sentence_bounds[i + 1]


def _split_words(raw: np.ndarray, n: int) -> _Words:
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
    return _Words(low, chars, starts, ends, _hash_words(chars, ends - starts), sentence_bounds)


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


class _HashIndex:
    """Sorted word hashes and their word ids, with bucket starts over the top bits: a lookup is about two probes."""

    def __init__(self, hashes: np.ndarray, ids: np.ndarray):
        order = np.argsort(hashes, kind="stable")
        self.hashes = hashes[order]
        self.ids = ids[order]
        bits = len(hashes).bit_length() + 1  # two to four buckets per hash: most lookups end at the first probe
        self.shift = np.uint64(64 - bits)
        self.bucket_starts = np.zeros((1 << bits) + 1, dtype=np.int64)
        counts = np.bincount((self.hashes >> self.shift).astype(np.intp), minlength=1 << bits)
        np.cumsum(counts, out=self.bucket_starts[1:])

    def __len__(self) -> int:
        return len(self.hashes)

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        """Word id of each hash, -1 where the hash is not in the index."""
        if not len(self.hashes):
            return np.full(len(hashes), -1, dtype=np.int64)
        buckets = (hashes >> self.shift).astype(np.intp)
        low, high = self.bucket_starts[buckets], self.bucket_starts[buckets + 1]
        first = np.minimum(low, len(self.hashes) - 1)
        hit = (self.hashes[first] == hashes) & (low < high)
        found = np.where(hit, self.ids[first], -1)
        todo = np.flatnonzero(~hit & (low + 1 < high))
        low, high = low[todo] + 1, high[todo]
        while len(todo):  # further entries of the buckets that hold more than one hash
            hit = self.hashes[low] == hashes[todo]
            found[todo[hit]] = self.ids[low[hit]]
            more = ~hit & (low + 1 < high)
            todo, low, high = todo[more], low[more] + 1, high[more]
        return found


_EMPTY_INDEX = _HashIndex(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64))


@dataclass(frozen=True)
class _Snapshot:
    """The cache as one reader sees it. Buffers are append-only and shared with later snapshots (a later one writes
    only past this one's counts, or into a grown copy), so ids stay valid."""

    n_words: int
    piece_bounds: np.ndarray  # pieces of word w: pieces[piece_bounds[w]:piece_bounds[w + 1]]
    pieces: np.ndarray
    byte_bounds: np.ndarray  # lowercased bytes of word w: word_bytes[byte_bounds[w]:byte_bounds[w + 1]]
    word_bytes: np.ndarray
    main: _HashIndex
    recent: _HashIndex  # words added since `main` was built; merged into it once it is a quarter of its size

    @staticmethod
    def empty() -> _Snapshot:
        zeros = np.zeros(1024, dtype=np.int64)
        pieces, word_bytes = np.zeros(4096, np.int64), np.zeros(8192, np.uint8)
        return _Snapshot(0, zeros, pieces, zeros.copy(), word_bytes, *[_EMPTY_INDEX] * 2)

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        ids = self.main.lookup(hashes)
        if len(self.recent):
            missing = np.flatnonzero(ids < 0)
            ids[missing] = self.recent.lookup(hashes[missing])
        return ids


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


def _look_up(snapshot: _Snapshot, raw: np.ndarray, n: int) -> tuple[_Words, np.ndarray]:
    """The words of `n` sentences (`raw`: as `split_plain` gives them) and their ids in `snapshot`, -1 for a word not
    cached: one call of the C function where it was built, else the numpy steps."""
    if _words_kernel is None:
        words = _split_words(raw, n)
        return words, _verified_ids(snapshot, words, np.arange(len(words.starts)))
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
    words = _Words(text, chars[:n_chars], starts[:n_words], ends[:n_words], hashes[:n_words], bounds)
    return words, ids[:n_words]


def _gathered(snapshot: _Snapshot, words: _Words, ids: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """`(flat, lengths)` of `n` sentences whose words all have ids in `snapshot`, by the C function."""
    piece_bounds = snapshot.piece_bounds[: snapshot.n_words + 1]
    lengths = np.empty(n, dtype=np.int64)
    total = _words_kernel.gather_pieces(ids, words.sentence_bounds, piece_bounds, snapshot.pieces, lengths, None)
    flat = np.empty(total, dtype=np.int64)
    _words_kernel.gather_pieces(ids, words.sentence_bounds, piece_bounds, snapshot.pieces, lengths, flat)
    return flat, lengths


def _verified_ids(snapshot: _Snapshot, words: _Words, which: np.ndarray) -> np.ndarray:
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


def _grown(buffer: np.ndarray, used: int, needed: int) -> np.ndarray:
    """`buffer` if it holds `needed` entries, else a larger copy of its first `used` entries."""
    if needed <= len(buffer):
        return buffer
    grown = np.empty(max(needed, 2 * len(buffer)), dtype=buffer.dtype)
    grown[:used] = buffer[:used]
    return grown


class WordPieceCache:
    """Piece ids per distinct word: flat append-only arrays, a hash index over the words' bytes, and a lock taken
    only to add words (threads read an immutable snapshot). At most `max_words` words are stored; later new words
    are tokenized for the batch that holds them."""

    def __init__(self, backend, max_words: int = 500_000, max_bytes: int = 16 << 20):
        self._words = WordTokenizer(backend)
        self._max_words = max_words
        # Words without spaces between them (Chinese: a whole sentence) are long and rarely repeat: the bytes bound
        # keeps such text from filling memory before `max_words` is reached.
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._snapshot = _Snapshot.empty()

    def __len__(self) -> int:
        return self._snapshot.n_words

    def encode(self, sentences: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """Piece ids of sentences: `(flat_ids, lengths)` (pieces per sentence); None when a sentence has a control
        character or a word that cuts differently alone (the tokenizer must handle those)."""
        plain, raw = split_plain(sentences)
        if plain is not None:
            return None
        flat, lengths, refused = self.encode_bytes(raw, len(sentences))
        return None if refused is not None else (flat, lengths)

    def encode_all(
        self, sentences: Sequence[str], tokenize: Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """`(flat_ids, lengths)` of every sentence: the cache's pieces where it can, `tokenize`'s (the tokenizer
        itself) for a sentence with a control character or a word the cache refused."""
        n = len(sentences)
        plain, raw = split_plain(sentences)
        flat, lengths, refused = self.encode_bytes(raw, n if plain is None else int(plain.sum()))
        if refused is not None:
            cached = np.arange(n) if plain is None else np.flatnonzero(plain)
            plain = np.zeros(n, dtype=bool)
            plain[cached[~refused]] = True
            lengths = lengths[~refused]
        if plain is None:
            return flat, lengths
        others = np.flatnonzero(~plain)
        encoded = [(flat, lengths), tokenize(list(map(sentences.__getitem__, others.tolist())))]
        return merge_groups(n, [np.flatnonzero(plain), others], encoded)

    def encode_bytes(self, raw: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """`(flat_ids, lengths, refused)` of `n` sentences given as `split_plain` gives them: UTF-8 bytes joined by
        newlines. `refused` is None, or marks the sentences that hold a word `WordTokenizer` refused: they have no
        pieces here (length 0) and must go through the tokenizer."""
        if n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), None
        snapshot = self._snapshot
        words, ids = _look_up(snapshot, raw, n)
        uncached = None
        if (ids < 0).any():
            snapshot, ids, uncached = self._add_missing(words, ids)
        if uncached is None and _words_kernel is not None:
            flat, lengths = _gathered(snapshot, words, ids, n)
        else:
            flat, lengths = self._assembled(snapshot, words, ids, uncached)
        if not len(flat) or flat.min() != REFUSED:
            return flat, lengths, None
        sentence_ends = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=sentence_ends[1:])
        refused = np.zeros(n, dtype=bool)
        refused[np.searchsorted(sentence_ends, np.flatnonzero(flat == REFUSED), side="right") - 1] = True
        kept = ~refused
        flat = flat[concatenated_ranges(sentence_ends[:-1][kept], lengths[kept])]
        lengths[refused] = 0
        return flat, lengths, refused

    @staticmethod
    def _assembled(snapshot: _Snapshot, words: _Words, ids: np.ndarray, uncached: tuple | None):
        """`(flat, lengths)`: the pieces of the batch's words (`ids` in `snapshot`, or the `uncached` pieces
        `_add_missing` gave for words without an id) back to back, and the number of each sentence's pieces."""
        lengths = np.empty(len(ids), dtype=np.int64)
        stored = slice(None) if uncached is None else np.flatnonzero(ids >= 0)
        piece_bounds = snapshot.piece_bounds
        starts = piece_bounds[ids[stored]]
        lengths[stored] = piece_bounds[ids[stored] + 1] - starts
        if uncached is not None:
            which, local_bounds, local_pieces = uncached
            local_starts = local_bounds[which]
            lengths[ids < 0] = local_bounds[which + 1] - local_starts
        word_ends = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=word_ends[1:])
        if uncached is None:
            flat = snapshot.pieces[concatenated_ranges(starts, lengths)]
        else:
            flat = np.empty(int(word_ends[-1]), dtype=np.int64)
            kept = lengths[stored]
            flat[concatenated_ranges(word_ends[stored], kept)] = snapshot.pieces[concatenated_ranges(starts, kept)]
            local = np.flatnonzero(ids < 0)
            new = lengths[local]
            flat[concatenated_ranges(word_ends[local], new)] = local_pieces[concatenated_ranges(local_starts, new)]
        return flat, np.diff(word_ends[words.sentence_bounds])

    def _add_missing(self, words: _Words, ids: np.ndarray) -> tuple[_Snapshot, np.ndarray, tuple | None]:
        """Tokenize the words not cached yet and publish a snapshot holding them; ids valid in that snapshot. When
        they do not fit, the snapshot is kept, their ids stay -1, and the third value holds their pieces: for
        each missing word (in order) its row in `(bounds, pieces)`."""
        with self._lock:
            snapshot = self._snapshot  # newer than the one `ids` came from, whose ids stay valid (append-only)
            missing = np.flatnonzero(ids < 0)
            ids[missing] = _verified_ids(snapshot, words, missing)
            missing = np.flatnonzero(ids < 0)
            if not len(missing):
                return snapshot, ids, None
            new_words = self._distinct(words, missing)
            new_bytes = sum(map(len, new_words))
            stored_bytes = int(snapshot.byte_bounds[snapshot.n_words])
            if snapshot.n_words + len(new_words) <= self._max_words and stored_bytes + new_bytes <= self._max_bytes:
                snapshot = self._append(snapshot, new_words)
                self._snapshot = snapshot
                ids[missing] = _verified_ids(snapshot, words, missing)
                # A word whose hash belongs to another cached word is stored but not indexed: take its id directly.
                unresolved = missing[ids[missing] < 0]
                if len(unresolved):
                    first_id = snapshot.n_words - len(new_words)
                    ids[unresolved] = [first_id + k for k in self._positions_in(words, unresolved, new_words)]
                return snapshot, ids, None
        # Full: tokenize this batch's new words outside the lock and keep them out of the cache.
        bounds, pieces = self._words.tokenize(list(new_words))
        which = np.fromiter(self._positions_in(words, missing, new_words), dtype=np.int64, count=len(missing))
        return snapshot, ids, (which, bounds, pieces)

    @staticmethod
    def _positions_in(words: _Words, which: np.ndarray, distinct: dict[bytes, int]):
        """For each word at positions `which`, its index among the keys of `distinct`."""
        index = {word: k for k, word in enumerate(distinct)}
        text = words.text.tobytes()
        spans = zip(words.starts[which].tolist(), words.ends[which].tolist(), strict=True)
        return (index[text[start:end]] for start, end in spans)

    @staticmethod
    def _distinct(words: _Words, which: np.ndarray) -> dict[bytes, int]:
        """The distinct words at positions `which`, each with its hash."""
        text = words.text.tobytes()
        starts, ends, hashes = (array[which].tolist() for array in (words.starts, words.ends, words.hashes))
        return dict(zip((text[s:e] for s, e in zip(starts, ends, strict=True)), hashes, strict=True))

    def _append(self, snapshot: _Snapshot, new_words: dict[bytes, int]) -> _Snapshot:
        """A snapshot with `new_words` (lowercased bytes → hash) tokenized and stored after the current words."""
        new_bounds, new_pieces = self._words.tokenize(list(new_words))
        n, added = snapshot.n_words, len(new_words)
        piece_lengths = np.diff(new_bounds)
        byte_lengths = np.fromiter(map(len, new_words), dtype=np.int64, count=added)
        n_pieces, n_bytes = int(snapshot.piece_bounds[n]), int(snapshot.byte_bounds[n])
        piece_bounds = _grown(snapshot.piece_bounds, n + 1, n + added + 1)
        byte_bounds = _grown(snapshot.byte_bounds, n + 1, n + added + 1)
        np.cumsum(piece_lengths, out=piece_bounds[n + 1 : n + added + 1])
        piece_bounds[n + 1 : n + added + 1] += n_pieces
        np.cumsum(byte_lengths, out=byte_bounds[n + 1 : n + added + 1])
        byte_bounds[n + 1 : n + added + 1] += n_bytes
        total_pieces, total_bytes = int(piece_bounds[n + added]), int(byte_bounds[n + added])
        pieces = _grown(snapshot.pieces, n_pieces, total_pieces)
        pieces[n_pieces:total_pieces] = new_pieces
        word_bytes = _grown(snapshot.word_bytes, n_bytes, total_bytes)
        word_bytes[n_bytes:total_bytes] = np.frombuffer(b"".join(new_words), dtype=np.uint8)
        # Index each new hash once, and only when no cached word has it already.
        hashes = np.fromiter(new_words.values(), dtype=np.uint64, count=added)
        new_ids = np.arange(n, n + added, dtype=np.int64)
        _, first = np.unique(hashes, return_index=True)
        first = first[snapshot.lookup(hashes[first]) < 0]
        recent = snapshot.recent
        all_recent = (np.concatenate([recent.hashes, hashes[first]]), np.concatenate([recent.ids, new_ids[first]]))
        main = snapshot.main
        if len(all_recent[0]) > max(len(main) // 4, 1024):
            main = _HashIndex(np.concatenate([main.hashes, all_recent[0]]), np.concatenate([main.ids, all_recent[1]]))
            recent = _EMPTY_INDEX
        else:
            recent = _HashIndex(*all_recent)
        return replace(
            snapshot,
            n_words=n + added,
            piece_bounds=piece_bounds,
            pieces=pieces,
            byte_bounds=byte_bounds,
            word_bytes=word_bytes,
            main=main,
            recent=recent,
        )


def merge_groups(n: int, groups: list[np.ndarray], encoded: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
    """`(flat ids, lengths)` of `n` sentences from the `(flat, lengths)` of each group of rows, in row order."""
    lengths = np.zeros(n, dtype=np.int64)
    for rows, (_, group_lengths) in zip(groups, encoded, strict=True):
        lengths[rows] = group_lengths
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    flat = np.empty(int(lengths.sum()), dtype=np.int64)
    for rows, (group_flat, group_lengths) in zip(groups, encoded, strict=True):
        flat[concatenated_ranges(starts[rows], group_lengths)] = group_flat
    return flat, lengths
