"""`psp embed-dataset`: shard/index alignment, resume after SIGKILL, 2 processes = 1 process; threaded encode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from psp_hf import PSPEncoder
from psp_hf.cli import main
from psp_hf.corpus.embed_dataset import embed_dataset
from psp_hf.corpus.shards import iter_shards, load_embeddings, read_index
from psp_hf.errors import PSPInputError
from psp_hf.tokenization.pieces import train_tokenizer

CORPUS = ["A man is playing a guitar.", "A woman slices an onion.", "Two dogs run in a field."] * 30
WORDS = ["man", "woman", "dog", "guitar", "onion", "field", "plays", "slices", "runs", "a", "the", "in", "is", "two"]


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(1, 9))) for _ in range(n)]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus") / "model"
    encoder = PSPEncoder.from_tokenizer(train_tokenizer(CORPUS, vocab_size=60), hidden_size=8, seed=1)
    encoder.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def encoder(model_dir):
    return PSPEncoder.from_pretrained(model_dir)


def test_encode_threads_give_identical_rows(encoder):
    texts = sentences(500) + ["", "  ", "ünïcödé wörds"]
    expected = encoder.encode(texts, batch_size=1024)
    for threads in (2, 3):
        np.testing.assert_array_equal(encoder.encode(texts, batch_size=7, num_threads=threads), expected)
    with pytest.raises(ValueError, match="num_threads"):
        encoder.encode(texts, num_threads=0)


def test_shards_align_with_rows_across_files_and_formats(encoder, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    texts = sentences(53)
    (folder / "a.txt").write_text("\n".join(texts[:20]) + "\n", encoding="utf-8")
    (folder / "b.tsv").write_text("id\ttext\n" + "".join(f"{i}\t{t}\n" for i, t in enumerate(texts[20:33])))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": texts[33:], "n": list(range(20))}), folder / "c.parquet")
    expected = encoder.encode(texts)
    for fmt in ("npy", "parquet"):
        out = tmp_path / f"out-{fmt}"
        counts = embed_dataset(encoder, str(folder), out, "text", shard_size=8, fmt=fmt, num_threads=2)
        assert counts["rows"] == 53 and counts["shards"] == 7 and counts["embedded_shards"] == 7
        info = read_index(out)
        assert [(f["first_row"], f["rows"]) for f in info["files"]] == [(0, 20), (20, 13), (33, 20)]
        shards = list(iter_shards(out))
        assert [len(rows) for rows, _ in shards] == [8] * 6 + [5]
        rows, embeddings = load_embeddings(out)
        np.testing.assert_array_equal(rows, np.arange(53))
        np.testing.assert_array_equal(embeddings, expected)


def test_rank_takes_its_shards_and_index_says_what_is_missing(encoder, tmp_path):
    source = tmp_path / "in.txt"
    texts = sentences(25)
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    counts = embed_dataset(encoder, str(source), out, shard_size=5, rank=1, world_size=2)
    assert counts["embedded_shards"] == 2 and sorted(p.name for p in out.glob("shard-*.rows.npy")) == [
        "shard-00001.rows.npy",
        "shard-00003.rows.npy",
    ]
    with pytest.raises(PSPInputError, match=r"3 shard\(s\) missing \(0, 2, 4\)"):
        read_index(out)
    embed_dataset(encoder, str(source), out, shard_size=5, rank=0, world_size=2)
    rows, embeddings = load_embeddings(out)
    np.testing.assert_array_equal(rows, np.arange(25))
    np.testing.assert_array_equal(embeddings, encoder.encode(texts))
    with pytest.raises(PSPInputError, match="shard_size: 5 there, 6 now"):
        embed_dataset(encoder, str(source), out, shard_size=6)


def test_two_processes_equal_one_process(model_dir, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(sentences(300)) + "\n", encoding="utf-8")
    base = ["embed-dataset", str(source), "-m", str(model_dir), "--shard-size", "40", "-q"]
    assert main([*base, "-o", str(tmp_path / "one")]) == 0
    assert main([*base, "-o", str(tmp_path / "two"), "--num-proc", "2"]) == 0
    one_rows, one = load_embeddings(tmp_path / "one")
    two_rows, two = load_embeddings(tmp_path / "two")
    np.testing.assert_array_equal(one_rows, np.arange(300))
    np.testing.assert_array_equal(two_rows, one_rows)
    np.testing.assert_array_equal(two, one)


@pytest.mark.slow
def test_resume_after_sigkill_has_no_duplicate_or_missing_rows(model_dir, encoder, tmp_path):
    texts = sentences(60_000, seed=3)
    source = tmp_path / "in.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "psp_hf.cli", "embed-dataset", str(source), "-m", str(model_dir)]
    command += ["-o", str(out), "--shard-size", "100", "--threads", "1"]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(list(out.glob("shard-*.rows.npy"))) < 5 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    done_before = {p.name for p in out.glob("shard-*[0-9].npy")}
    assert 0 < len(done_before) < 600, "the kill must land mid-run"
    assert not (out / "index.json").exists()
    with pytest.raises(PSPInputError, match="not finished"):
        read_index(out)
    finished = subprocess.run(command, capture_output=True, text=True, check=True)
    assert f"{len(done_before)} already done" in finished.stderr
    rows, embeddings = load_embeddings(out)
    np.testing.assert_array_equal(rows, np.arange(60_000))  # each row once, in order
    np.testing.assert_array_equal(embeddings, encoder.encode(texts))
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def test_missing_column_and_bad_input_are_one_line_errors(model_dir, tmp_path, capsys):
    source = tmp_path / "in.tsv"
    source.write_text("id\ttext\n1\thello\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["embed-dataset", str(source), "-m", str(model_dir), "-o", str(out), "--column", "body"]) == 2
    assert "no column 'body' in the header (id, text)" in capsys.readouterr().err
    assert main(["embed-dataset", str(tmp_path / "nope.txt"), "-m", str(model_dir), "-o", str(out)]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    # No shard was written, so the corrected command may use the same folder.
    assert main(["embed-dataset", str(source), "-m", str(model_dir), "-o", str(out), "--column", "text", "-q"]) == 0
    assert json.loads((out / "manifest.json").read_text())["column"] == "text"
    assert load_embeddings(out)[1].shape == (1, 8)


def test_a_full_word_cache_keeps_its_words_and_encodes_the_others_exactly(encoder):
    from psp_hf.inference.piece_cache import WordPieceCache

    cache = WordPieceCache(encoder._backend, max_words=6)
    batches = [["a man is here"], ["a dog runs in a field"], ["two men play a guitar", "a woman slices onions"]]
    for batch in batches:  # the later batches' new words do not fit: "a" comes from the cache, they do not
        flat, lengths = cache.encode(batch)
        expected = [encoder._backend.encode(s.lower(), add_special_tokens=False).ids for s in batch]
        assert flat.tolist() == [i for ids in expected for i in ids] and lengths.tolist() == list(map(len, expected))
    assert len(cache) == 4


def test_inputs_are_classified_by_name(tmp_path):
    from psp_hf.corpus.sources import Part, list_parts

    (tmp_path / "a.tsv.gz").write_bytes(b"")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.parquet").write_bytes(b"")
    (tmp_path / "notes.md").write_text("not data")
    assert list_parts(str(tmp_path)) == [
        Part(str(tmp_path / "a.tsv.gz"), "tsv"),
        Part(str(tmp_path / "sub/b.parquet"), "parquet"),
    ]
    assert list_parts("user/sentences") == [Part("user/sentences", "hub")]
    for missing in ("./nope.txt", str(tmp_path / "nope"), "a/b/c"):
        with pytest.raises(PSPInputError, match="no such file or folder"):
            list_parts(missing)
