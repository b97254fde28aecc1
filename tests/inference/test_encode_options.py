"""encode's sentence-transformers options: precision, truncate_dim, device, ignored keywords; similarity types."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers.util.quantization import quantize_embeddings as st_quantize

from psp_hf import PSPEncoder
from psp_hf.inference.quantization import quantize_embeddings
from psp_hf.tokenization.pieces import train_tokenizer

CORPUS = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "Two dogs run across the green field.",
    "The children are playing football in the park.",
    "Stocks fell sharply on Monday after the announcement.",
    "She reads a book about ancient history.",
    "A cat sleeps on the warm windowsill.",
] * 20
SENTENCES = CORPUS[:7] + ["A dog is playing.", "Monday was sunny.", "Children read books."]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> PSPEncoder:
    folder: Path = tmp_path_factory.mktemp("enc")
    tokenizer = train_tokenizer(CORPUS, vocab_size=100, output_dir=folder / "tok")
    PSPEncoder.from_tokenizer(tokenizer, hidden_size=24, seed=1).save_pretrained(folder / "model")
    return PSPEncoder.from_pretrained(folder / "model")


@pytest.mark.parametrize("precision", ["int8", "uint8", "binary", "ubinary", "float32"])
def test_precision_equals_sentence_transformers(encoder, precision):
    full = encoder.encode(SENTENCES)
    ours = encoder.encode(SENTENCES, precision=precision)
    theirs = st_quantize(full, precision=precision)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(quantize_embeddings(full, precision), theirs)


def test_float16_and_binary_width(encoder):
    full = encoder.encode(SENTENCES)
    half = encoder.encode(SENTENCES, precision="float16")
    assert half.dtype == np.float16
    np.testing.assert_array_equal(half, full.astype(np.float16))
    assert encoder.encode(SENTENCES, precision="ubinary").shape == (len(SENTENCES), 3)  # 24 bits


def test_truncate_then_normalise_then_quantise(encoder):
    full = encoder.encode(SENTENCES)
    cut = full[:, :8] / np.linalg.norm(full[:, :8], axis=1, keepdims=True)
    got = encoder.encode(SENTENCES, truncate_dim=8, normalize_embeddings=True)
    assert got.shape == (len(SENTENCES), 8)
    np.testing.assert_allclose(got, cut, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(
        encoder.encode(SENTENCES, truncate_dim=8, normalize_embeddings=True, precision="int8"),
        st_quantize(got, precision="int8"),
    )


def test_truncate_dim_attribute_and_dimension(encoder):
    assert encoder.get_sentence_embedding_dimension() == 24
    encoder.truncate_dim = 16
    try:
        assert encoder.get_sentence_embedding_dimension() == 16
        assert encoder.encode(SENTENCES).shape == (len(SENTENCES), 16)
        assert encoder.encode("one sentence").shape == (16,)
    finally:
        encoder.truncate_dim = None


def test_bad_options_are_clear(encoder):
    with pytest.raises(ValueError, match="precision must be one of"):
        encoder.encode(SENTENCES, precision="int4")
    with pytest.raises(ValueError, match="truncate_dim must be an integer from 1 to the model's dimension 24"):
        encoder.encode(SENTENCES, truncate_dim=25)
    with pytest.raises(ValueError, match="single embedding"):
        encoder.encode("alone", precision="int8")
    with pytest.raises(ValueError, match="output_value"):
        encoder.encode(SENTENCES, output_value="token_embeddings")


def test_device_and_ignored_keywords(encoder):
    full = encoder.encode(SENTENCES)
    with pytest.warns(UserWarning, match="ignores prompt, use_multiprocessing"):
        tensor = encoder.encode(SENTENCES, convert_to_tensor=True, device="cpu", prompt="q: ", use_multiprocessing=1)
    assert isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu"
    np.testing.assert_array_equal(tensor.numpy(), full)


def test_similarity_returns_the_type_it_got(encoder):
    embeddings = encoder.encode(SENTENCES)
    as_numpy = encoder.similarity(embeddings[:3], embeddings)
    assert isinstance(as_numpy, np.ndarray) and as_numpy.shape == (3, len(SENTENCES))
    tensors = torch.from_numpy(embeddings)
    as_tensor = encoder.similarity(tensors[:3], tensors)
    assert isinstance(as_tensor, torch.Tensor)
    np.testing.assert_allclose(as_tensor.numpy(), as_numpy, rtol=1e-5, atol=1e-6)
    mixed = encoder.similarity(tensors[:3], embeddings)
    assert isinstance(mixed, torch.Tensor)
    pairs = encoder.similarity_pairwise(tensors[:3], tensors[3:6])
    assert isinstance(pairs, torch.Tensor)
    np.testing.assert_allclose(pairs.numpy(), np.diag(as_numpy[:, 3:6]), rtol=1e-5, atol=1e-6)
