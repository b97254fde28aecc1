"""SIGKILL in the middle of a checkpoint write: the pointer still names a complete checkpoint, and the resumed
run ends with the same weights as an uninterrupted one (Accelerate's save_state alone is not atomic)."""

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from psp_hf.training.loop.checkpoint import CheckpointStore, read_checkpoint_state

REPO = Path(__file__).resolve().parents[2]
# Each test trains and kills real `psp train` runs: long, so `make test-fast` leaves them out.
pytestmark = pytest.mark.slow

WORDS = ["man", "woman", "dog", "cat", "runs", "walks", "park", "beach", "red", "blue", "big", "small", "ball"]


@pytest.fixture
def pairs(tmp_path) -> Path:
    rng = random.Random(1)
    lines = ["sentence1\tsentence2"]
    for _ in range(400):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 7))]
        lines.append(f"a {' '.join(words)}\tthe {' '.join(reversed(words))}")
    path = tmp_path / "pairs.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def tokenizer(tmp_path_factory) -> Path:
    from psp_hf.tokenization.pieces import train_tokenizer

    folder = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer([f"a {word} the {word}s" for word in WORDS] * 5, vocab_size=60, output_dir=folder)
    return folder


def test_sigkill_during_a_checkpoint_write_resumes_bit_identical(tmp_path, pairs, tokenizer):
    from psp_hf.cli import main

    # A wide table makes each write long enough to be caught half-way.
    common = [
        *("--data", str(pairs), "--tokenizer", str(tokenizer), "--dim", "40000", "--batch-size", "8"),
        *("--megabatch-size", "2", "--megabatch-anneal", "2", "--save-every", "4", "--dev", "none"),
        *("--threads", "1", "--keep", "last", "--shuffle-buffer", "64", "--quiet"),
    ]
    reference = tmp_path / "reference"
    threads = torch.get_num_threads()
    try:
        assert main(["train", *common, "-o", str(reference)]) == 0
    finally:
        torch.set_num_threads(threads)

    killed = tmp_path / "killed"
    training = killed / "training"
    process = subprocess.Popen(
        [sys.executable, str(REPO / "train.py"), *common, "-o", str(killed)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 240
    caught = False
    # Wait for the second checkpoint write to be under way (the first one is then complete), then kill.
    while process.poll() is None and time.time() < deadline:
        if (training / "checkpoint.json").is_file() and any(training.glob(".checkpoint-tmp-*/*")):
            caught = True
            break
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert caught and process.returncode == -signal.SIGKILL, "no checkpoint write was caught in progress"
    assert list(training.glob(".checkpoint-tmp-*")), "the kill left no half-written folder to recover from"
    saved = read_checkpoint_state(training)
    assert saved["step"] > 0 and not saved["finished"]
    assert (CheckpointStore(training).folder() / "model.safetensors").is_file()

    try:
        assert main(["train", *common, "-o", str(killed), "--resume"]) == 0
    finally:
        torch.set_num_threads(threads)
    assert not list(training.glob(".checkpoint-tmp-*"))
    expected, got = load_file(reference / "model.safetensors"), load_file(killed / "model.safetensors")
    assert torch.equal(expected["embeddings.weight"], got["embeddings.weight"])
