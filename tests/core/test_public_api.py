"""The public face: one loader (`psp_hf.load`, which is `PSPEncoder.from_pretrained`) with model2vec's `quantize_to`
and sentence-transformers' `truncate_dim`, `encode` warning about keywords it ignores, `psp --version`, and
`AutoConfig`/`AutoModel` knowing model_type "psp" once psp-hf is imported."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
from fault_helpers import build_model

import psp_hf

SENTENCES = ["a man is playing a guitar", "the cat sits on the mat", "some words"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return build_model(tmp_path_factory.mktemp("api") / "model")


def test_one_loader_with_truncate_dim(folder):
    full = psp_hf.load(folder).encode(SENTENCES)
    short = psp_hf.load(folder, truncate_dim=5)
    assert short.truncate_dim == 5 and short.get_sentence_embedding_dimension() == 5
    np.testing.assert_array_equal(short.encode(SENTENCES), full[:, :5])
    with pytest.raises(ValueError, match="truncate_dim"):
        psp_hf.load(folder, truncate_dim=17)  # wider than the model's 16 dimensions
    assert not hasattr(psp_hf, "load_static_model") and not hasattr(psp_hf, "from_model2vec")


@pytest.mark.parametrize("quantize_to", ["float16", "int8"])
def test_quantize_to_gives_what_the_smaller_folder_gives(folder, tmp_path, quantize_to):
    loaded = psp_hf.load(folder, quantize_to=quantize_to)
    psp_hf.load(folder).save_pretrained(tmp_path / "smaller", quantize_to=quantize_to)
    np.testing.assert_array_equal(loaded.encode(SENTENCES), psp_hf.load(tmp_path / "smaller").encode(SENTENCES))
    assert not np.array_equal(loaded.encode(SENTENCES), psp_hf.load(folder).encode(SENTENCES))
    with pytest.raises(ValueError, match="quantize_to must be one of"):
        psp_hf.load(folder, quantize_to="int4")


def test_encode_warns_about_a_keyword_it_ignores(folder):
    encoder = psp_hf.load(folder)
    with pytest.warns(UserWarning, match="ignores normalise_embeddings, prompt: not an option of psp"):
        encoder.encode(SENTENCES, normalise_embeddings=True, prompt="query: ")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # None is what wrappers pass for "not set": no warning
        encoder.encode(SENTENCES, prompt_name=None, output_value="sentence_embedding")


def test_psp_version():
    result = subprocess.run(
        [sys.executable, "-m", "psp_hf.cli", "--version"], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout.strip()) == (0, f"psp {psp_hf.__version__}")


def test_auto_classes_know_psp_without_remote_code(folder):
    from transformers import AutoConfig, AutoModel

    import psp_hf.modeling

    config = AutoConfig.from_pretrained(folder)  # no trust_remote_code: the registered class
    assert type(config) is psp_hf.modeling.PSPConfig
    model = AutoModel.from_pretrained(folder)
    assert type(model) is psp_hf.modeling.PSPModel
    assert model.config.hidden_size == psp_hf.load(folder).dim
