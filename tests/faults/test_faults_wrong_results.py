"""Wrong results with exit 0: inputs that used to give another model, misaligned pairs, non-JSON logs or nothing at
all without a word now give one `psp: error:` line (or a correct result)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from fault_helpers import english_pairs, one_error_line, run_cli, small_run, trained_run
from safetensors.numpy import load_file, save_file


@pytest.fixture(scope="module")
def embedded(tmp_path_factory, model) -> Path:
    """An embed-dataset folder of 5 sentences in shards of 2 (3 shards)."""
    root = tmp_path_factory.mktemp("emb")
    (root / "in.txt").write_text("a dog runs\nthe cat sits\na man walks\nthe bird eats\na girl reads\n")
    code, _, err = run_cli("embed-dataset", str(root / "in.txt"), "-m", str(model), "-o", str(root / "small"),
                           "--shard-size", "2", "-q")  # fmt: skip
    assert code == 0, err
    return root / "small"


# ------------------------------------------------------------------------------- huge but finite tables
@pytest.mark.parametrize("command", ["embed", "score"])
def test_a_table_of_huge_finite_values_is_refused_at_load(tmp_path, model, command):
    folder = tmp_path / "huge"
    shutil.copytree(model, folder)
    tensors = load_file(folder / "model.safetensors")
    tensors["embeddings.weight"][:] = 3e38  # finite, but every sum overflows to inf
    save_file(tensors, folder / "model.safetensors")
    (tmp_path / "in.txt").write_text("a dog runs\tthe dog runs\n")
    code, _, err = run_cli(command, "-m", str(folder), str(tmp_path / "in.txt"), "-o", str(tmp_path / "out"))
    assert code == 2
    line = one_error_line(err)
    assert "model.safetensors" in line and "3e+38" in line
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------- counters of a resumed run
@pytest.mark.parametrize("edit", ["empty", "step 200", "step 10**30", "1000 positions", "best after step"])
def test_counters_that_do_not_fit_the_run_are_refused(tmp_path, tokenizer, train_here, edit):
    common, out, folder = trained_run(tmp_path, tokenizer, train_here)
    state = json.loads((folder / "train_state.json").read_text())
    state = {
        "empty": {},
        "step 200": {**state, "step": 200},
        "step 10**30": {**state, "step": 10**30},
        "1000 positions": {**state, "positions": [0] * 1000},
        "best after step": {**state, "best_step": 50},
    }[edit]
    (folder / "train_state.json").write_text(json.dumps(state))
    code, err = train_here(*common, "-o", str(out), "--resume", "--max-steps", "3")
    assert code == 2
    line = one_error_line(err)
    assert "--resume" in line and "counters" in line


def _strict_json(line: str):
    def refuse(token: str):
        raise ValueError(f"{token} is not JSON")

    return json.loads(line, parse_constant=refuse)


def test_metrics_jsonl_never_holds_nan_or_infinity(tmp_path, tokenizer, train_here):
    from psp_hf.training.reporting.metrics_log import MetricsLog

    log = MetricsLog(tmp_path / "metrics.jsonl")
    log.append({"step": 1, "loss": math.nan, "scores": [math.inf, 1.5]})
    assert _strict_json((tmp_path / "metrics.jsonl").read_text()) == {"step": 1, "loss": None, "scores": [None, 1.5]}
    # A resume whose counters hold NaN is refused instead of logging them.
    common, out, folder = trained_run(tmp_path, tokenizer, train_here)
    state = json.loads((folder / "train_state.json").read_text())
    (folder / "train_state.json").write_text(json.dumps({**state, "train_seconds": math.nan}))
    code, err = train_here(*common, "-o", str(out), "--resume", "--max-steps", "3")
    assert code == 2 and "train_seconds" in one_error_line(err)
    for line in (out / "training" / "metrics.jsonl").read_text().splitlines():
        _strict_json(line)


# ------------------------------------------------------------------------------- embed-dataset rows and shards
@pytest.mark.parametrize("damage", ["swapped rows", "shifted rows", "short rows", "short embeddings"])
def test_psp_mine_refuses_shards_whose_rows_do_not_match(tmp_path, embedded, damage):
    folder = tmp_path / "emb"
    shutil.copytree(embedded, folder)
    rows, vectors = folder / "shard-00001.rows.npy", folder / "shard-00001.npy"
    if damage == "swapped rows":
        np.save(rows, np.array([3, 2], dtype=np.int64))
    elif damage == "shifted rows":
        np.save(rows, np.array([4, 5], dtype=np.int64))
    elif damage == "short rows":
        np.save(rows, np.array([2], dtype=np.int64))
    else:
        np.save(vectors, np.load(vectors)[:1])
    code, _, err = run_cli("mine", str(folder), "-o", str(tmp_path / "pairs.tsv"), "-q")
    assert code == 2
    line = one_error_line(err)
    assert "shard-00001" in line
    assert not (tmp_path / "pairs.tsv").exists()


def test_psp_mine_on_an_intact_folder_still_pairs_its_rows(tmp_path, embedded):
    code, _, err = run_cli("mine", str(embedded), "-o", str(tmp_path / "pairs.tsv"), "-q")
    assert code == 0, err
    lines = (tmp_path / "pairs.tsv").read_text().splitlines()
    assert lines[0] == "source_row\ttarget_row\tcosine\tmargin"
    pairs = [line.split("\t") for line in lines[1:]]
    assert pairs and all(0 <= int(row[0]) < 5 and 0 <= int(row[1]) < 5 and row[0] != row[1] for row in pairs)


# ------------------------------------------------------------------------------- arguments accepted without a word
def test_a_negative_margin_is_refused(tmp_path, tokenizer, train_here):
    pairs = english_pairs(tmp_path / "pairs.tsv", 20)
    code, err = train_here(*small_run(pairs, tokenizer), "-o", str(tmp_path / "run"), "--margin", "-1")
    assert code == 2 and "--margin" in one_error_line(err)
    assert not (tmp_path / "run").exists()


def test_a_word_boundary_piece_outside_the_vocabulary_is_refused(tmp_path, model):
    folder = tmp_path / "m"
    shutil.copytree(model, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "word_boundary_token_id": 10**7}))
    (tmp_path / "in.txt").write_text("a dog runs\n")
    code, _, err = run_cli("embed", "-m", str(folder), str(tmp_path / "in.txt"), "-o", str(tmp_path / "o.npy"))
    assert code == 2
    line = one_error_line(err)
    assert "config.json" in line and "word_boundary_token_id" in line


def test_psp_languages_with_no_languages_is_refused(tmp_path):
    code, _, err = run_cli("languages", "--langs", "", "-o", str(tmp_path / "out"))
    assert code == 2 and "--langs" in one_error_line(err)
    assert not (tmp_path / "out").exists()
