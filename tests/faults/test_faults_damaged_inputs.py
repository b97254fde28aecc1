"""Damaged inputs and out-of-range arguments that ended in a traceback: embed-dataset folders (in `psp mine`, the
search-index loader of `psp serve --index` and an `embed-dataset` rerun), a run's counters without stream positions,
a corrupt .parquet input, `--lr 1e308`, `--dim 100000000` and an unbalanced quote in `psp languages --train-args`.
Each is one `psp: error:` line naming the file or the flag."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from fault_helpers import build_model, english_pairs, one_error_line, run_cli, small_run


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_model(tmp_path_factory.mktemp("m") / "model")


@pytest.fixture(scope="module")
def embedded(tmp_path_factory, model) -> tuple[Path, Path]:
    """(the sentences file, an embed-dataset folder of it in three shards)."""
    root = tmp_path_factory.mktemp("embedded")
    sentences = root / "sentences.txt"
    sentences.write_text("".join(f"a dog runs in the park {i}\n" for i in range(30)))
    folder = root / "emb"
    code, _, err = run_cli("embed-dataset", str(sentences), "-m", str(model), "-o", str(folder), "--shard-size", "10")
    assert code == 0, err
    return sentences, folder


def _damage(folder: Path, kind: str) -> str:
    """Damage `folder` as `kind` says; returns the name of the file the error must name."""
    if kind == "index-not-json":
        (folder / "index.json").write_text('{"rows": 30,')
        return "index.json"
    if kind == "index-without-shards":
        (folder / "index.json").write_text('{"rows": 30}')
        return "index.json"
    if kind == "index-a-list":
        (folder / "index.json").write_text("[1, 2]")
        return "index.json"
    if kind == "manifest-not-json":
        (folder / "manifest.json").write_text("nope")
        return "manifest.json"
    if kind == "manifest-a-list":
        (folder / "manifest.json").write_text("[]")
        return "manifest.json"
    if kind == "pickled-rows":
        np.save(folder / "shard-00001.rows.npy", np.array([1, "a", None], dtype=object), allow_pickle=True)
        return "shard-00001.rows.npy"
    if kind == "truncated-shard":
        path = folder / "shard-00002.npy"
        path.write_bytes(path.read_bytes()[:100])
        return "shard-00002.npy"
    raise AssertionError(kind)


KINDS = [
    "index-not-json",
    "index-without-shards",
    "index-a-list",
    "manifest-not-json",
    "manifest-a-list",
    "pickled-rows",
    "truncated-shard",
]


@pytest.mark.parametrize("kind", KINDS)
def test_mine_on_a_damaged_embed_dataset_folder_is_one_error_line(tmp_path, embedded, kind):
    folder = tmp_path / "emb"
    shutil.copytree(embedded[1], folder)
    named = _damage(folder, kind)
    code, _, err = run_cli("mine", str(folder), "-o", str(tmp_path / "pairs.tsv"), "-q")
    assert code == 2
    assert str(folder / named) in one_error_line(err)
    assert not (tmp_path / "pairs.tsv").exists()


@pytest.mark.parametrize("kind", ["index-not-json", "manifest-a-list", "pickled-rows"])
def test_the_search_index_loader_refuses_a_damaged_folder_naming_the_file(tmp_path, embedded, model, kind):
    """`psp serve --index FOLDER` loads through the same reader: a damaged folder is a PSPInputError, not a crash."""
    from psp_hf import load
    from psp_hf.errors import PSPInputError
    from psp_hf.serve.index import load_index

    folder = tmp_path / "emb"
    shutil.copytree(embedded[1], folder)
    named = _damage(folder, kind)
    with pytest.raises(PSPInputError, match=str(folder / named)):
        load_index(folder, load(model))


@pytest.mark.parametrize("kind", ["manifest-not-json", "manifest-a-list"])
def test_an_embed_dataset_rerun_into_a_folder_with_a_damaged_manifest_is_one_error_line(tmp_path, embedded, kind):
    sentences, original = embedded
    folder = tmp_path / "emb"
    shutil.copytree(original, folder)
    _damage(folder, kind)
    before = sorted(path.name for path in folder.iterdir())
    model = json.loads((original / "manifest.json").read_text())["model"]
    code, _, err = run_cli("embed-dataset", str(sentences), "-m", model, "-o", str(folder), "--shard-size", "10")
    assert code == 2
    line = one_error_line(err)
    assert str(folder / "manifest.json") in line and "use another --output" in line
    assert sorted(path.name for path in folder.iterdir()) == before  # the shards are kept


def test_an_index_claiming_more_shards_than_its_rows_fill_is_refused(tmp_path, embedded):
    folder = tmp_path / "emb"
    shutil.copytree(embedded[1], folder)
    (folder / "index.json").write_text('{"rows": 30, "shards": 100000000}')
    code, _, err = run_cli("mine", str(folder), "-o", str(tmp_path / "pairs.tsv"), "-q")
    assert code == 2 and "30 rows make 3 shard(s), not 100000000" in one_error_line(err)


def test_counters_without_stream_positions_are_refused_on_resume(tmp_path, train_here):
    pairs = english_pairs(tmp_path / "pairs.tsv", 40)
    out = tmp_path / "run"
    code, err = train_here(*small_run(pairs, None), "-o", str(out), "--max-steps", "2", "--save-every", "2")
    assert code == 0, err
    state_file = next((out / "training").glob("checkpoint-*")) / "train_state.json"
    state = json.loads(state_file.read_text())
    state.update(positions=[], finished=False)
    state_file.write_text(json.dumps(state))
    pointer = out / "training" / "checkpoint.json"
    pointer.write_text(json.dumps({**json.loads(pointer.read_text()), "finished": False}))
    code, err = train_here(*small_run(pairs, None), "-o", str(out), "--max-steps", "4", "--resume")
    assert code == 2
    assert "0 stream positions for 1 process(es)" in one_error_line(err)


@pytest.mark.parametrize("damage", ["truncated", "garbled", "not-parquet"])
def test_a_corrupt_parquet_input_is_one_error_line(tmp_path, model, damage):
    import pyarrow as pa
    import pyarrow.parquet as pq

    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"text": [f"a dog runs {i}" for i in range(50)]}), good)
    data = good.read_bytes()
    path = tmp_path / "bad.parquet"
    if damage == "truncated":
        path.write_bytes(data[:-20])
    elif damage == "garbled":
        middle = len(data) // 2
        path.write_bytes(data[:middle] + b"\x00" * 10 + data[middle + 10 :])
    else:
        path.write_bytes(b"PAR1 not a table PAR1")
    out = tmp_path / "emb"
    code, _, err = run_cli("embed-dataset", str(path), "--column", "text", "-m", str(model), "-o", str(out))
    assert code == 2
    assert f"{path}: not a readable parquet file" in one_error_line(err)


def test_a_learning_rate_past_float32_is_refused_before_training(tmp_path, train_here):
    pairs = english_pairs(tmp_path / "pairs.tsv", 400)  # enough steps for Adam's step size to come down from inf
    out = tmp_path / "run"
    code, err = train_here(*small_run(pairs, None), "-o", str(out), "--max-steps", "30", "--lr", "1e308")
    assert code == 2
    assert "--lr must be <= 1e+37, got 1e+308" in one_error_line(err)
    assert not out.exists()


def test_a_table_larger_than_the_memory_is_refused_before_it_is_allocated(tmp_path, train_here):
    pairs = english_pairs(tmp_path / "pairs.tsv", 40)
    # 10^10 dimensions: terabytes for any vocabulary, on any machine (10^8 was the report's, killed for memory).
    code, err = train_here(*small_run(pairs, None), "-o", str(tmp_path / "run"), "--dim", str(10**10))
    assert code == 2
    line = one_error_line(err)
    assert f"--dim {10**10}" in line and "GiB" in line and "Give a smaller --dim" in line


def test_languages_train_args_with_an_unbalanced_quote_is_one_error_line(tmp_path):
    out = tmp_path / "languages"
    code, _, err = run_cli("languages", "--langs", "de", "-o", str(out), "--train-args", '"unbalanced')
    assert code == 2
    line = one_error_line(err)
    assert "--train-args" in line and "No closing quotation" in line
    assert not out.exists()
