"""`psp embed` / `psp score` / `psp info` under faults: signals to real processes, full disks, bad paths and folders.

Every failure is one `psp: error: ...` line and a non-zero exit, and no output or temporary is left behind.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import psp_hf
from psp_hf import PSPEncoder
from psp_hf.cli import main
from psp_hf.tokenization.pieces import train_tokenizer

CORPUS = ["A man is playing a guitar.", "A woman slices an onion.", "Two dogs run in a field."] * 30


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("faults") / "model"
    PSPEncoder.from_tokenizer(train_tokenizer(CORPUS, vocab_size=60), hidden_size=8, seed=1).save_pretrained(folder)
    return folder


def _psp(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "psp_hf.cli", *args], capture_output=True, text=True, check=False, **kwargs
    )


def _one_error_line(stderr: str, *fragments: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("psp: error: "), stderr
    for fragment in fragments:
        assert fragment in lines[0], stderr


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def _start_embed_on_stdin(model_dir: Path, out: Path) -> subprocess.Popen:
    child = subprocess.Popen(
        [sys.executable, "-m", "psp_hf.cli", "embed", "-", "-m", str(model_dir), "-o", str(out), "--batch-size", "2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    child.stdin.write("A man is playing a guitar.\n" * 5)
    child.stdin.flush()
    deadline = time.monotonic() + 60
    while not _leftovers(out.parent) and time.monotonic() < deadline:  # wait until its temporary exists
        time.sleep(0.05)
    assert _leftovers(out.parent), "psp embed never opened its temporary output"
    time.sleep(0.3)  # let it write the first rows
    return child


# --------------------------------------------------------------------------------------------- signals
def test_sigterm_during_embed_removes_the_temporary(model_dir, tmp_path):
    out = tmp_path / "out.npy"
    child = _start_embed_on_stdin(model_dir, out)
    child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == 128 + signal.SIGTERM, stderr
    assert "psp: terminated; partial output removed" in stderr
    assert _leftovers(tmp_path) == [] and not out.exists()


def test_sigkill_leftover_is_removed_by_the_next_run(model_dir, tmp_path):
    out = tmp_path / "out.npy"
    child = _start_embed_on_stdin(model_dir, out)
    child.kill()
    child.communicate(timeout=60)
    leftovers = _leftovers(tmp_path)
    assert len(leftovers) == 1 and leftovers[0].startswith(f".out.npy.{child.pid}-")
    source = tmp_path / "in.txt"
    source.write_text("Two dogs run.\n", encoding="utf-8")
    result = _psp("embed", str(source), "-m", str(model_dir), "-o", str(out), "-q")
    assert result.returncode == 0, result.stderr
    assert _leftovers(tmp_path) == [] and np.load(out).shape == (1, 8)


# --------------------------------------------------------------------------------------------- full disk
def test_embed_disk_full_is_one_line_and_leaves_nothing(model_dir, tmp_path, capsys, monkeypatch):
    source = tmp_path / "in.txt"
    source.write_text("A man is playing a guitar.\nTwo dogs run.\n", encoding="utf-8")
    out = tmp_path / "out.npy"
    np.save(out, np.arange(3, dtype=np.float32))

    def full(self, rows):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("psp_hf.io.npy.NpyRowWriter.write", full)
    assert main(["embed", str(source), "-m", str(model_dir), "-o", str(out)]) == 2
    _one_error_line(capsys.readouterr().err, "out.npy: cannot write it: no space left on the device")
    np.testing.assert_array_equal(np.load(out), np.arange(3, dtype=np.float32))
    assert _leftovers(tmp_path) == []


def test_score_into_a_full_device_is_one_line(model_dir, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("A man plays.\tA man is playing.\n" * 50, encoding="utf-8")
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "psp_hf.cli", "score", str(pairs), "-m", str(model_dir)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    assert result.returncode == 2
    _one_error_line(result.stderr, "No space left on device")


def test_score_into_a_closed_pipe_is_one_line(model_dir, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("A man plays.\tA man is playing.\n" * 20000, encoding="utf-8")
    child = subprocess.Popen(
        [sys.executable, "-m", "psp_hf.cli", "score", str(pairs), "-m", str(model_dir), "--batch-size", "500"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout.readline() == b"sentence1\tsentence2\tcosine\n"
    child.stdout.close()  # what `| head -1` does
    stderr = child.stderr.read().decode()
    child.wait(timeout=60)
    assert child.returncode == 2
    _one_error_line(stderr, "output closed early (broken pipe)")


# --------------------------------------------------------------------------------------------- bad arguments
def test_bad_outputs_and_batch_size_fail_before_loading(model_dir, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("A man.\n", encoding="utf-8")
    missing_model = str(tmp_path / "no-model")  # would fail later: these checks come first
    assert main(["embed", str(source), "-m", missing_model, "-o", str(tmp_path)]) == 2
    _one_error_line(capsys.readouterr().err, "is a directory; give a file name")
    blocker = tmp_path / "file.txt"
    blocker.write_text("x", encoding="utf-8")
    assert main(["embed", str(source), "-m", missing_model, "-o", str(blocker / "out.npy")]) == 2
    _one_error_line(capsys.readouterr().err, "file.txt is not a folder")
    for command in (["embed", str(source), "-o", str(tmp_path / "o.npy")], ["score", str(source)]):
        assert main([*command, "-m", missing_model, "--batch-size", "0"]) == 2
        _one_error_line(capsys.readouterr().err, "--batch-size must be at least 1, got 0")
    assert main(["score", str(source), "-m", missing_model, "-o", str(tmp_path)]) == 2
    _one_error_line(capsys.readouterr().err, "is a directory; give a file name")


def test_inputs_directory_fifo_and_stdin(model_dir, tmp_path, capsys):
    out = tmp_path / "out.npy"
    assert main(["embed", str(tmp_path), "-m", str(model_dir), "-o", str(out)]) == 2
    _one_error_line(capsys.readouterr().err, "is a directory, expected a text file")

    fifo = tmp_path / "lines.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text("A man.\nTwo dogs.\n", encoding="utf-8"))
    writer.start()
    assert main(["embed", str(fifo), "-m", str(model_dir), "-o", str(out), "-q"]) == 0
    writer.join()
    expected = psp_hf.load(model_dir).encode(["A man.", "Two dogs."])
    np.testing.assert_array_equal(np.load(out), expected)

    result = _psp("embed", "-", "-m", str(model_dir), "-o", str(out), "-q", input="A man.\nTwo dogs.\n")
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(out), expected)
    result = _psp("score", "-", "-m", str(model_dir), "-o", "-", input="A man.\tTwo dogs.\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith("A man.\tTwo dogs.\t")


# --------------------------------------------------------------------------------------------- bad model folders
def _broken_copies(model_dir: Path, root: Path) -> dict[str, Path]:
    copies = {}

    def copy(name: str) -> Path:
        target = root / name
        shutil.copytree(model_dir, target)
        copies[name] = target
        return target

    weights = copy("truncated") / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-64])
    (copy("garbled") / "model.safetensors").write_bytes(os.urandom(512))
    config_path = copy("mismatch") / "config.json"
    config_path.write_text(json.dumps({**json.loads(config_path.read_text()), "hidden_size": 9}))
    (copy("tokenizer") / "tokenizer.json").write_text("{", encoding="utf-8")
    (copy("no-tokenizer") / "tokenizer.json").unlink()
    pickled = copy("pickle")
    (pickled / "model.safetensors").rename(pickled / "pytorch_model.bin")
    return copies


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("truncated", "model.safetensors: truncated"),
        ("garbled", "model.safetensors: not a safetensors file"),
        ("mismatch", "but config.json says vocab_size x hidden_size"),
        ("tokenizer", "tokenizer.json: not a valid tokenizer file"),
        ("no-tokenizer", "no tokenizer.json"),
        ("pickle", "psp loads safetensors only"),
    ],
)
def test_corrupt_model_folders_are_one_line_for_every_command(model_dir, tmp_path, capsys, name, message):
    folder = _broken_copies(model_dir, tmp_path)[name]
    source = tmp_path / "in.txt"
    source.write_text("A man.\n", encoding="utf-8")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("A man.\tA dog.\n", encoding="utf-8")
    out = tmp_path / "out.npy"
    for command in (
        ["embed", str(source), "-m", str(folder), "-o", str(out)],
        ["score", str(pairs), "-m", str(folder)],
        ["info", str(folder)],
    ):
        assert main(command) == 2
        captured = capsys.readouterr()
        _one_error_line(captured.err, message)
        assert captured.out == ""
    assert not out.exists()
