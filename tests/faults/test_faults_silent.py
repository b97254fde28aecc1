"""Issue 35, class 2 (nothing wrong in silence): NaN and infinity stop a run or are refused, an empty training
file is an error, NaN rows and arguments in `psp mine`, NaN weights in model2vec folders, empty int8 results,
overlapping safetensors, NaN gold scores, and file modes that follow the umask."""

from __future__ import annotations

import json
import os
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
from fault_helpers import english_pairs, one_error_line, run_cli, small_run

from psp_hf.errors import PSPInputError
from psp_hf.training.loop.checkpoint import CheckpointStore, read_checkpoint_state


# ------------------------------------------------------------------------------------------ training
@pytest.mark.parametrize("flag,value", [("--lr", "nan"), ("--lr", "inf"), ("--margin", "nan"), ("--init-std", "inf")])
def test_non_finite_numbers_are_refused_before_training(tmp_path, tokenizer, train_here, flag, value):
    pairs = english_pairs(tmp_path / "pairs.tsv", 20)
    code, err = train_here(*small_run(pairs, tokenizer), "-o", str(tmp_path / "run"), flag, value)
    assert code == 2
    assert f"{flag} must be a finite number" in one_error_line(err)
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_a_diverging_run_stops_and_keeps_its_last_good_checkpoint(tmp_path, tokenizer, train_here, monkeypatch):
    import torch

    from psp_hf.training.loop.trainer import Trainer

    real_step = Trainer._train_step

    def step_that_diverges(self, *args, **kwargs):  # from step 3 on the weights are NaN (a blown-up update)
        result = real_step(self, *args, **kwargs)
        if self.state.step >= 2:
            with torch.no_grad():
                self.model.embeddings.weight.fill_(float("nan"))
        return result

    monkeypatch.setattr(Trainer, "_train_step", step_that_diverges)
    pairs = english_pairs(tmp_path / "pairs.tsv", 80)
    out = tmp_path / "run"
    code, err = train_here(*small_run(pairs, tokenizer), "-o", str(out), "--save-every", "2")
    assert code == 2
    line = one_error_line(err)
    assert "training diverged" in line and "the last good checkpoint" in line and "(step 2)" in line
    assert read_checkpoint_state(out / "training")["step"] == 2  # nothing after the divergence was saved
    assert not (out / "model.safetensors").exists()  # and no NaN model was exported


def test_resuming_a_checkpoint_with_nan_weights_is_refused(tmp_path, tokenizer, train_here):
    from safetensors.torch import load_file, save_file

    pairs = english_pairs(tmp_path / "pairs.tsv", 40)
    common = small_run(pairs, tokenizer)
    out = tmp_path / "run"
    assert train_here(*common, "-o", str(out), "--max-steps", "2")[0] == 0
    weights = CheckpointStore(out / "training").folder() / "model.safetensors"
    tensors = load_file(weights)
    name = next(iter(tensors))
    tensors[name][3] = float("nan")
    save_file(tensors, weights)
    code, err = train_here(*common, "-o", str(out), "--resume")
    assert code == 2 and "holds NaN or infinite values" in one_error_line(err)


def test_a_header_only_training_file_is_an_error(tmp_path, tokenizer, train_here):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("sentence1\tsentence2\n")
    code, err = train_here(*small_run(pairs, tokenizer), "-o", str(tmp_path / "run"))
    assert code == 2 and "no training pairs" in one_error_line(err)
    assert not (tmp_path / "run" / "model.safetensors").exists()


# ------------------------------------------------------------------------------------------ psp mine
def test_mine_refuses_a_nan_threshold(tmp_path):
    np.save(tmp_path / "e.npy", np.eye(4, dtype=np.float32))
    code, _, err = run_cli(
        "mine", str(tmp_path / "e.npy"), "--mode", "threshold", "--threshold", "nan", "-o", str(tmp_path / "x.tsv")
    )
    assert code == 2 and "--threshold must be a finite number" in one_error_line(err)


