"""Sentencepiece vocabularies for P-SP: training, and conversion to a fast `tokenizer.json`.

Lowercasing is part of the converted tokenizer's normalizer, so every loader (psp, AutoTokenizer,
sentence-transformers) lowercases the same way. So is the removal of Arabic's optional marks (harakat, shadda,
sukun, superscript alef, tatweel): Arabic writes them only now and then, so without this the marked and the bare
spelling of one word would be different pieces. And so is the split of Arabic's definite article (with the
conjunctions and prepositions written onto it: وال, بال, لل, ...) from the word it starts, so that "المال" (the
money), "مال" and "ومال" share the piece of the word instead of each being a piece of its own. A vocabulary with
Chinese pieces also folds Traditional characters into Simplified ones (`chinese_script`): the two scripts of one
word share its pieces.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import SimpleNamespace

from transformers import PreTrainedTokenizerFast

from ..errors import PSPInputError
from .chinese_script import fold_traditional, folding_charsmap, has_chinese

UNK_PIECE = "<unk>"
PAD_PIECE = "<pad>"
UNK_ID = 0
PAD_ID = 1
SPM_FILENAME = "sentencepiece.model"
# Arabic's optional marks: fathatan..sukun and the other combining marks up to U+065F, superscript alef, tatweel.
OPTIONAL_MARKS = "[\u064b-\u065f\u0670\u0640]"
_OPTIONAL_MARKS = re.compile(OPTIONAL_MARKS)
# The definite article and what is written onto it, longest first. Each is split off only at a word's start and
# only before three more Arabic letters, so short words that merely begin with these letters (الى, التي) stay whole.
ARABIC_LETTER = "[\u0621-\u064a]"
ARTICLE_PREFIXES = ("وبال", "وال", "فال", "بال", "كال", "لل", "ال")
ARTICLE_SPLITS = tuple((f"(?<!\\S){prefix}(?={ARABIC_LETTER}{{3}})", f"{prefix} ") for prefix in ARTICLE_PREFIXES)
_ARTICLE_SPLITS = tuple((re.compile(pattern), replacement) for pattern, replacement in ARTICLE_SPLITS)
_ARABIC_LETTER = re.compile(ARABIC_LETTER)


def strip_optional_marks(text: str) -> str:
    """`text` without Arabic's optional marks, as the tokenizer's normalizer removes them."""
    return _OPTIONAL_MARKS.sub("", text)


def split_arabic_article(text: str) -> str:
    """`text` with the Arabic definite article split from the words it starts, as the tokenizer's normalizer does
    (one rule after another, each over the whole text)."""
    if not _ARABIC_LETTER.search(text):
        return text  # one pass instead of one per rule for the sentences of every other language
    for pattern, replacement in _ARTICLE_SPLITS:
        text = pattern.sub(replacement, text)
    return text


def _iter_texts(texts_or_files: Iterable[str | os.PathLike] | os.PathLike, lowercase: bool) -> Iterator[str]:
    # A `Path` is a file of sentences (one a line); a `str` is a sentence. Never guess from a string.
    if isinstance(texts_or_files, os.PathLike):
        texts_or_files = [texts_or_files]
    for item in texts_or_files:
        lines = _read_lines(Path(item)) if isinstance(item, os.PathLike) else (item,)
        for line in lines:
            line = line.strip()
            if line:
                line = strip_optional_marks(line)
                if line.strip():
                    yield fold_traditional(split_arabic_article(line.lower() if lowercase else line))


def _read_lines(path: Path) -> Iterator[str]:
    from ..io.reading import open_text

    with open_text(path) as handle:
        yield from handle


def train_sentencepiece(
    texts_or_files: Iterable[str | os.PathLike] | os.PathLike,
    vocab_size: int = 50000,
    character_coverage: float = 0.9995,
    lowercase: bool = True,
    input_sentence_size: int = 2_000_000,
    seed: int = 0,
    num_threads: int | None = None,
) -> bytes:
    """Train a sentencepiece unigram model; returns the serialized model proto.

    `texts_or_files` is an iterable of sentences (`str`) and/or files (`pathlib.Path`, one sentence a line,
    `.gz` ok), or a single `Path`.
    The vocabulary may end smaller than `vocab_size` on little text (no hard limit), so tiny corpora work.
    """
    import sentencepiece as spm

    if vocab_size < 8:
        raise ValueError(f"vocab_size must be at least 8, got {vocab_size}")
    model = io.BytesIO()
    texts = _iter_texts(texts_or_files, lowercase)
    first = next(texts, None)
    if first is None:
        raise PSPInputError("no text to train the tokenizer on: every input was empty")
    failures: list[BaseException] = []

    def all_texts() -> Iterator[str]:
        # An error while reading (bad UTF-8, a short row, a truncated .gz) would reach the user wrapped by the C++
        # trainer as "RuntimeError: INTERNAL: ..."; it is kept aside, the input ends, and it is raised below.
        yield first
        try:
            yield from texts
        except Exception as error:  # noqa: BLE001 - re-raised as it is after the trainer returns
            failures.append(error)

    spm.set_random_generator_seed(seed)
    try:
        _train_spm(spm, all_texts(), model, vocab_size, character_coverage, input_sentence_size, num_threads)
    except RuntimeError:
        if failures:
            raise failures[0] from None
        raise
    if failures:
        raise failures[0]
    return model.getvalue()


def _train_spm(spm, sentences, model, vocab_size, character_coverage, input_sentence_size, num_threads) -> None:
    spm.SentencePieceTrainer.train(
        sentence_iterator=sentences,
        model_writer=model,
        model_type="unigram",
        vocab_size=vocab_size,
        hard_vocab_limit=False,
        character_coverage=character_coverage,
        unk_id=UNK_ID,
        pad_id=PAD_ID,
        bos_id=-1,
        eos_id=-1,
        unk_piece=UNK_PIECE,
        pad_piece=PAD_PIECE,
        input_sentence_size=input_sentence_size,
        shuffle_input_sentence=True,
        num_threads=num_threads or os.cpu_count() or 1,
        minloglevel=2,
    )


def fast_tokenizer_from_sentencepiece(
    spm_model: bytes | str | os.PathLike, lowercase: bool = True, fold_chinese: bool | None = None
):
    """Convert a sentencepiece unigram model to a `tokenizers.Tokenizer` with the same segmentation.

    `fold_chinese`: whether the normalizer folds Traditional Chinese characters into Simplified ones (`None`: when
    the vocabulary has Chinese pieces, as `train_tokenizer`'s vocabularies are trained on folded text)."""
    import tempfile

    from tokenizers import Regex, normalizers, pre_tokenizers
    from transformers.convert_slow_tokenizer import SpmConverter

    class _PSPSpmConverter(SpmConverter):
        # sentencepiece strips leading and trailing whitespace and folds runs of spaces before segmenting.
        def normalizer(self, proto):
            steps = [normalizers.Lowercase()] if lowercase else []
            steps.append(normalizers.Replace(Regex(OPTIONAL_MARKS), ""))
            # Only a vocabulary with Arabic pieces gets the article's rules: every rule is one more pass over each
            # sentence that does not go through the word cache, which other languages need not pay.
            if any(_ARABIC_LETTER.search(piece.piece) for piece in proto.pieces):
                steps += [normalizers.Replace(Regex(pattern), replacement) for pattern, replacement in ARTICLE_SPLITS]
            fold = has_chinese(piece.piece for piece in proto.pieces) if fold_chinese is None else fold_chinese
            if fold:  # before the vocabulary's own map, as the training text was folded before sentencepiece's
                steps.append(normalizers.Precompiled(folding_charsmap()))
            if proto.normalizer_spec.precompiled_charsmap:
                steps.append(normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap))
            steps += [normalizers.Strip(left=True, right=True), normalizers.Replace(Regex(" {2,}"), " ")]
            return normalizers.Sequence(steps)

        def pre_tokenizer(self, replacement, add_prefix_space):
            return pre_tokenizers.Metaspace(replacement=replacement, prepend_scheme="always", split=True)

    if isinstance(spm_model, bytes):
        with tempfile.NamedTemporaryFile(suffix=".model", delete=False) as handle:
            handle.write(spm_model)
        path = handle.name
    else:
        path = os.fspath(spm_model)
    try:
        original = SimpleNamespace(vocab_file=path, add_prefix_space=True, legacy=True)
        return _PSPSpmConverter(original).converted()
    finally:
        if isinstance(spm_model, bytes):
            os.unlink(path)


