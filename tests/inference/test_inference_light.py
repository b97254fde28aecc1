"""The light inference path: no heavy imports, numpy pooling equal to modeling's, and every bad folder refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import psp_hf
from psp_hf import PSPEncoder
from psp_hf.errors import PSPInputError
from psp_hf.inference import pooling
from psp_hf.inference.pooling import apply_unknown_rule, pool_bags, pool_bags_fast
from psp_hf.modeling import apply_unknown_rule as torch_unknown_rule
from psp_hf.modeling import pool_bags as torch_pool_bags
from psp_hf.tokenization.pieces import train_tokenizer

CORPUS = ["A man is playing a guitar.", "A woman slices an onion.", "Two dogs run in a field."] * 30
HEAVY = ("transformers", "datasets", "accelerate", "evaluate", "sentence_transformers", "torch")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("light") / "model"
    PSPEncoder.from_tokenizer(train_tokenizer(CORPUS, vocab_size=60), hidden_size=8, seed=2).save_pretrained(path)
    return path


def _copy(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(folder, target)
    return target


# --------------------------------------------------------------------------------------------- no heavy imports
LIGHT_PROCESS = """
import json, sys
import psp_hf
from psp_hf.cli import main
model = psp_hf.load(sys.argv[1])
vectors = model.encode(["A man is playing a guitar.", "Zwei Hunde."], normalize_embeddings=True)
assert vectors.shape == (2, 8)
assert main(["info", sys.argv[1]]) == 0
assert main(["embed", sys.argv[2], "-m", sys.argv[1], "-o", sys.argv[3], "-q"]) == 0
with open(sys.argv[2] + ".tsv", "w", encoding="utf-8") as pairs:
    pairs.write("A man.\\tTwo dogs.\\n")
