"""`psp embed`, `psp score`, `psp info`: outputs, alignment, and errors naming file:line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from psp_hf import PSPEncoder
from psp_hf.cli import main
from psp_hf.tokenization.pieces import train_tokenizer

CORPUS = ["A man is playing a guitar.", "A woman slices an onion.", "Two dogs run in a field."] * 30


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli") / "model"
    encoder = PSPEncoder.from_tokenizer(train_tokenizer(CORPUS, vocab_size=60), hidden_size=8, seed=1)
    encoder.save_pretrained(folder)
    return folder


def test_embed_writes_npy_row_per_line(model_dir, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("A man is playing a guitar.\n\n   \nTwo dogs run.\n", encoding="utf-8")
    out = tmp_path / "out.npy"
    assert main(["embed", str(source), "-m", str(model_dir), "-o", str(out)]) == 0
    array = np.load(out)
    encoder = PSPEncoder.from_pretrained(model_dir)
    expected = encoder.encode(["A man is playing a guitar.", "", "   ", "Two dogs run."])
    assert array.shape == (4, 8) and array.dtype == np.float32
    np.testing.assert_array_equal(array, expected)
    assert "4 x 8" in capsys.readouterr().err


def test_embed_non_utf8_names_line_and_keeps_old_output(model_dir, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_bytes(b"fine line\nbad \xff\xfe line\nfine again\n")
    out = tmp_path / "out.npy"
    np.save(out, np.arange(3, dtype=np.float32))
    assert main(["embed", str(source), "-m", str(model_dir), "-o", str(out)]) == 2
    assert f"{source}:2: not valid UTF-8" in capsys.readouterr().err
    np.testing.assert_array_equal(np.load(out), np.arange(3, dtype=np.float32))  # untouched
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.npy")] == []


def test_embed_skip_bad_lines_keeps_rows_aligned(model_dir, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_bytes(b"first\nbad \xff\nthird\n")
    out = tmp_path / "out.npy"
    assert main(["embed", str(source), "-m", str(model_dir), "-o", str(out), "--skip-bad-lines"]) == 0
    array = np.load(out)
    assert array.shape == (3, 8)
    assert np.isnan(array[1]).all() and not np.isnan(array[[0, 2]]).any()
    err = capsys.readouterr().err
    assert "skipped 1 bad line(s): 2" in err


def test_embed_missing_input(model_dir, tmp_path, capsys):
    assert main(["embed", str(tmp_path / "nope.txt"), "-m", str(model_dir), "-o", str(tmp_path / "o.npy")]) == 2
    assert "nope.txt: no such file" in capsys.readouterr().err


def test_score_writes_cosines(model_dir, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("A man plays.\tA man is playing.\nDogs run.\tA woman slices an onion.\n", encoding="utf-8")
    out = tmp_path / "scored.tsv"
    assert main(["score", str(pairs), "-m", str(model_dir), "-o", str(out), "-q"]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "sentence1\tsentence2\tcosine"
    encoder = PSPEncoder.from_pretrained(model_dir)
    a = encoder.encode(["A man plays.", "Dogs run."])
    b = encoder.encode(["A man is playing.", "A woman slices an onion."])
    expected = encoder.similarity_pairwise(a, b)
    got = [float(line.split("\t")[2]) for line in lines[1:]]
    np.testing.assert_allclose(got, expected, atol=1e-6)


def test_score_wrong_column_count(model_dir, tmp_path, capsys):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a\tb\nonly one column\nc\td\te\n", encoding="utf-8")
    assert main(["score", str(pairs), "-m", str(model_dir)]) == 2
    assert f"{pairs}:2: expected 2 tab-separated columns, got 1" in capsys.readouterr().err
    assert main(["score", str(pairs), "-m", str(model_dir), "--skip-bad-lines"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[1:] == [captured.out.splitlines()[1]]  # only the good pair
    assert captured.out.splitlines()[1].startswith("a\tb\t")
    assert "skipped 2 bad line(s): 2, 3" in captured.err


def test_score_columns_and_header(model_dir, tmp_path, capsys):
    pairs = tmp_path / "sts.tsv"
    pairs.write_text("score\ts1\ts2\n4.0\tA man plays.\tA man is playing.\n", encoding="utf-8")
    assert main(["score", str(pairs), "-m", str(model_dir), "--columns", "2,3", "--header"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 2 and rows[1].startswith("A man plays.\tA man is playing.\t")
    with pytest.raises(SystemExit):
        main(["score", str(pairs), "-m", str(model_dir), "--columns", "0,x"])


def test_info(model_dir, capsys):
    assert main(["info", str(model_dir)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["hidden_size"] == 8 and info["pooling"] == "mean" and info["drop_unknown"] is True
