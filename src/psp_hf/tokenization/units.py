"""WORD and TRIGRAM units (ParaNMT-50M) beside sentencepiece pieces: their tokenizers and vocabularies.

* WORD alone: a `tokenizers` WordLevel tokenizer over whitespace words (lowercased with `lowercase`), its
  vocabulary the words seen at least `min_count` times. The ids are the units, so the model is a plain average
  (psp's numpy path, sentence-transformers layout).
* TRIGRAM, and WORD with TRIGRAM (combinations): `tokenizers` cannot emit overlapping pieces, so the tokenizer
  gives characters (a WordLevel over single characters, one space id between words) and the model forms the words
  and the trigrams of each word (``#cat#`` -> ``#ca``, ``cat``, ``at#``, with the space as ``#``) from them
  (`psp_hf.modeling.encoders_psp.unit_codes`). The vocabulary is the units' codes seen at least `min_count` times,
  sorted; the code at index i is table row i + 2 (rows 0 and 1: unknown and padding).

Both tokenizers are plain `tokenizer.json` files that `AutoTokenizer` loads without remote code.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import native_panics

UNK, PAD, SPACE = "<unk>", "<pad>", " "
UNIT_CHOICES = ("piece", "word", "trigram")
MODEL_UNITS = {"word": "words", "trigram": "trigrams"}  # --units name -> PSPConfig.units for character input


def _normalizer(lowercase: bool):
    from tokenizers import Regex, normalizers

    steps = [normalizers.NFKC()] + ([normalizers.Lowercase()] if lowercase else [])
    steps += [normalizers.Strip(), normalizers.Replace(Regex(r"\s+"), SPACE)]
    return normalizers.Sequence(steps)


def word_tokenizer(words: Iterable[str], lowercase: bool = True):
    """A WordLevel `tokenizers.Tokenizer` over whitespace words: `<unk>` 0, `<pad>` 1, then `words` in order."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {UNK: 0, PAD: 1}
    for word in words:
        vocab.setdefault(word, len(vocab))
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tokenizer.normalizer = _normalizer(lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tokenizer


def char_tokenizer(chars: Iterable[str], lowercase: bool = True):
    """A character `tokenizers.Tokenizer`: `<unk>` 0, `<pad>` 1, the word separator `" "` 2, then `chars`."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    vocab = {UNK: 0, PAD: 1, SPACE: 2}
    for char in chars:
        vocab.setdefault(char, len(vocab))
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tokenizer.normalizer = _normalizer(lowercase)
    # Every character, the separator included, is its own token.
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    return tokenizer


@dataclass
class UnitVocabulary:
    """What a run with WORD/TRIGRAM units needs: the tokenizer, `PSPConfig` settings, and the unit codes."""

    tokenizer: object  # tokenizers.Tokenizer
    config: dict = field(default_factory=dict)  # PSPConfig keyword arguments (units, unit_count, ...)
    codes: list[list[int]] = field(default_factory=list)  # sorted unit codes per encoder (character input)

    def to_json(self) -> dict:
        return {"config": self.config, "codes": self.codes}


def build_units(
    texts: Iterable[str],
    units: str,
    second_units: str | None = None,
    min_count: int = 1,
    lowercase: bool = True,
    batch: int = 10_000,
) -> UnitVocabulary:
    """Tokenizer and vocabularies for `units` (and `second_units` of a combination) from `texts`.

    WORD alone (or WORD with WORD) gives a WordLevel tokenizer; any TRIGRAM gives a character tokenizer and
    sorted unit codes for each encoder. Units seen fewer than `min_count` times are left out (they are unknown).
    """
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    texts = list(texts)
    normalizer = _normalizer(lowercase)
    normalized = [normalizer.normalize_str(text) for text in texts]
    if units == "word" and second_units in (None, "word"):
        counts = Counter(word for text in normalized for word in text.split())
        kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        return UnitVocabulary(word_tokenizer(kept, lowercase), {"units": "tokens"})
    char_counts = Counter(itertools.chain.from_iterable(text.replace(SPACE, "") for text in normalized))
    tokenizer = char_tokenizer(sorted(char_counts, key=lambda c: (-char_counts[c], c)), lowercase)
    char_vocab_size = tokenizer.get_vocab_size()
    all_codes = [_count_codes(tokenizer, texts, MODEL_UNITS[u], char_vocab_size, min_count, batch) for u in
                 [units] + ([second_units] if second_units else [])]  # fmt: skip
    config = {
        "units": MODEL_UNITS[units],
        "word_separator_id": 2,
        "char_vocab_size": char_vocab_size,
        "unit_count": len(all_codes[0]),
        # The table is at least as large as the tokenizer (PSPEncoder's check); extra rows are never used.
        "vocab_size": max(len(all_codes[0]) + 2, char_vocab_size),
    }
    if second_units:
        config["second_encoder"] = {
            "units": MODEL_UNITS[second_units],
            "unit_count": len(all_codes[1]),
            "vocab_size": len(all_codes[1]) + 2,
        }
    return UnitVocabulary(tokenizer, config, all_codes)


def _count_codes(tokenizer, texts: list[str], units: str, char_vocab_size: int, min_count: int, batch: int):
    import torch

    from ..modeling.encoders_psp import unit_codes

    totals: Counter = Counter()
    for start in range(0, len(texts), batch):
        with native_panics("the tokenizer"):
            encodings = tokenizer.encode_batch_fast(texts[start : start + batch], add_special_tokens=False)
        ids = [encoding.ids for encoding in encodings]
        lengths = torch.tensor([len(i) for i in ids])
        offsets = torch.zeros_like(lengths)
        offsets[1:] = torch.cumsum(lengths, 0)[:-1]
        flat = torch.tensor(list(itertools.chain.from_iterable(ids)), dtype=torch.long)
        codes, _ = unit_codes(flat, offsets, units, 2, char_vocab_size)
        values, counts = torch.unique(codes, return_counts=True)
        totals.update(dict(zip(values.tolist(), counts.tolist(), strict=True)))
    return sorted(code for code, count in totals.items() if count >= min_count)


def load_unit_codes(model, codes: list[list[int]]) -> None:
    """Put the sorted unit codes of `build_units` into a new model's buffers."""
    import torch

    names = ["unit_codes", "second_unit_codes"]
    for name, values in zip(names, codes, strict=False):
        buffer = getattr(model, name)
        buffer.copy_(torch.tensor(values, dtype=torch.long))


__all__ = [
    "MODEL_UNITS",
    "UNIT_CHOICES",
    "UnitVocabulary",
    "build_units",
    "char_tokenizer",
    "load_unit_codes",
    "model_for_units",
    "word_tokenizer",
]


def model_for_units(
    vocabulary: UnitVocabulary,
    hidden_size: int,
    encoder_type: str = "mean",
    combination: str | None = None,
    second_encoder_type: str = "mean",
    seed: int = 0,
    **config_kwargs,
):
    """A new `PSPModel` (random table(s), the unit codes loaded) and `build_units`' tokenizer for it: the two
    halves of a `PSPEncoder(model, tokenizer)`."""
    import torch

    from ..modeling import PSPConfig, PSPModel
    from .pieces import wrap_fast_tokenizer

    tokenizer = wrap_fast_tokenizer(vocabulary.tokenizer)
    config = {"vocab_size": len(tokenizer), **vocabulary.config, **config_kwargs}
    if combination is not None:
        second = config.get("second_encoder")
        if second is None and config["units"] != "tokens":
            raise ValueError("a combination over characters needs build_units(..., second_units=...)")
        second = second or {"units": "tokens", "vocab_size": config["vocab_size"]}
        config.update(combination=combination, second_encoder={**second, "encoder_type": second_encoder_type})
    else:
        config.pop("second_encoder", None)
    config = PSPConfig(
        hidden_size=hidden_size,
        pad_token_id=tokenizer.pad_token_id,
        unk_token_id=tokenizer.unk_token_id,
        word_boundary_token_id=-1,  # no sentencepiece boundary piece in these tokenizers
        encoder_type=encoder_type,
        **config,
    )
    torch.manual_seed(seed)
    model = PSPModel(config)
    if vocabulary.codes:
        load_unit_codes(model, vocabulary.codes)
    return model, tokenizer