def test_mine_skips_nan_rows(tmp_path):
    rng = np.random.default_rng(0)
    base = rng.normal(size=(6, 8)).astype(np.float32)
    embeddings = np.concatenate([base, base + 0.01 * rng.normal(size=(6, 8)).astype(np.float32)])
    embeddings[4] = np.nan  # what psp embed --skip-bad-lines writes for a skipped line
    np.save(tmp_path / "e.npy", embeddings)
    out = tmp_path / "pairs.tsv"
    code, _, err = run_cli("mine", str(tmp_path / "e.npy"), "--mode", "threshold", "--threshold", "0.9", "-o", str(out))
    assert code == 0, err
    assert "skipped 1 row(s) holding NaN" in err
    rows = [line.split("\t") for line in out.read_text().splitlines()[1:]]
    assert rows, "the near-duplicates were not found"
    assert all("4" not in (row[0], row[1]) for row in rows)
    assert all(np.isfinite(float(row[2])) for row in rows)


# ------------------------------------------------------------------------------------------ model folders
def _model2vec(model: Path, folder: Path, change) -> Path:
    from safetensors.numpy import load_file, save_file

    from psp_hf import load
    from psp_hf.persistence.static_models import save_model2vec

    save_model2vec(load(model), folder)
    tensors = load_file(folder / "model.safetensors")
    change(tensors)
    save_file(tensors, folder / "model.safetensors")
    return folder


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_model2vec_weights_are_refused_in_one_line(tmp_path, model, value):
    def poison(tensors):
        tensors["embeddings"][5, 2] = value

    folder = _model2vec(model, tmp_path / "m2v", poison)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy RuntimeWarning on the way
        code, _, err = run_cli("info", str(folder))
    assert code == 2
    assert "embeddings has NaN or infinite values (row 5" in one_error_line(err)


def test_non_finite_model2vec_piece_weights_are_refused(tmp_path, model):
    def add_weights(tensors):
        weights = np.ones(len(tensors["embeddings"]), dtype=np.float32)
        weights[1] = np.inf
        tensors["weights"] = weights

    folder = _model2vec(model, tmp_path / "m2v", add_weights)
    with pytest.raises(PSPInputError, match="weights has NaN or infinite values"):
        from psp_hf import load

        load(folder)


@pytest.mark.parametrize("precision,dtype", [("int8", np.int8), ("uint8", np.uint8), ("binary", np.int8),
                                             ("ubinary", np.uint8), ("float16", np.float16)])  # fmt: skip
def test_encoding_no_sentences_keeps_the_precision_dtype(model, precision, dtype):
    from psp_hf import load

    result = load(model).encode([], precision=precision)
    assert result.dtype == dtype and result.shape[0] == 0


def _safetensors(path: Path, header: dict, data: bytes) -> None:
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def test_safetensors_with_overlapping_tensors_are_refused(tmp_path, model):
    import shutil

    folder = tmp_path / "overlap"
    shutil.copytree(model, folder)
    config = json.loads((folder / "config.json").read_text())
    vocab, dim = config["vocab_size"], config["hidden_size"]
    table_bytes = vocab * dim * 4
    header = {
        "embeddings.weight": {"dtype": "F32", "shape": [vocab, dim], "data_offsets": [0, table_bytes]},
        "piece_weights": {"dtype": "F32", "shape": [vocab], "data_offsets": [0, vocab * 4]},  # inside the table
    }
    _safetensors(folder / "model.safetensors", header, np.ones(vocab * dim, dtype="<f4").tobytes())
    code, _, err = run_cli("info", str(folder))
    assert code == 2 and "overlap" in one_error_line(err)


# ------------------------------------------------------------------------------------------ psp eval data
def test_a_nan_gold_score_is_a_data_error(tmp_path):
    from psp_hf.evaluation.data import _score_pairs

    path = tmp_path / "sts.tsv"
    path.write_text("score\tsentence1\tsentence2\n4.0\ta dog\ta dog\nnan\ta cat\tthe cat\n")
    with pytest.raises(PSPInputError, match=r"sts\.tsv:3: score 'nan' is not a finite number"):
        _score_pairs(path, "sts")


