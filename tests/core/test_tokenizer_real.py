"""Segmentation agreement with sentencepiece on every STS 2012–2016 sentence (real data)."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

from psp_hf import PSPEncoder
from psp_hf.data_folder import data_dir, english_training_text, sts_sentences
from psp_hf.tokenization.pieces import SPM_FILENAME, train_tokenizer

DATA = data_dir()
if not (DATA / "sts").is_dir():
    if os.environ.get("CI"):
        raise RuntimeError(f"real data missing at {DATA} (set PSP_DATA)")
    pytest.skip(f"real data not found at {DATA} (set PSP_DATA)", allow_module_level=True)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("spm")
    text = list(itertools.islice(english_training_text(), 0, 600_000, 3))
    tokenizer = train_tokenizer(text, vocab_size=16000, output_dir=folder)
    return tokenizer, folder


@pytest.mark.slow
def test_sts_segmentation_agrees_with_sentencepiece(trained):
    import sentencepiece as spm

    tokenizer, folder = trained
    processor = spm.SentencePieceProcessor(model_file=str(folder / SPM_FILENAME))
    sentences = sts_sentences()
    assert len(sentences) == 2 * (3108 + 1500 + 3750 + 3000 + 1186)
    expected = processor.encode([s.lower() for s in sentences])
    got = [e.ids for e in tokenizer.backend_tokenizer.encode_batch(sentences, add_special_tokens=False)]
    agreement = np.mean([a == b for a, b in zip(expected, got, strict=True)])
    print(f"\nsentencepiece agreement on {len(sentences)} STS 2012-2016 sentences: {agreement:.5%}")
    assert agreement >= 0.999


@pytest.mark.slow
def test_word_cache_path_equals_tokenizer_on_sts(trained):
    tokenizer, _ = trained
    encoder = PSPEncoder.from_tokenizer(tokenizer, hidden_size=4)
    sentences = sts_sentences()
    ids, offsets = encoder.tokenize(sentences)
    expected = [e.ids for e in encoder._backend.encode_batch(sentences, add_special_tokens=False)]
    assert ids.tolist() == list(itertools.chain.from_iterable(expected))
    lengths = np.diff(np.append(offsets.numpy(), ids.numel()))
    assert lengths.tolist() == [len(row) for row in expected]


def unlabeled_lines(start: int, stop: int) -> list[str]:
    """Lines start..stop of every unlabeled file in the data folder: nine languages, eight scripts' worth of words."""
    import gzip

    lines = []
    files = sorted((DATA / "unlabeled").glob("*/*/sentences.txt.gz"))
    assert len(files) >= 9
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            lines += [line.rstrip("\n") for line in itertools.islice(handle, start, stop)]
    return lines


@pytest.mark.slow
def test_word_cache_path_equals_tokenizer_in_every_language():
    # A vocabulary with Arabic pieces gets the article-splitting rules: words the normalizer cuts in two.
    tokenizer = train_tokenizer(unlabeled_lines(0, 3000), vocab_size=8000, character_coverage=0.9995)
    encoder = PSPEncoder.from_tokenizer(tokenizer, hidden_size=4)
    sentences = unlabeled_lines(3000, 6000)
    for start in range(0, len(sentences), 1024):  # batches, as encode sends them: the cache fills as it goes
        batch = sentences[start : start + 1024]
        ids, offsets = encoder.tokenize_numpy(batch)
        expected = [e.ids for e in encoder.backend_tokenizer.encode_batch(batch, add_special_tokens=False)]
        assert ids.tolist() == list(itertools.chain.from_iterable(expected))
        assert np.diff(np.append(offsets, len(ids))).tolist() == [len(row) for row in expected]
    assert len(encoder._word_cache) > 100_000  # the words beyond ASCII went through the cache, not around it
