"""model2vec and sentence-transformers static models in and out of psp, and fine-tuning from them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

import psp_hf
from psp_hf import PSPEncoder
from psp_hf.cli import main
from psp_hf.tokenization.pieces import train_tokenizer

WORDS = [
    "man",
    "woman",
    "child",
    "dog",
    "cat",
    "plays",
    "runs",
    "reads",
    "park",
    "field",
    "ball",
    "book",
    "red",
    "green",
    "big",
    "small",
    "two",
    "three",
]
CORPUS = [f"a {w} and the {v}" for w in WORDS for v in WORDS[::3]]
SENTENCES = ["a man plays in the park", "two dogs read a red book", "the big cat runs"]

FRESH_MODEL2VEC = """
import sys, numpy as np
from model2vec import StaticModel
model = StaticModel.from_pretrained(sys.argv[1])
np.save(sys.argv[2], model.encode(sys.argv[3:]))
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("interop")
    tokenizer = train_tokenizer(CORPUS, vocab_size=60, output_dir=root / "tok")
    return PSPEncoder.from_tokenizer(tokenizer, hidden_size=16, seed=5).save_pretrained(root / "model")


def test_model2vec_export_loads_in_a_fresh_process(model, tmp_path):
    out = tmp_path / "m2v"
    assert main(["export", str(model), "-o", str(out), "--format", "model2vec"]) == 0
    sentences = [*SENTENCES, ""]
    result = tmp_path / "m2v.npy"
    subprocess.run([sys.executable, "-c", FRESH_MODEL2VEC, str(out), str(result), *sentences], check=True)
    theirs = np.load(result)
    ours = psp_hf.load(model).encode(sentences)
    np.testing.assert_allclose(theirs[:3], ours[:3], rtol=1e-6, atol=1e-7)
    # The documented difference: model2vec gives an empty sentence zeros, psp the unknown piece's row.
    assert not theirs[3].any() and ours[3].any()
    # And back: psp reads the model2vec folder as the same model.
    np.testing.assert_allclose(psp_hf.load(out).encode(SENTENCES), ours[:3], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(psp_hf.load(out).encode(SENTENCES), ours[:3], rtol=1e-6, atol=1e-7)


def test_from_model2vec_folds_weights_and_mapping(model, tmp_path):
    from model2vec import StaticModel

    encoder = psp_hf.load(model)
    table = encoder.weights()[0]
    weights = np.linspace(0.5, 1.5, len(table)).astype(np.float32)
    mapping = np.arange(len(table))[::-1].copy()
    StaticModel(
        vectors=table[::-1].copy(), tokenizer=encoder._backend, weights=weights, token_mapping=mapping, max_length=None
    ).save_pretrained(tmp_path / "weighted")
    loaded = psp_hf.load(tmp_path / "weighted")
    np.testing.assert_allclose(loaded.weights()[0], table * weights[:, None], rtol=1e-6)
    reference = StaticModel.from_pretrained(tmp_path / "weighted").encode(SENTENCES)
    np.testing.assert_allclose(loaded.encode(SENTENCES), reference, rtol=1e-5, atol=1e-6)


def test_sentence_transformers_static_embedding_loads(model, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding

    encoder = psp_hf.load(model)
    static = StaticEmbedding(encoder._backend, embedding_weights=encoder.weights()[0].copy())
    SentenceTransformer(modules=[static], device="cpu").save(str(tmp_path / "st"))
    loaded = psp_hf.load(tmp_path / "st")
    reference = SentenceTransformer(str(tmp_path / "st"), device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(loaded.encode(SENTENCES), reference, rtol=1e-5, atol=1e-6)


def test_unknown_folder_is_a_clear_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(psp_hf.PSPInputError, match=r"config.json: model_type is 'bert', expected 'psp'"):
        psp_hf.load(tmp_path)


def _pairs(path: Path) -> Path:
    lines = ["sentence1\tsentence2"]
    for index, word in enumerate(WORDS * 4):
        other = WORDS[(index * 7) % len(WORDS)]
        lines.append(f"a {word} and the {other}\tthe {other} and a {word}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("source", ["psp", "model2vec"])
def test_fine_tuning_starts_from_a_saved_model(model, tmp_path, source):
    start = model
    if source == "model2vec":
        from model2vec import StaticModel

        encoder = psp_hf.load(model)
        start = tmp_path / "m2v-start"
        StaticModel(vectors=encoder.weights()[0] * 2, tokenizer=encoder._backend).save_pretrained(start)
    initial = psp_hf.load(start)
    out = tmp_path / "tuned"
    flags = ["--batch-size", "16", "--max-steps", "3", "--dev", "none", "--threads", "1", "--quiet"]
    assert (
        main(
            [
                "train",
                "--data",
                str(_pairs(tmp_path / "p.tsv")),
                "--init-from",
                str(start),
                "-o",
                str(out),
                *flags,
            ]
        )
        == 0
    )
    tuned = psp_hf.load(out)
    assert tuned.dim == 16 and tuned.tokenizer_size == initial.tokenizer_size
    assert json.loads((out / "tokenizer.json").read_text())["model"] == json.loads(initial._backend.to_str())["model"]
    before, after = initial.weights()[0], load_file(str(out / "model.safetensors"))["embeddings.weight"]
    changed = np.abs(after - before).max(axis=1) > 0
    assert 0 < changed.sum() < len(before)  # trained rows moved, the others kept the initial table
    np.testing.assert_array_equal(after[~changed], before[~changed])


def test_init_from_conflicts_are_reported(model, tmp_path, capsys):
    code = main(
        [
            "train",
            "--data",
            str(_pairs(tmp_path / "p.tsv")),
            "--init-from",
            str(model),
            "--init",
            "teacher",
            "-o",
            str(tmp_path / "x"),
        ]
    )
    assert code == 2 and "--init-from brings its own table and tokenizer" in capsys.readouterr().err
