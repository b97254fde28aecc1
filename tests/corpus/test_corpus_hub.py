"""`psp embed-dataset USER/NAME`: a Hub dataset streamed through `datasets`, from the tests' local Hub server."""

from __future__ import annotations

import json

import numpy as np
import pytest

from psp_hf import PSPEncoder
from psp_hf.cli import main
from psp_hf.corpus.shards import load_embeddings, read_index
from psp_hf.tokenization.pieces import train_tokenizer

pytest.importorskip("datasets")

CORPUS = ["A man is playing a guitar.", "A woman slices an onion.", "Two dogs run in a field."] * 30
WORDS = ["man", "woman", "dog", "guitar", "onion", "field", "plays", "slices", "runs", "a", "the", "Ünïcödé"]


def sentences(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(0, 9))) for _ in range(n)]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus-hub") / "model"
    PSPEncoder.from_tokenizer(train_tokenizer(CORPUS, vocab_size=60), hidden_size=8, seed=3).save_pretrained(folder)
    return folder


def upload_dataset(hub_server, files: dict[str, bytes], tmp_path) -> str:
    from huggingface_hub import HfApi

    folder = tmp_path / "dataset"
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    repo_id = hub_server.unique_repo_id("sentences")
    api = HfApi()
    api.create_repo(repo_id, repo_type="dataset")
    api.upload_folder(folder_path=folder, repo_id=repo_id, repo_type="dataset")
    return repo_id


def parquet_bytes(columns: dict[str, list]) -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


def test_hub_parquet_dataset_streams_into_shards_per_split(hub_server, model_dir, tmp_path, capsys):
    train, test = sentences(45, 0), sentences(12, 1)
    repo_id = upload_dataset(
        hub_server,
        {
            "data/train-00000-of-00002.parquet": parquet_bytes({"id": list(range(30)), "sentence": train[:30]}),
            "data/train-00001-of-00002.parquet": parquet_bytes({"id": list(range(30, 45)), "sentence": train[30:]}),
            "data/test-00000-of-00001.parquet": parquet_bytes({"id": list(range(12)), "sentence": test}),
        },
        tmp_path,
    )
    encoder = PSPEncoder.from_pretrained(model_dir)
    base = ["embed-dataset", repo_id, "-m", str(model_dir), "--column", "sentence", "--shard-size", "8", "-q"]
    assert main([*base, "-o", str(tmp_path / "train"), "--threads", "2"]) == 0
    rows, embeddings = load_embeddings(tmp_path / "train")
    np.testing.assert_array_equal(rows, np.arange(45))
    np.testing.assert_array_equal(embeddings, encoder.encode(train))
    assert read_index(tmp_path / "train")["files"] == [{"name": repo_id, "first_row": 0, "rows": 45}]
    manifest = json.loads((tmp_path / "train" / "manifest.json").read_text())
    assert (manifest["input"], manifest["column"], manifest["split"]) == (repo_id, "sentence", "train")

    assert main([*base, "-o", str(tmp_path / "test"), "--split", "test", "--format", "parquet"]) == 0
    rows, embeddings = load_embeddings(tmp_path / "test")
    np.testing.assert_array_equal(rows, np.arange(12))
    np.testing.assert_array_equal(embeddings, encoder.encode(test))

    # A rerun streams the rows again to count them but embeds nothing: every shard is already there.
    capsys.readouterr()
    assert main([*base[:-1], "-o", str(tmp_path / "train"), "--threads", "2"]) == 0
    assert "45 input rows in 6 shards; embedded 0 rows (0 shards, 6 already done)" in capsys.readouterr().err


def test_hub_tsv_dataset_with_empty_cells_and_a_missing_column(hub_server, model_dir, tmp_path, capsys):
    texts = sentences(20, 2)
    tsv = "label\ttext\n" + "".join(f"{i % 2}\t{t}\n" for i, t in enumerate(texts))
    repo_id = upload_dataset(hub_server, {"train.tsv": tsv.encode("utf-8")}, tmp_path)
    out = tmp_path / "out"
    base = ["embed-dataset", repo_id, "-m", str(model_dir), "-o", str(out), "--shard-size", "6", "-q"]
    assert main([*base, "--column", "body"]) == 2
    assert f"psp: error: {repo_id}: no column 'body' (columns: label, text)" in capsys.readouterr().err
    assert main([*base, "--column", "text"]) == 0
    rows, embeddings = load_embeddings(out)
    np.testing.assert_array_equal(rows, np.arange(20))
    assert "" in texts  # the CSV reader of `datasets` gives None for an empty cell: an empty sentence here too
    np.testing.assert_array_equal(embeddings, PSPEncoder.from_pretrained(model_dir).encode(texts))
