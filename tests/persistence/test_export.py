"""Smaller psp folders (float16/int8 tables, PCA dimensions): psp's light loader and transformers agree."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

import psp_hf
from psp_hf import PSPEncoder
from psp_hf.cli import main
from psp_hf.persistence.smaller_tables import quantize_table, reduce_dimensions
from psp_hf.tokenization.pieces import train_tokenizer

CORPUS = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "Two dogs run across the green field.",
    "The children are playing football in the park.",
    "She reads a book about ancient history.",
] * 20
SENTENCES = ["A man is playing football.", "Two women read a book.", "The dog runs in the park."]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("export")
    tokenizer = train_tokenizer(CORPUS, vocab_size=80, output_dir=root / "tok")
    return PSPEncoder.from_tokenizer(tokenizer, hidden_size=32, seed=4).save_pretrained(root / "model")


def transformers_embeddings(folder: Path) -> np.ndarray:
    model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    batch = AutoTokenizer.from_pretrained(folder)(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**batch).sentence_embedding.numpy()


def test_int8_rows_have_their_own_scale():
    table = np.array([[0.001, -0.002, 0.0005], [10.0, -5.0, 2.5], [0.0, 0.0, 0.0]], dtype=np.float32)
    stored = quantize_table(table, "int8")
    assert stored["embeddings.weight"].dtype == np.int8 and stored["table_scales"].shape == (3,)
    restored = stored["embeddings.weight"] * stored["table_scales"][:, None]
    np.testing.assert_allclose(restored, table, rtol=0.01, atol=1e-12)  # the tiny row is not rounded to zero


def test_pca_keeps_the_top_components():
    rng = np.random.default_rng(0)
    table = (rng.normal(size=(200, 2)) @ rng.normal(size=(2, 6))).astype(np.float32)  # rank 2
    reduced = reduce_dimensions(table, 2)
    assert reduced.shape == (200, 2)
    centred = table - table.mean(axis=0)
    np.testing.assert_allclose(reduced @ reduced.T, centred @ centred.T, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(("dtype", "dims", "tolerance"), [("float16", None, 2e-3), ("int8", None, 2e-2)])
def test_quantised_folders_load_in_psp_and_transformers(model, tmp_path, dtype, dims, tolerance):
    out = tmp_path / dtype
    assert main(["export", str(model), "-o", str(out), "--quantize-to", dtype]) == 0
    assert json.loads((out / "config.json").read_text())["table_dtype"] == dtype
    assert (out / "model.safetensors").stat().st_size < (model / "model.safetensors").stat().st_size / 1.8
    reference = psp_hf.load(model).encode(SENTENCES)
    light = psp_hf.load(out).encode(SENTENCES)
    np.testing.assert_allclose(light, reference, atol=tolerance * np.abs(reference).max())
    np.testing.assert_allclose(transformers_embeddings(out), light, rtol=1e-5, atol=1e-6)
    # A PSPEncoder around the transformers model (never run yet) sees the dequantised table too.
    wrapped = PSPEncoder(AutoModel.from_pretrained(out, trust_remote_code=True), AutoTokenizer.from_pretrained(out))
    np.testing.assert_allclose(wrapped.encode(SENTENCES), light, rtol=1e-5, atol=1e-6)


def test_dimensionality_export(model, tmp_path):
    out = tmp_path / "pca"
    assert main(["export", str(model), "-o", str(out), "--dimensionality", "8", "--quantize-to", "int8"]) == 0
    encoder = psp_hf.load(out)
    assert encoder.dim == 8 and encoder.encode(SENTENCES).shape == (3, 8)
    np.testing.assert_allclose(transformers_embeddings(out), encoder.encode(SENTENCES), rtol=1e-5, atol=1e-6)
    # A float32 export keeps the sentence-transformers layout; dimensionality alone too.
    assert main(["export", str(model), "-o", str(tmp_path / "pca32"), "--dimensionality", "8"]) == 0
    assert (tmp_path / "pca32" / "modules.json").is_file()


def test_export_errors_are_one_line(model, tmp_path, capsys):
    assert main(["export", str(model), "-o", str(tmp_path / "x"), "--dimensionality", "64"]) == 2
    assert "dimensionality must be an integer from 1 to the model's dimension 32" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    assert main(["export", str(model), "-o", str(tmp_path / "full")]) == 2
    assert "not an empty folder" in capsys.readouterr().err


LIGHT_LOAD = """
import sys
import psp_hf
for folder in sys.argv[1:3]:
    psp_hf.load(folder).encode(["a man is playing"])
psp_hf.load(sys.argv[3]).encode(["a man is playing"])
print(",".join(sorted(m for m in ("torch", "transformers", "sentence_transformers", "model2vec") if m in sys.modules)))
"""


def test_smaller_and_model2vec_folders_load_without_torch(model, tmp_path):
    import subprocess
    import sys

    for name, flags in (("int8", ["--quantize-to", "int8"]), ("half", ["--quantize-to", "float16"])):
        assert main(["export", str(model), "-o", str(tmp_path / name), *flags]) == 0
    assert main(["export", str(model), "-o", str(tmp_path / "m2v"), "--format", "model2vec"]) == 0
    folders = [str(tmp_path / name) for name in ("int8", "half", "m2v")]
    done = subprocess.run([sys.executable, "-c", LIGHT_LOAD, *folders], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""  # none of the heavy libraries was imported