def wrap_fast_tokenizer(backend) -> PreTrainedTokenizerFast:
    """Wrap a `tokenizers.Tokenizer` as a transformers fast tokenizer with P-SP's special pieces."""
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token=UNK_PIECE,
        pad_token=PAD_PIECE,
        model_max_length=1_000_000,
        clean_up_tokenization_spaces=False,
    )


def train_tokenizer(
    texts_or_files: Iterable[str | os.PathLike] | os.PathLike,
    vocab_size: int = 50000,
    output_dir: str | os.PathLike | None = None,
    character_coverage: float = 0.9995,
    lowercase: bool = True,
    **kwargs,
) -> PreTrainedTokenizerFast:
    """Train a sentencepiece unigram vocabulary and return it as a fast tokenizer.

    With `output_dir`, writes `tokenizer.json`, `tokenizer_config.json` and the original
    `sentencepiece.model` there.
    """
    spm_bytes = train_sentencepiece(
        texts_or_files,
        vocab_size=vocab_size,
        character_coverage=character_coverage,
        lowercase=lowercase,
        **kwargs,
    )
    tokenizer = wrap_fast_tokenizer(fast_tokenizer_from_sentencepiece(spm_bytes, lowercase=lowercase))
    if output_dir is not None:
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        tokenizer.save_pretrained(out)
        (out / SPM_FILENAME).write_bytes(spm_bytes)
    return tokenizer


__all__ = [
    "PAD_ID",
    "PAD_PIECE",
    "SPM_FILENAME",
    "UNK_ID",
    "UNK_PIECE",
    "fast_tokenizer_from_sentencepiece",
    "split_arabic_article",
    "strip_optional_marks",
    "train_sentencepiece",
    "train_tokenizer",
    "wrap_fast_tokenizer",
]
