"""Segmentation agreement with sentencepiece on every STS 2012–2016 sentence (real data)."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

from psp_hf import PSPEncoder
from psp_hf.data_folder import data_dir, english_training_text, sts_sentences
from psp_hf.tokenizer import SPM_FILENAME, train_tokenizer

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