# ------------------------------------------------------------------------------------------ file modes
@pytest.fixture
def umask_027():
    previous = os.umask(0o027)
    yield 0o640
    os.umask(previous)


def _modes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mode & 0o777 for p in folder.rglob("*") if p.is_file()}


def test_save_pretrained_files_follow_the_umask(tmp_path, model, umask_027):
    from psp_hf import load

    load(model).save_pretrained(tmp_path / "saved")
    modes = _modes(tmp_path / "saved")
    assert modes["model.safetensors"] == umask_027
    assert set(modes.values()) == {umask_027}, modes


def test_checkpoints_and_exports_follow_the_umask(tmp_path, tokenizer, train_here, umask_027):
    pairs = english_pairs(tmp_path / "pairs.tsv", 40)
    out = tmp_path / "run"
    assert train_here(*small_run(pairs, tokenizer), "-o", str(out), "--max-steps", "2")[0] == 0
    checkpoint = _modes(CheckpointStore(out / "training").folder())
    assert checkpoint["model.safetensors"] == umask_027 and set(checkpoint.values()) == {umask_027}, checkpoint
    assert _modes(out)["model.safetensors"] == umask_027
    code, _, err = run_cli("export", str(out), "-o", str(tmp_path / "m2v"), "--format", "model2vec")
    assert code == 0, err
    assert _modes(tmp_path / "m2v")["model.safetensors"] == umask_027


