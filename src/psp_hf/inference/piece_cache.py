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
overlap; without it the same steps run as numpy calls (both in `batch_words.py`). Readers use an immutable
snapshot of the cache; only adding words takes a lock. The cache is bounded: once full it keeps the words it has
(the frequent ones come first in any sizeable text) and tokenizes the words it lacks batch by batch, without storing
them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .batch_words import Words, concatenated_ranges, gathered, look_up, look_up_in_c, verified_ids
from .sentence_bytes import plain_sentences, split_plain
from .word_tokenizer import REFUSED, WordTokenizer

__all__ = ["WordPieceCache", "concatenated_ranges", "merge_groups", "plain_sentences", "split_plain"]


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
        words, ids = look_up(snapshot, raw, n)
        uncached = None
        if (ids < 0).any():
            snapshot, ids, uncached = self._add_missing(words, ids)
        if uncached is None and look_up_in_c():
            flat, lengths = gathered(snapshot, words, ids, n)
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
    def _assembled(snapshot: _Snapshot, words: Words, ids: np.ndarray, uncached: tuple | None):
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

    def _add_missing(self, words: Words, ids: np.ndarray) -> tuple[_Snapshot, np.ndarray, tuple | None]:
        """Tokenize the words not cached yet and publish a snapshot holding them; ids valid in that snapshot. When
        they do not fit, the snapshot is kept, their ids stay -1, and the third value holds their pieces: for
        each missing word (in order) its row in `(bounds, pieces)`."""
        with self._lock:
            snapshot = self._snapshot  # newer than the one `ids` came from, whose ids stay valid (append-only)
            missing = np.flatnonzero(ids < 0)
            ids[missing] = verified_ids(snapshot, words, missing)
            missing = np.flatnonzero(ids < 0)
            if not len(missing):
                return snapshot, ids, None
            new_words = self._distinct(words, missing)
            new_bytes = sum(map(len, new_words))
            stored_bytes = int(snapshot.byte_bounds[snapshot.n_words])
            if snapshot.n_words + len(new_words) <= self._max_words and stored_bytes + new_bytes <= self._max_bytes:
                snapshot = self._append(snapshot, new_words)
                self._snapshot = snapshot
                ids[missing] = verified_ids(snapshot, words, missing)
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
    def _positions_in(words: Words, which: np.ndarray, distinct: dict[bytes, int]):
        """For each word at positions `which`, its index among the keys of `distinct`."""
        index = {word: k for k, word in enumerate(distinct)}
        text = words.text.tobytes()
        spans = zip(words.starts[which].tolist(), words.ends[which].tolist(), strict=True)
        return (index[text[start:end]] for start, end in spans)

    @staticmethod
    def _distinct(words: Words, which: np.ndarray) -> dict[bytes, int]:
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
