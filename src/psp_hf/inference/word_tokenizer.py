"""Words to pieces exactly as the tokenizer cuts them inside a sentence: the word cache's link to the tokenizer.

P-SP's pre-tokenizer (Metaspace) splits the normalized text at spaces and the Unigram model segments each part on
its own, so a word's pieces are the same alone as in a sentence whenever the normalizer treats the word the same
beside spaces. For ASCII words that always holds (lowercasing and whitespace folding). For other words it is
checked once per word, on the normalizer itself: the word between two spaces must normalize to the word alone
between them (no character that joins a neighbour across the space, such as a leading combining mark), and alone
to something not empty and without a word-boundary mark of its own. A word that fails is refused: its one piece is
`REFUSED`, and the sentence that holds it goes to the tokenizer.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..errors import native_panics
from .batch_words import concatenated_ranges
from .unigram import UnigramWords

# The piece of a word the cache cannot segment on its own (see the module docstring).
REFUSED = -1
# Words go to the tokenizer at most this many to a string, at least STRINGS_PER_CALL strings a call where each
# keeps MIN_WORDS_PER_CALL words (see WordTokenizer.tokenize).
WORDS_PER_CALL = 4096
MIN_WORDS_PER_CALL = 256
STRINGS_PER_CALL = 4
# The C Unigram search (`unigram.UnigramWords`) is built on the first call with this many words: building it takes
# 50-80 ms, which a call with a few words (a short encode) does not repay; a bulk job's first batch does.
MIN_WORDS_FOR_C_SEARCH = 1024


class WordTokenizer:
    """Tokenizes lists of distinct words (UTF-8 bytes, ASCII letters lowercased) with a `tokenizers.Tokenizer`
    whose pre-tokenizer is Metaspace."""

    def __init__(self, backend):
        self._backend = backend
        self._normalizer = backend.normalizer
        self._mark = getattr(backend.pre_tokenizer, "replacement", None)
        self._starts_word: np.ndarray | None = None  # built on first use (see _word_starts)
        self._c_search: UnigramWords | None = None
        self._c_search_tried = False

    def tokenize(self, words: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """The pieces of each word: `(bounds, pieces)`, word k's being `pieces[bounds[k]:bounds[k + 1]]`; a
        refused word's pieces are `[REFUSED]`. Words the C Unigram search can cut go there (the same pieces, about
        ten times faster: `unigram.py`), the others to the tokenizer (`tokenize_with_library`)."""
        if not self._c_search_tried and len(words) >= MIN_WORDS_FOR_C_SEARCH:
            # Two threads may both build it; either result is the same, and the assignment is atomic.
            self._c_search = UnigramWords.for_backend(self._backend)
            self._c_search_tried = True
        search = self._c_search
        if search is None or not words:
            return self.tokenize_with_library(words)
        eligible, searched = search.cut(words)
        if eligible.all():
            return searched
        if not eligible.any():
            return self.tokenize_with_library(words)
        tokenized = self.tokenize_with_library([words[k] for k in np.flatnonzero(~eligible).tolist()])
        lengths = np.empty(len(words), dtype=np.int64)
        lengths[eligible], lengths[~eligible] = np.diff(searched[0]), np.diff(tokenized[0])
        bounds = np.zeros(len(words) + 1, dtype=np.int64)
        np.cumsum(lengths, out=bounds[1:])
        pieces = np.empty(int(bounds[-1]), dtype=np.int64)
        pieces[concatenated_ranges(bounds[:-1][eligible], lengths[eligible])] = searched[1]
        pieces[concatenated_ranges(bounds[:-1][~eligible], lengths[~eligible])] = tokenized[1]
        return bounds, pieces

    def tokenize_with_library(self, words: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """`tokenize` by the `tokenizers` library alone.

        Words go to the tokenizer joined by spaces, up to `WORDS_PER_CALL` to a string: one encoding per word costs
        more in building its Python object than in segmenting the word (about 2.5x slower on Wikipedia's words). Each
        word's pieces are found again by the pieces that start with the word-boundary mark: one per part of the
        normalized word (more than one where the normalizer splits a word, as P-SP's Arabic one splits off the
        article). A string whose pieces do not show that many starts (a part segmented as one unknown piece that
        swallowed the mark) is tokenized word by word instead.
        """
        if b"".join(words).isascii():  # one check for the usual list (English text): every word one part
            accepted, texts, parts = np.arange(len(words)), words, np.ones(len(words), dtype=np.int64)
        else:
            found = [1 if word.isascii() else self._parts(word) for word in words]  # None: refused
            accepted = np.flatnonzero(np.fromiter((p is not None for p in found), dtype=bool, count=len(words)))
            texts = words if len(accepted) == len(words) else [words[k] for k in accepted.tolist()]
            parts = np.fromiter((p for p in found if p is not None), dtype=np.int64, count=len(accepted))
        lengths = np.ones(len(words), dtype=np.int64)  # a refused word: one piece, REFUSED
        pieces_of: list[np.ndarray] = []
        starts_word = self._word_starts()
        # Several strings a call even for a few hundred words: the tokenizer segments them on its own threads.
        per_call = min(WORDS_PER_CALL, max(MIN_WORDS_PER_CALL, -(-len(texts) // STRINGS_PER_CALL)))
        spans = [(k, min(k + per_call, len(texts))) for k in range(0, len(texts), per_call)]
        with native_panics("the model's tokenizer"):
            encodings = self._backend.encode_batch_fast(
                [b" ".join(texts[start:stop]).decode("utf-8") for start, stop in spans], add_special_tokens=False
            )
        for (start, stop), encoding in zip(spans, encodings, strict=True):
            ids = np.array(encoding.ids, dtype=np.int64)
            firsts = np.flatnonzero(starts_word[ids]) if starts_word is not None else np.zeros(0, dtype=np.int64)
            part_of_word = np.zeros(stop - start + 1, dtype=np.int64)
            np.cumsum(parts[start:stop], out=part_of_word[1:])
            if len(firsts) == part_of_word[-1] and firsts[0] == 0:
                lengths[accepted[start:stop]] = np.diff(firsts[part_of_word[:-1]], append=len(ids))
            else:
                lengths[accepted[start:stop]], ids = self._one_by_one(texts[start:stop])
            pieces_of.append(ids)
        bounds = np.zeros(len(words) + 1, dtype=np.int64)
        np.cumsum(lengths, out=bounds[1:])
        if len(accepted) == len(words):
            return bounds, np.concatenate(pieces_of) if pieces_of else np.zeros(0, dtype=np.int64)
        pieces = np.full(int(bounds[-1]), REFUSED, dtype=np.int64)
        if len(accepted):
            is_accepted = np.zeros(len(words), dtype=bool)
            is_accepted[accepted] = True
            pieces[np.repeat(is_accepted, lengths)] = np.concatenate(pieces_of)
        return bounds, pieces

    def _parts(self, word: bytes) -> int | None:
        """How many parts the normalizer makes of a word beyond ASCII, when its pieces alone are its pieces in a
        sentence; else None (refused)."""
        try:
            text = word.decode("utf-8")
        except UnicodeDecodeError:  # a lone surrogate: the tokenizer decides what to do with its sentence
            return None
        normalizer = self._normalizer
        if normalizer is None or not self._mark:
            return None
        alone = normalizer.normalize_str(text)
        # A mark of its own would make the pre-tokenizer's parts differ after a space; empty, the word would leave
        # two spaces that the normalizer folds in a sentence but not here; spaces at its ends or side by side
        # (a normalizer that does not strip or fold them) would be parts of their own in a sentence.
        if not alone or self._mark in alone or alone != alone.strip(" ") or "  " in alone:
            return None
        return alone.count(" ") + 1 if normalizer.normalize_str(f"a {text} a") == f"a {alone} a" else None

    def _one_by_one(self, words: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """`(lengths, pieces)` of `words`, one encoding per word."""
        with native_panics("the model's tokenizer"):
            encodings = self._backend.encode_batch_fast([w.decode("utf-8") for w in words], add_special_tokens=False)
        ids = [encoding.ids for encoding in encodings]
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        return lengths, np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))

    def _word_starts(self) -> np.ndarray | None:
        """Which piece ids begin with the word-boundary mark; None if the pre-tokenizer has no mark."""
        if self._starts_word is None and self._mark:
            starts = np.zeros(self._backend.get_vocab_size(with_added_tokens=True), dtype=bool)
            for piece, index in self._backend.get_vocab(with_added_tokens=True).items():
                starts[index] = piece.startswith(self._mark)
            self._starts_word = starts
        return self._starts_word
