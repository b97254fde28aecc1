"""Helpers of `PSPEncoder` that need no encoder state: tokenizer checks and copies, input checks."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import native_panics
from . import batch_words


def word_cache_applies(config: dict) -> bool:
    """The word cache is exact only for P-SP's own pipeline: lowercase + charsmap, whitespace-split Metaspace."""
    normalizer = config.get("normalizer") or {}
    steps = [step.get("type") for step in normalizer.get("normalizers", [])]
    pre_tokenizer = config.get("pre_tokenizer") or {}
    return (
        steps[:1] == ["Lowercase"]
        and set(steps) <= {"Lowercase", "Precompiled", "Strip", "Replace"}
        and pre_tokenizer.get("type") == "Metaspace"
        and pre_tokenizer.get("split", False)
        and pre_tokenizer.get("prepend_scheme") == "always"
        and (config.get("model") or {}).get("type") == "Unigram"
    )


# Up to this many sentences, the tokenizer itself is quicker than the word cache's bookkeeping.
FEW_SENTENCES = 4


def private_backend(backend):
    from tokenizers import Tokenizer

    copy = Tokenizer.from_str(backend.to_str())
    copy.no_padding()
    copy.no_truncation()
    return copy


def sentence_list(sentences) -> tuple[Sequence[str], bool]:
    """`(sentences as a sequence, whether one string was given)`, every item checked (`check_sentences`)."""
    if isinstance(sentences, str):
        return [sentences], True
    if isinstance(sentences, (set, frozenset, dict)) or not hasattr(sentences, "__iter__"):
        # A set has no order: row i could not be said to belong to any one sentence.
        raise TypeError(
            f"sentences must be a string or an ordered sequence of strings (a list), got {type(sentences).__name__}"
        )
    if not isinstance(sentences, Sequence):
        sentences = list(sentences)
    check_sentences(sentences)
    return sentences, False


def checked_output(out, batch_size, n: int, width: int) -> np.ndarray:
    """`out` (or a new float32 `(n, width)` array) after checking it and `batch_size`."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if out is None:
        return np.empty((n, width), dtype=np.float32)
    if out.shape != (n, width) or out.dtype != np.float32:
        raise ValueError(f"out must be float32 of shape {(n, width)}, got {out.dtype} {out.shape}")
    return out


def check_sentences(sentences: Sequence) -> None:
    """Every item a string that UTF-8 can encode; errors name the index."""
    # One pass over the items in C where it was built, without the joined text below (that was a serial step
    # before encode's threads start: an eighth of a one-thread encode of short sentences).
    first = batch_words.first_bad_sentence(sentences)
    if first is None:  # no kernel, or not a list or tuple
        first = 0
        try:  # one pass in C for the usual case: all strings, all valid Unicode
            joined = "".join(sentences)
            if joined.isascii() or joined.encode("utf-8"):
                return
        except (TypeError, UnicodeEncodeError):
            pass
    elif first < 0:
        return
    for index in range(first, len(sentences)):
        sentence = sentences[index]
        if not isinstance(sentence, str):
            raise TypeError(f"sentences[{index}] is {type(sentence).__name__}, expected str")
        if not sentence.isascii():
            try:
                sentence.encode("utf-8")
            except UnicodeEncodeError as error:
                raise ValueError(
                    f"sentences[{index}] has a lone surrogate {sentence[error.start]!r} at character {error.start}; "
                    "it is not valid Unicode text"
                ) from None


def fast_tokenizer(backend, unk_token_id: int, pad_token_id: int):
    """A transformers fast tokenizer over a copy of `backend`, naming its own unknown and padding pieces."""
    from transformers import PreTrainedTokenizerFast

    backend = private_backend(backend)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token=backend.id_to_token(unk_token_id),
        pad_token=backend.id_to_token(pad_token_id),
        model_max_length=1_000_000,
        clean_up_tokenization_spaces=False,
    )


def backend_ids(backend, sentences: Sequence[str], what: str) -> tuple[np.ndarray, np.ndarray]:
    """`(flat ids, lengths)` of `sentences` from a `tokenizers.Tokenizer` (a panic of it is a `PSPInputError`)."""
    with native_panics(what):
        encodings = backend.encode_batch_fast(list(sentences), add_special_tokens=False)
    if len(encodings) == 1:
        ids = encodings[0].ids
        return np.array(ids, dtype=np.int64), np.array([len(ids)], dtype=np.int64)
    ids_per_sentence = [encoding.ids for encoding in encodings]
    lengths = np.fromiter(map(len, ids_per_sentence), dtype=np.int64, count=len(ids_per_sentence))
    flat = np.fromiter(itertools.chain.from_iterable(ids_per_sentence), dtype=np.int64, count=int(lengths.sum()))
    return flat, lengths


def check_encode_options(precision: str, truncate_dim: int | None, dim: int, ignored: dict) -> None:
    """`encode`'s options checked before any work; a keyword psp has no use for, given a value, is warned about
    (sentence-transformers' `prompt`, a misspelt `normalise_embeddings`), not silently dropped."""
    from .quantization import check_precision, check_truncate_dim

    check_precision(precision)
    check_truncate_dim(truncate_dim, dim)
    if ignored.get("output_value", "sentence_embedding") != "sentence_embedding":
        raise ValueError("output_value: psp encode gives sentence embeddings only (PSPModel gives per-piece rows)")
    unused = sorted(name for name, value in ignored.items() if value is not None and name != "output_value")
    if unused:  # stacklevel: the caller of encode
        warnings.warn(f"PSPEncoder.encode ignores {', '.join(unused)}: not an option of psp", stacklevel=3)


def finished_output(out: np.ndarray, precision: str, single: bool, as_tensor: bool, device: Any = None) -> Any:
    """What `encode` returns from its float32 rows: quantised as `precision`, one row for a single sentence, a
    torch tensor on `device` when asked."""
    result = out
    if precision != "float32":  # also for no sentences: an empty int8 result is still int8
        from .quantization import quantize_embeddings

        result = quantize_embeddings(out, precision)
    result = result[0] if single else result
    if as_tensor:
        import torch

        return torch.from_numpy(np.ascontiguousarray(result)).to(device or "cpu")
    return result