assert main(["score", sys.argv[2] + ".tsv", "-m", sys.argv[1], "-o", sys.argv[3] + ".tsv", "-q"]) == 0
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in sys.argv[4].split(","))))
"""


def test_load_encode_and_cli_import_no_heavy_library(folder, tmp_path):
    source = tmp_path / "one.txt"
    source.write_text("A man is playing a guitar.\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-c", LIGHT_PROCESS, str(folder), str(source), str(tmp_path / "o.npy"), ",".join(HEAVY)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
    assert np.load(tmp_path / "o.npy").shape == (1, 8)
    assert (tmp_path / "o.npy.tsv").read_text(encoding="utf-8").splitlines()[1].startswith("A man.\tTwo dogs.\t")


# --------------------------------------------------------------------------------------------- same numbers
def _bags(seed: int, n: int = 300, vocab: int = 50):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 12, size=n)
    lengths[:3] = [0, 40, 1]
    flat = rng.integers(0, vocab, size=int(lengths.sum()))
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    table = rng.standard_normal((vocab, 16)).astype(np.float32)
    return table, flat, offsets


@pytest.mark.parametrize("mode", ["mean", "max", "sum"])
def test_numpy_pooling_equals_modeling_pool_bags_exactly(mode):
    table, flat, offsets = _bags(0)
    expected = torch_pool_bags(torch.from_numpy(table), torch.from_numpy(flat), torch.from_numpy(offsets), mode=mode)
    np.testing.assert_array_equal(pool_bags(table, flat, offsets, mode=mode), expected.numpy())
    # A few bags take the one-bag-at-a-time path.
    few = offsets[:5]
    flat_few = flat[: int(offsets[5])]
    expected_few = torch_pool_bags(
        torch.from_numpy(table), torch.from_numpy(flat_few), torch.from_numpy(few), mode=mode
    )
    np.testing.assert_array_equal(pool_bags(table, flat_few, few, mode=mode), expected_few.numpy())


def test_numpy_weighted_pooling_and_torch_bulk_path_agree():
    table, flat, offsets = _bags(1)
    weights = np.random.default_rng(2).random(len(flat)).astype(np.float32) + 0.1
    nonempty = np.diff(np.append(offsets, len(flat))) > 0
    expected = torch_pool_bags(*(torch.from_numpy(x) for x in (table, flat, offsets, weights))).numpy()
    np.testing.assert_allclose(pool_bags(table, flat, offsets, weights)[nonempty], expected[nonempty], atol=1e-6)
    # pool_bags_fast takes psp's kernel (or, without it, embedding_bag: torch is loaded in this process).
    np.testing.assert_array_equal(pool_bags_fast(table, flat, offsets), pool_bags(table, flat, offsets))


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "numpy"])
def test_numpy_unknown_rule_equals_modeling(kernel, monkeypatch):
    if not kernel:
        monkeypatch.setattr(pooling, "_kernel", None)
    rng = np.random.default_rng(3)
    for boundary in (None, 2):
        table, flat, offsets = _bags(4, vocab=6)
        flat = rng.choice([0, 0, 2, 3, 4], size=len(flat))  # many unknown (0) and boundary (2) pieces
        offsets[3] = offsets[4]  # and an empty bag
        ids, starts = apply_unknown_rule(flat, offsets, 0, boundary)
        expected_ids, expected_starts = torch_unknown_rule(
            torch.from_numpy(flat), torch.from_numpy(offsets), 0, boundary
        )
        assert ids.tolist() == expected_ids.tolist() and starts.tolist() == expected_starts.tolist()
        assert (ids == 0).any() and len(ids) < len(flat)  # the rule had work to do


def test_light_encoder_equals_model_forward_and_lazy_model(folder):
    encoder = psp_hf.load(folder)
    assert encoder._model is None and encoder._tokenizer is None  # nothing heavy built by loading
    sentences = ["A man is playing a guitar.", "", "☃☃", "a ☃ man", "Zwei Hunde rennen."]
    light = encoder.encode(sentences)
    batch = encoder.tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        forward = encoder.model(**batch).sentence_embedding.numpy()
    np.testing.assert_array_equal(light, forward)
    # Once built, the model's weights are what encode uses (training updates them in place).
    with torch.no_grad():
        encoder.model.embeddings.weight.mul_(2)
    np.testing.assert_allclose(encoder.encode(sentences), 2 * light, rtol=1e-6)


# --------------------------------------------------------------------------------------------- unknown rule
def test_sentences_of_only_unknown_characters_get_the_unknown_piece(folder):
    encoder = psp_hf.load(folder)
    ids, _ = encoder.tokenize_numpy(["☃☃"])
    boundary = encoder.settings.word_boundary_token_id
    assert boundary is not None and boundary in ids.tolist()  # the tokenizer really emits the bare boundary piece
    unk_row = encoder.weights()[0][encoder.unk_token_id]
    emoji, script = encoder.encode(["☃☃ ♫", "ᚠᚢᚦ ᚨᚱ"])
    np.testing.assert_array_equal(emoji, unk_row)
    np.testing.assert_array_equal(script, unk_row)
    # A sentence with real words keeps them: the unknown characters are dropped, the words pooled.
    mixed = encoder.encode("a ☃ man")
    assert not np.allclose(mixed, unk_row)


@pytest.mark.parametrize("kernel", [True, False], ids=["c", "python"])
def test_bad_sentences_are_named_by_index(folder, kernel, monkeypatch):
    from psp_hf.inference import batch_words

    if not kernel:
        monkeypatch.setattr(batch_words, "_words_kernel", None)
    encoder = psp_hf.load(folder)
    with pytest.raises(ValueError, match=r"sentences\[1\] has a lone surrogate '\\ud800' at character 4"):
        encoder.encode(["fine", "bad \ud800 text"])
    with pytest.raises(ValueError, match=r"sentences\[2\] has a lone surrogate"):
        encoder.encode(("caf\u00e9", "\U0001f600 ok", "x\udfff"))  # 1-, 4- and 2-byte strings
    with pytest.raises(TypeError, match=r"sentences\[3\] is bytes, expected str"):
        encoder.encode(["a", "b", "c", b"d", 5])
    assert encoder.encode(["caf\u00e9", "\U0001f600 ok", "\u4e2d\u6587"]).shape[0] == 3


# --------------------------------------------------------------------------------------------- bad folders
def test_pickle_only_folder_is_refused(folder, tmp_path):
    copy = _copy(folder, tmp_path)
    state = {"embeddings.weight": torch.zeros(4, 8)}
    torch.save(state, copy / "pytorch_model.bin")
    (copy / "model.safetensors").unlink()
    with pytest.raises(PSPInputError, match="pytorch_model.bin but no model.safetensors; psp loads safetensors only"):
        psp_hf.load(copy)


def test_missing_tokenizer_json_is_a_psp_error(folder, tmp_path):
    copy = _copy(folder, tmp_path)
    (copy / "tokenizer.json").unlink()
    with pytest.raises(PSPInputError, match="no tokenizer.json"):
        psp_hf.load(copy)


def test_corrupt_tokenizer_json(folder, tmp_path):
    copy = _copy(folder, tmp_path)
    (copy / "tokenizer.json").write_text('{"model": {"type": "Unigram", "vocab": [[1, 2]]}', encoding="utf-8")
    with pytest.raises(PSPInputError, match=r"tokenizer.json: not a valid tokenizer file"):
        psp_hf.load(copy)


def test_truncated_and_garbled_safetensors(folder, tmp_path):
    copy = _copy(folder, tmp_path)
    weights = copy / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) - 100])
    with pytest.raises(PSPInputError, match=r"model.safetensors: truncated"):
        psp_hf.load(copy)
    weights.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(PSPInputError, match=r"model.safetensors: not a safetensors file"):
        psp_hf.load(copy)


def test_config_shape_mismatch_and_bad_config(folder, tmp_path):
    copy = _copy(folder, tmp_path)
    config_path = copy / "config.json"
    config = json.loads(config_path.read_text())
    vocab = config["vocab_size"]
    config_path.write_text(json.dumps({**config, "hidden_size": 16}))
    with pytest.raises(PSPInputError, match=rf"has shape \({vocab}, 8\), but config.json says .* \({vocab}, 16\)"):
        psp_hf.load(copy)
    config_path.write_text(json.dumps({**config, "vocab_size": 10}))
    with pytest.raises(PSPInputError, match=rf"has shape \({vocab}, 8\), but config.json says .* \(10, 8\)"):
        psp_hf.load(copy)
    config_path.write_text(json.dumps({**config, "model_type": "bert"}))
    with pytest.raises(PSPInputError, match="model_type is 'bert', expected 'psp'"):
        psp_hf.load(copy)
    config_path.write_text("{not json")
    with pytest.raises(PSPInputError, match="config.json:1: not valid JSON"):
        psp_hf.load(copy)


def test_nan_weights_are_an_error_at_load(folder, tmp_path):
    from safetensors.numpy import save_file

    copy = _copy(folder, tmp_path)
    table = psp_hf.load(folder).weights()[0].copy()
    table[7, 3] = np.nan
    save_file({"embeddings.weight": table}, os.fspath(copy / "model.safetensors"))
    with pytest.raises(PSPInputError, match=r"model.safetensors: embeddings.weight has NaN or infinite values \(row 7"):
        psp_hf.load(copy)


def test_save_pretrained_writes_no_card_and_takes_no_card_arguments(folder, tmp_path):
    encoder = psp_hf.load(folder)
    out = encoder.save_pretrained(tmp_path / "saved")
    assert not (out / "README.md").exists()
    assert {"config.json", "model.safetensors", "tokenizer.json", "modeling_psp.py", "modules.json"} <= {
        p.name for p in out.iterdir()
    }
    np.testing.assert_array_equal(psp_hf.load(out).encode(CORPUS[:3]), encoder.encode(CORPUS[:3]))
    with pytest.raises(TypeError, match="language"):
        encoder.save_pretrained(tmp_path / "again", language="en")


def test_boundary_rule_can_be_switched_off_like_the_original_code(folder):
    tokenizer = psp_hf.load(folder).tokenizer
    original = PSPEncoder.from_tokenizer(tokenizer, hidden_size=8, seed=5, word_boundary_token_id=-1)
    boundary = psp_hf.load(folder).settings.word_boundary_token_id
    table = original.weights()[0]
    np.testing.assert_array_equal(original.encode("☃☃"), table[boundary])  # the bare boundary piece's row
    with torch.no_grad():
        forward = original.model(**tokenizer(["☃☃"], return_tensors="pt")).sentence_embedding.numpy()
    np.testing.assert_array_equal(forward[0], table[boundary])


def test_numpy_pooling_refuses_ids_outside_the_table():
    # The gather itself does not check each id (numpy's unchecked mode, for speed): the chunk is checked first.
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    offsets = np.arange(10, dtype=np.int64) * 2  # ten bags of two pieces
    good = np.arange(20, dtype=np.int64) % 10
    np.testing.assert_allclose(pool_bags(table, good, offsets), table[good].reshape(10, 2, 4).mean(axis=1))
    for bad in (10, -1):
        ids = good.copy()
        ids[7] = bad
        with pytest.raises(IndexError, match=r"piece ids must be in \[0, 10\)"):
            pool_bags(table, ids, offsets)
