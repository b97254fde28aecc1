"""Core: tokenizer conversion, unknown-piece rule, encode API, Hub-format round trip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import psp_hf
from psp_hf import PSPConfig, PSPEncoder, PSPModel
from psp_hf.modeling import apply_unknown_rule
from psp_hf.tokenization.pieces import SPM_FILENAME, split_arabic_article, strip_optional_marks, train_tokenizer

CORPUS = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "Two dogs run across the green field.",
    "The children are playing football in the park.",
    "Stocks fell sharply on Monday after the announcement.",
    "She reads a book about ancient history.",
    "A cat sleeps on the warm windowsill.",
    "Der Hund läuft über die Straße.",
] * 20


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[PSPEncoder, Path]:
    folder = tmp_path_factory.mktemp("tiny")
    tokenizer = train_tokenizer(CORPUS, vocab_size=120, output_dir=folder / "tok")
    encoder = PSPEncoder.from_tokenizer(tokenizer, hidden_size=16, seed=3)
    encoder.save_pretrained(folder / "model")
    return encoder, folder


# --------------------------------------------------------------------------- unknown-piece rule
def test_unknown_rule_drops_unknowns_unless_nothing_else():
    ids = torch.tensor([5, 0, 6, 0, 0, 7])
    offsets = torch.tensor([0, 3, 5, 5])  # [5,0,6] | [0,0] | [] | [7]
    new_ids, new_offsets = apply_unknown_rule(ids, offsets, unk_token_id=0)
    bags = np.split(new_ids.numpy(), new_offsets.numpy()[1:])
    assert [b.tolist() for b in bags] == [[5, 6], [0], [0], [7]]


def test_unknown_rule_is_identity_without_unknowns():
    ids = torch.tensor([3, 4, 5])
    offsets = torch.tensor([0, 1])
    new_ids, new_offsets = apply_unknown_rule(ids, offsets, unk_token_id=0)
    assert new_ids.tolist() == [3, 4, 5] and new_offsets.tolist() == [0, 1]


def test_model_mean_and_unknown_embedding():
    model = PSPModel(PSPConfig(vocab_size=10, hidden_size=4, unk_token_id=0, pad_token_id=1)).eval()
    table = model.embeddings.weight.detach()
    out = model(torch.tensor([2, 0, 3, 0]), offsets=torch.tensor([0, 3])).sentence_embedding
    torch.testing.assert_close(out[0], (table[2] + table[3]) / 2)
    torch.testing.assert_close(out[1], table[0])


def test_padded_input_equals_offsets_input():
    model = PSPModel(PSPConfig(vocab_size=10, hidden_size=4)).eval()
    padded = torch.tensor([[2, 3, 4], [5, 1, 1], [0, 6, 1]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0]])
    flat = model(torch.tensor([2, 3, 4, 5, 0, 6]), offsets=torch.tensor([0, 3, 4])).sentence_embedding
    torch.testing.assert_close(model(padded, attention_mask=mask).sentence_embedding, flat)


def test_max_pooling_and_piece_weights():
    config = PSPConfig(vocab_size=6, hidden_size=3, pooling="max")
    model = PSPModel(config).eval()
    table = model.embeddings.weight.detach()
    out = model(torch.tensor([2, 3]), offsets=torch.tensor([0])).sentence_embedding
    torch.testing.assert_close(out[0], torch.maximum(table[2], table[3]))

    weighted = PSPModel(PSPConfig(vocab_size=6, hidden_size=3, use_piece_weights=True)).eval()
    with torch.no_grad():
        weighted.piece_weights[2] = 3.0
    table = weighted.embeddings.weight.detach()
    out = weighted(torch.tensor([2, 3]), offsets=torch.tensor([0])).sentence_embedding
    torch.testing.assert_close(out[0], (3 * table[2] + table[3]) / 4)
    with pytest.raises(ValueError, match="pooling"):
        PSPConfig(pooling="sum")


# --------------------------------------------------------------------------- tokenizer
def test_tokenizer_lowercases_and_matches_sentencepiece(tiny):
    import sentencepiece as spm

    encoder, folder = tiny
    processor = spm.SentencePieceProcessor(model_file=str(folder / "tok" / SPM_FILENAME))
    for sentence in {*CORPUS, "  Extra   SPACES here  ", "UNSEEN Wörds ﬁ"}:
        expected = processor.encode(sentence.lower())
        assert encoder._backend.encode(sentence, add_special_tokens=False).ids == expected
    assert encoder.tokenizer("A MAN")["input_ids"] == encoder.tokenizer("a man")["input_ids"]


def test_arabic_optional_marks_are_removed_in_training_and_tokenizing(tmp_path):
    # The same word with and without shadda / harakat / tatweel must be the same pieces, in every loader.
    plain, marked = "كان سامي يربح الكثير من المال", "كانَ سامي يربّح الكثيـر منْ المال"
    tokenizer = train_tokenizer([marked, plain, "a man", *[f"word{i} كتّاب" for i in range(40)]], vocab_size=60)
    assert tokenizer(marked)["input_ids"] == tokenizer(plain)["input_ids"]
    assert not any("\u0651" in piece or "\u0640" in piece for piece in tokenizer.get_vocab())
    assert strip_optional_marks("يربّح") == "يربح" and strip_optional_marks("A man") == "A man"


def test_arabic_article_is_split_from_its_word_in_training_and_tokenizing():
    # "the money", "money" and "and the money" must share the word's piece; words that only begin with the
    # article's letters and are short (التي "which", الى "to") stay whole, and other scripts are untouched.
    corpus = ["المال مال", "والمال لنا", "بالمال التي", "الى الكتاب", "للكتاب كتاب", "a man"] * 30
    tokenizer = train_tokenizer(corpus, vocab_size=40)
    assert tokenizer.tokenize("المال") == ["▁ال", "▁مال"]
    assert tokenizer.tokenize("والمال")[-1] == "▁مال" and tokenizer.tokenize("مال") == ["▁مال"]
    assert tokenizer.tokenize("للكتاب")[-1] == "▁كتاب" == tokenizer.tokenize("الكتاب")[-1]
    normalizer = tokenizer.backend_tokenizer.normalizer
    for text in ("من المال.", "وبالكتاب الالتزام", "لليلى التي", "ألمال", "the almanac", "x المال"):
        assert normalizer.normalize_str(text) == split_arabic_article(text)
    assert split_arabic_article("من المال.") == "من ال مال." and split_arabic_article("a man") == "a man"
    assert split_arabic_article("التي الى") == "التي الى"
    # A vocabulary without Arabic keeps the shorter normalizer (the rules cost tokenizing speed).
    english = train_tokenizer(["a man walks a dog", "two men walk"] * 30, vocab_size=30).backend_tokenizer
    assert english.normalizer.normalize_str("من المال") == "من المال"


def test_train_tokenizer_rejects_empty_input():
    with pytest.raises(ValueError, match="no text"):
        train_tokenizer(["", "   "], vocab_size=50)


def test_word_cache_agrees_with_tokenizer(tiny):
    encoder, _ = tiny
    sentences = [*CORPUS[:8], "", "   ", "tab\tand\nnewline", "Ünïcödé words", "MiXeD   case  ", "x" * 5000]
    ids, offsets = encoder.tokenize(sentences)
    expected = [e.ids for e in encoder._backend.encode_batch(sentences, add_special_tokens=False)]
    assert ids.tolist() == [i for row in expected for i in row]
    assert offsets.tolist() == np.concatenate([[0], np.cumsum([len(r) for r in expected])[:-1]]).tolist()


# --------------------------------------------------------------------------- encode API
def test_encode_shapes_types_and_edge_cases(tiny):
    encoder, _ = tiny
    out = encoder.encode(["A man plays.", "Dogs run."])
    assert out.shape == (2, 16) and out.dtype == np.float32
    assert encoder.encode("A man plays.").shape == (16,)
    assert encoder.encode([]).shape == (0, 16)
    unk_row = encoder.model.embeddings.weight[encoder.unk_token_id].detach().numpy()
    empty = encoder.encode(["", "   \t "])
    np.testing.assert_allclose(empty, np.stack([unk_row, unk_row]), rtol=1e-6)
    normalized = encoder.encode(CORPUS[:5], normalize_embeddings=True)
    np.testing.assert_allclose(np.linalg.norm(normalized, axis=1), 1.0, rtol=1e-5)
    assert isinstance(encoder.encode(["x"], convert_to_numpy=False), torch.Tensor)


def test_encode_batch_size_invariant(tiny):
    encoder, _ = tiny
    np.testing.assert_allclose(encoder.encode(CORPUS, batch_size=3), encoder.encode(CORPUS, batch_size=1000), atol=1e-6)


def test_encode_rejects_non_strings_naming_the_index(tiny):
    encoder, _ = tiny
    with pytest.raises(TypeError, match=r"sentences\[2\] is int"):
        encoder.encode(["a", "b", 3])
    with pytest.raises(ValueError, match="batch_size"):
        encoder.encode(["a"], batch_size=0)


def test_similarity(tiny):
    encoder, _ = tiny
    a = encoder.encode(["A man is playing a guitar.", "Dogs run."])
    sims = encoder.similarity(a, a)
    assert sims.shape == (2, 2)
    np.testing.assert_allclose(np.diag(sims), 1.0, rtol=1e-5)
    np.testing.assert_allclose(encoder.similarity_pairwise(a, a[::-1]), [sims[0, 1], sims[1, 0]], rtol=1e-5)


def test_encode_equals_hf_padded_forward(tiny):
    encoder, _ = tiny
    sentences = [*CORPUS[:6], "", "zzzz qqqq"]
    batch = encoder.tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        padded = encoder.model(**batch).sentence_embedding.numpy()
    np.testing.assert_allclose(encoder.encode(sentences), padded, atol=1e-6)


# --------------------------------------------------------------------------- save / load
def test_saved_folder_layout_and_reload(tiny):
    encoder, folder = tiny
    model_dir = folder / "model"
    names = {p.name for p in model_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "configuration_psp.py", "modeling_psp.py"} <= names
    config = json.loads((model_dir / "config.json").read_text())
    assert config["model_type"] == "psp"
    assert config["auto_map"] == {"AutoConfig": "configuration_psp.PSPConfig", "AutoModel": "modeling_psp.PSPModel"}
    reloaded = psp_hf.load(model_dir)
    np.testing.assert_array_equal(reloaded.encode(CORPUS[:4]), encoder.encode(CORPUS[:4]))


def test_remote_code_is_the_package_code(tiny):
    _, folder = tiny
    package_dir = Path(psp_hf.modeling.__file__).parent
    for name in ("configuration_psp.py", "modeling_psp.py"):
        assert (folder / "model" / name).read_text() == (package_dir / name).read_text()


FRESH_PROCESS = """
import sys, json
sys.modules["psp_hf"] = None  # the folder's own remote code must be enough
from transformers import AutoModel, AutoTokenizer
import torch
folder, sentences = sys.argv[1], json.loads(sys.argv[2])
model = AutoModel.from_pretrained(folder, trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
batch = tokenizer(sentences, padding=True, return_tensors="pt")
with torch.no_grad():
    out = model(**batch).sentence_embedding
print(json.dumps({"module": type(model).__module__, "embeddings": out.tolist()}))
"""


def test_automodel_round_trip_in_fresh_offline_process(tiny, tmp_path):
    encoder, folder = tiny
    sentences = ["A man is playing a guitar.", "", "UNSEEN zzz", "Two dogs run across the green field."]
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"), PYTHONPATH="")
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, str(folder / "model"), json.dumps(sentences)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    assert payload["module"].startswith("transformers_modules")
    expected = encoder.encode(sentences)
    np.testing.assert_array_equal(np.asarray(payload["embeddings"], dtype=np.float32), expected)


def test_load_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such model folder"):
        psp_hf.load(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        psp_hf.load(tmp_path / "empty")


def test_hf_tokenizer_padding_does_not_leak_into_encode(tiny):
    encoder, _ = tiny
    sentences = ["brand new words qwerty", "asdf"]
    encoder.tokenizer(sentences, padding="max_length", max_length=40, truncation=True)
    ids, offsets = encoder.tokenize(sentences)
    expected = [e.ids for e in encoder._backend.encode_batch(sentences, add_special_tokens=False)]
    assert ids.tolist() == [i for row in expected for i in row]
    assert encoder.tokenizer.pad_token_id not in ids.tolist()