# ------------------------------------------------------------------------------------------ memory
def test_one_huge_line_is_refused_not_tokenized_into_gigabytes(tmp_path, model):
    from psp_hf.io.reading import MAX_LINE_BYTES

    huge = tmp_path / "huge.txt"
    huge.write_bytes(b"a short line\n" + b"a dog " * (MAX_LINE_BYTES // 3))  # 2 MiB, no newline
    code, _, err = run_cli("embed", "-m", str(model), str(huge), "-o", str(tmp_path / "out.npy"))
    assert code == 2
    assert f"{huge}:2: line longer than {MAX_LINE_BYTES:,} bytes" in one_error_line(err)
    assert not (tmp_path / "out.npy").exists()


def test_a_line_of_exactly_the_limit_is_read(tmp_path):
    from psp_hf.io.reading import MAX_LINE_BYTES, iter_raw_lines

    path = tmp_path / "long.txt"
    path.write_bytes(b"x" * (MAX_LINE_BYTES - 1) + b"\n" + b"next\n")
    lines = list(iter_raw_lines(path))
    assert [number for number, _ in lines] == [1, 2] and len(lines[0][1]) == MAX_LINE_BYTES - 1


# ------------------------------------------------------------------------------------------ litter
def test_a_killed_writers_temporary_goes_with_the_next_write_into_its_folder(tmp_path):
    import subprocess
    import sys

    from psp_hf.io.writing import atomic_path

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)  # a process that has exited: what a SIGKILLed psp leaves is named after such a pid
    stale = tmp_path / f".vectors.npy.{pid}-0123abcd.tmp"
    stale.write_bytes(b"half an embedding file")
    alive = tmp_path / f".other.npy.{os.getpid()}-0123abcd.tmp"  # this process's own: kept
    alive.write_bytes(b"in progress")
    unrelated = tmp_path / ".notes.tmp"
    unrelated.write_text("not psp's")
    with atomic_path(tmp_path / "scores.tsv") as tmp:  # another output, into the same folder
        tmp.write_text("x\n")
    assert not stale.exists() and alive.exists() and unrelated.exists()


def test_an_export_that_fails_midway_leaves_nothing_that_blocks_the_rerun(tmp_path, model, monkeypatch):
    import errno

    import psp_hf.persistence.static_models as static_models

    real_write_json = static_models.write_json

    def full_disk(path, data):  # the table was written, then the disk filled
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(static_models, "write_json", full_disk)
    out = tmp_path / "m2v"
    code, _, err = run_cli("export", str(model), "-o", str(out), "--format", "model2vec")
    assert code == 2 and "No space left on device" in one_error_line(err)
    assert not out.exists() and list(tmp_path.iterdir()) == []  # no half folder, no staging folder
    monkeypatch.setattr(static_models, "write_json", real_write_json)
    code, _, err = run_cli("export", str(model), "-o", str(out), "--format", "model2vec")
    assert code == 0, err
    assert (out / "model.safetensors").is_file() and (out / "config.json").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_embed_dataset_workers_stop_with_their_parent(tmp_path, model, sig):
    import random
    import signal
    import subprocess
    import sys
    import time

    import psutil

    rng = random.Random(0)
    words = ["man", "dog", "cat", "runs", "sits", "the", "a", "park", "ball", "red"]
    source = tmp_path / "big.txt"
    source.write_text("".join(" ".join(rng.choice(words) for _ in range(8)) + "\n" for _ in range(400_000)))
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "psp_hf.cli", "embed-dataset", "-m", str(model), "-o", str(out)]
    parent = subprocess.Popen([*argv, "--num-proc", "2", "--threads", "1", "-q", str(source)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    workers: list = []
    while len(workers) < 2 and time.monotonic() < deadline:
        workers = psutil.Process(parent.pid).children()
        time.sleep(0.05)
    assert len(workers) == 2, "the workers did not start"
    parent.send_signal(getattr(signal, sig))
    parent.wait(timeout=60)
    deadline = time.monotonic() + 5  # the 400,000 lines take the workers far longer than this
    while time.monotonic() < deadline and any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers):
        time.sleep(0.1)
    alive = [w.pid for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]
    for pid in alive:  # do not leave them behind whatever the outcome
        psutil.Process(pid).kill()
    assert not alive, f"workers {alive} went on after their parent got {sig}"
    if sig == "SIGTERM":
        assert parent.returncode == 128 + signal.SIGTERM
        assert not list(out.glob(".*.tmp")) if out.exists() else True  # their temporaries removed


# ------------------------------------------------------------------------------------------ psp prepare
def _german_english(path: Path, n: int = 60) -> Path:
    import random

    german = "der die das ein mann frau kind hund katze läuft spielt sitzt im auf dem strand park fluss und mit"
    rng = random.Random(0)
    rows = ["de\ten"]
    for _ in range(n):
        words = " ".join(rng.choice(german.split()) for _ in range(6))
        rows.append(f"der {words} ist schön\tthe dog runs in the park with a ball")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_prepare_bitext_with_the_wrong_language_writes_nothing_and_says_why(tmp_path):
    data = _german_english(tmp_path / "de-en.tsv")
    out = tmp_path / "out"
    code, _, err = run_cli("prepare", "bitext", "--lang", "fr", "--langid", str(data), "-o", str(out))
    assert code == 2
    line = one_error_line(err)
    assert "no pairs left to write" in line and "language 60" in line and "--lang" in line
    assert not out.exists()


def test_prepare_bitext_without_langid_warns_when_the_text_is_another_language(tmp_path):
    data = _german_english(tmp_path / "de-en.tsv")
    code, _, err = run_cli("prepare", "bitext", "--lang", "fr", str(data), "-o", str(tmp_path / "fr"))
    assert code == 0 and (tmp_path / "fr").is_dir()  # a warning, not an error: langid was not asked for
    warning = [line for line in err.splitlines() if "does not look like" in line]
    assert len(warning) == 1 and "read as fr does not look like it" in warning[0] and "finds de" in warning[0]
    code, _, err = run_cli("prepare", "bitext", "--lang", "de", str(data), "-o", str(tmp_path / "de"))
    assert code == 0 and "does not look like" not in err


def test_prepare_of_a_header_only_file_is_an_error(tmp_path):
    data = tmp_path / "de-en.tsv"
    data.write_text("de\ten\n")
    code, _, err = run_cli("prepare", "bitext", "--lang", "de", str(data), "-o", str(tmp_path / "out"))
    assert code == 2 and "no pairs left to write: 0 read" in one_error_line(err)
    assert not (tmp_path / "out").exists()
