"""The word cache's new words cut by the model's Unigram segmentation in C (`_unigram.c`), without the `tokenizers`
library: the same pieces, about ten times faster, with the GIL released.

A bulk job meets most of its distinct words once (1M Wikipedia sentences: 836,000), and before this each went
through the library: about 4.3 s of one core for `psp embed` on those sentences, a third of its time, much of it
under the cache's lock. The C search is the library's (see the C file's header), and it runs only where its answer
cannot differ:

- the model is a `Unigram` model without byte fallback behind a `Metaspace` pre-tokenizer that marks every word;
- the word is printable ASCII, each of its characters one the normalizer leaves as it is (alone and between
  letters), and none the first character of an added token (which the library matches before the model runs).

Other words, and every word where the kernel was not built or `PSP_C_KERNELS=0`, go to the library as before.
"""

from __future__ import annotations

import json

import numpy as np

from .kernels import load_kernel

_kernel = load_kernel("_unigram")  # None: every word goes to the library

# The library's penalty below the lowest piece score for a character no piece covers (unigram::model::K_UNK_PENALTY).
UNKNOWN_PENALTY = 10.0
_PRINTABLE = range(33, 127)


def _safe_bytes(backend) -> np.ndarray:
    """Which bytes a word may hold for the C search: printable ASCII that the normalizer keeps (alone and inside a
    word), upper-case letters aside (the cache lowercases them first), and no added token's first character."""
    safe = np.zeros(256, dtype=bool)
    normalizer = backend.normalizer
    added = {token.content[:1] for token in backend.get_added_tokens_decoder().values()}
    for byte in _PRINTABLE:
        char = chr(byte)
        if char.isupper() or char in added:
            continue
        inside = f"a{char}a"
        if normalizer is None or (
            normalizer.normalize_str(char) == char and normalizer.normalize_str(inside) == inside
        ):
            safe[byte] = True
    return safe


class UnigramWords:
    """The pieces of words (UTF-8 bytes, ASCII letters lowercased) as the model's Unigram segmentation cuts them
    after the Metaspace mark, by the C search; `for_backend` says whether a tokenizer allows it."""

    def __init__(self, pieces: list[str], scores: np.ndarray, unk_id: int, safe: np.ndarray):
        # Only pieces that can match a word of ASCII after the mark go into the trie (the others as empty entries,
        # which keep the ids): for a multilingual vocabulary most of it.
        encoded = [piece.encode("utf-8") if piece.removeprefix("\u2581").isascii() else b"" for piece in pieces]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(piece) for piece in encoded], out=offsets[1:])
        blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        capacity = 1 << max(4, int(2 * len(blob)).bit_length())
        self._keys = np.zeros(capacity, dtype=np.uint32)
        self._children = np.zeros(capacity, dtype=np.int32)
        self._node_piece = np.full(len(blob) + 1, -1, dtype=np.int32)
        _kernel.build_trie(blob, offsets, self._keys, self._children, self._node_piece)
        self._scores = np.ascontiguousarray(scores, dtype=np.float64)
        self._unk_id = int(unk_id)
        self._unk_score = float(self._scores.min()) - UNKNOWN_PENALTY
        self._safe = safe

    @classmethod
    def for_backend(cls, backend) -> UnigramWords | None:
        """The C search for `backend` (a `tokenizers.Tokenizer`), or None where it might cut differently from the
        library or the kernel was not built."""
        if _kernel is None:
            return None
        pre = backend.pre_tokenizer
        if type(pre).__name__ != "Metaspace" or getattr(pre, "replacement", None) != "\u2581":
            return None
        if getattr(pre, "prepend_scheme", None) != "always" or not getattr(pre, "split", False):
            return None
        model = json.loads(backend.to_str()).get("model", {})
        if model.get("type") != "Unigram" or model.get("byte_fallback") or model.get("unk_id") is None:
            return None
        vocab = model["vocab"]
        scores = np.fromiter((score for _, score in vocab), dtype=np.float64, count=len(vocab))
        return cls([piece for piece, _ in vocab], scores, model["unk_id"], _safe_bytes(backend))

    def eligible(self, words: list[bytes]) -> np.ndarray:
        """Which of `words` the C search cuts (see the module docstring)."""
        return self._eligible(*_joined(words))

    def segment(self, words: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """`(bounds, pieces)`: word k's pieces are `pieces[bounds[k]:bounds[k + 1]]` (every word eligible)."""
        return self._segment(*_joined(words))

    def cut(self, words: list[bytes]) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """`(eligible, (bounds, pieces))`: which words the search cuts and their pieces, in order; the words are
        joined once when all are eligible (the usual list)."""
        blob, offsets = _joined(words)
        eligible = self._eligible(blob, offsets)
        if not eligible.all():
            blob, offsets = _joined([word for word, ok in zip(words, eligible.tolist(), strict=True) if ok])
        return eligible, self._segment(blob, offsets)

    def _eligible(self, blob: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        unsafe = np.zeros(len(blob) + 1, dtype=np.int64)
        np.cumsum(~self._safe[blob], out=unsafe[1:])
        # A word is eligible when it is not empty and none of its bytes is unsafe (a running count of those).
        return (offsets[1:] > offsets[:-1]) & (unsafe[offsets[1:]] == unsafe[offsets[:-1]])

    def _segment(self, blob: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(offsets) - 1
        lengths = np.empty(n, dtype=np.int64)
        pieces = np.empty(len(blob) + n, dtype=np.int64)
        total = _kernel.segment(
            self._keys, self._children, self._node_piece, self._scores, blob, offsets, self._unk_id,
            self._unk_score, True, lengths, pieces,
        )  # fmt: skip
        bounds = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=bounds[1:])
        return bounds, pieces[:total]


def _joined(words: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """`words` back to back as one byte array, and where each starts and ends (`offsets[k]:offsets[k + 1]`)."""
    offsets = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, words), dtype=np.int64, count=len(words)), out=offsets[1:])
    return np.frombuffer(b"".join(words), dtype=np.uint8), offsets
