"""Issue 35, class 1 (security): nothing runs from a crafted file, nothing is written through a planted symlink,
no path named in a model folder leads out of it, a crafted tokenizer is one error, and devices/FIFOs given as
outputs are written into, never replaced."""

from __future__ import annotations

import json
import os
import pickle
import stat
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from fault_helpers import english_pairs, one_error_line, run_cli, small_run

from psp_hf.errors import PSPInputError
from psp_hf.training.loop.checkpoint import CheckpointStore, read_checkpoint_state


class _Marker:
    """Unpickling this (with a full unpickler) creates the marker file: proof that code ran."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _trained(tmp_path: Path, tokenizer: Path, train_here) -> tuple[list[str], Path]:
    pairs = english_pairs(tmp_path / "pairs.tsv", 40)
    common = small_run(pairs, tokenizer)
    out = tmp_path / "run"
    assert train_here(*common, "-o", str(out), "--max-steps", "2")[0] == 0
    return common, out


# ------------------------------------------------------------------------------- (a) resume never unpickles
@pytest.mark.parametrize("target", ["custom_checkpoint_0.pkl", "random_states_0.pkl", "optimizer.bin"])
def test_resume_never_runs_code_from_a_crafted_checkpoint(tmp_path, tokenizer, train_here, target):
    common, out = _trained(tmp_path, tokenizer, train_here)
    folder = CheckpointStore(out / "training").folder()
    marker = tmp_path / "code-ran"
    if target == "custom_checkpoint_0.pkl":  # a checkpoint of the earlier layout: counters in a pickle
        (folder / "train_state.json").unlink()
    (folder / target).write_bytes(pickle.dumps(_Marker(marker), protocol=2))
    code, err = train_here(*common, "-o", str(out), "--resume")
    assert not marker.exists(), "a crafted checkpoint file ran code on --resume"
    assert code == 2
    assert "is unusable" in one_error_line(err)


def test_a_checkpoint_of_the_pickled_layout_still_resumes(tmp_path, tokenizer, train_here):
    common, out = _trained(tmp_path, tokenizer, train_here)
    folder = CheckpointStore(out / "training").folder()
    state = json.loads((folder / "train_state.json").read_text())
    (folder / "train_state.json").unlink()
    torch.save(state, folder / "custom_checkpoint_0.pkl")  # what Accelerate's registered objects wrote
    assert read_checkpoint_state(out / "training")["step"] == 2
    code, err = train_here(*common, "-o", str(out), "--resume", "--max-steps", "3")
    assert code == 0, err
    assert read_checkpoint_state(out / "training")["step"] == 3


@pytest.mark.parametrize(
    "counters", [["not", "a", "dict"], {"step": "2"}, {"step": -1}, {"__class__": 1}, {"positions": [1.5]}]
)
def test_counters_of_the_wrong_shape_are_refused(tmp_path, tokenizer, train_here, counters):
    common, out = _trained(tmp_path, tokenizer, train_here)
    folder = CheckpointStore(out / "training").folder()
    (folder / "train_state.json").write_text(json.dumps(counters))
    code, err = train_here(*common, "-o", str(out), "--resume")
    assert code == 2 and "are not a training state" in one_error_line(err)


# ------------------------------------------------------------------------------- (b) planted symlinks
def test_a_symlinked_args_json_is_replaced_not_followed(tmp_path, tokenizer, train_here):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    training = tmp_path / "run" / "training"
    training.mkdir(parents=True)
    (training / "args.json").symlink_to(victim)
    pairs = english_pairs(tmp_path / "pairs.tsv", 40)
    code, err = train_here(*small_run(pairs, tokenizer), "-o", str(tmp_path / "run"), "--max-steps", "1")
    assert code == 0, err
    assert victim.read_text() == "precious\n"
    assert not (training / "args.json").is_symlink()
    assert json.loads((training / "args.json").read_text())["max_steps"] == 1


def test_the_metrics_log_is_never_appended_through_a_symlink(tmp_path):
    from psp_hf.training.reporting.metrics_log import MetricsLog

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "metrics.jsonl").symlink_to(victim)
    with pytest.raises(PSPInputError, match="is a symlink"):
        MetricsLog(tmp_path / "metrics.jsonl").append({"step": 1})
    assert victim.read_text() == "precious\n"


# ------------------------------------------------------------------------------- (c) paths named in folders
def _static_folder(tmp_path: Path, model: Path, module_path: str) -> Path:
    from psp_hf import load
    from psp_hf.persistence.static_models import save_model2vec

    save_model2vec(load(model), tmp_path / "elsewhere")  # a loadable table outside the folder
    folder = tmp_path / "crafted"
    folder.mkdir()
    modules = [{"idx": 0, "name": "0", "path": module_path, "type": "sentence_transformers.models.StaticEmbedding"}]
    (folder / "modules.json").write_text(json.dumps(modules))
    return folder


@pytest.mark.parametrize("kind", ["absolute", "dotdot", "symlink"])
def test_modules_json_paths_stay_inside_the_model_folder(tmp_path, model, kind):
    module_path = {"absolute": str(tmp_path / "elsewhere"), "dotdot": "../elsewhere", "symlink": "inside"}[kind]
    folder = _static_folder(tmp_path, model, module_path)
    if kind == "symlink":
        (folder / "inside").symlink_to(tmp_path / "elsewhere")
    code, _, err = run_cli("info", str(folder))
    assert code == 2
    line = one_error_line(err)
    assert "modules.json" in line and "model folder" in line


def test_sentence_transformers_evaluation_checks_module_paths_too(tmp_path, model):
    from psp_hf.evaluation.adapters import load_encoder

    folder = _static_folder(tmp_path, model, "../elsewhere")
    with pytest.raises(PSPInputError, match="leaves the model folder"):
        load_encoder(folder, kind="sentence-transformers")


def test_a_module_path_inside_the_folder_loads(tmp_path, model):
    from psp_hf import load
    from psp_hf.persistence.static_models import save_model2vec

    folder = tmp_path / "st"
    save_model2vec(load(model), folder / "0_StaticEmbedding")
    modules = [
        {"idx": 0, "name": "0", "path": "0_StaticEmbedding", "type": "sentence_transformers.models.StaticEmbedding"}
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    assert load(folder).encode(["a dog runs"]).shape == (1, 16)


# ------------------------------------------------------------------------------- (d) a crafted tokenizer.json
def _with_normalizer_pattern(model: Path, tmp_path: Path, pattern: str) -> Path:
    import shutil

    folder = tmp_path / "crafted-tok"
    shutil.copytree(model, folder)
    config = json.loads((folder / "tokenizer.json").read_text())
    config["normalizer"] = {"type": "Replace", "pattern": {"Regex": pattern}, "content": "x"}
    (folder / "tokenizer.json").write_text(json.dumps(config))
    return folder


def test_a_tokenizer_that_panics_on_ordinary_text_is_one_error_at_load(tmp_path, model, capfd):
    folder = _with_normalizer_pattern(model, tmp_path, "(a+)+$")
    (tmp_path / "in.txt").write_text("a dog runs\n")
    code, _, err = run_cli("embed", "-m", str(folder), str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.npy"))
    assert code == 2
    line = one_error_line(err)
    assert str(folder / "tokenizer.json") in line and "the tokenizer failed" in line
    assert "panicked" not in capfd.readouterr().err  # Rust's own panic report is kept off the terminal at load


def test_a_tokenizer_that_panics_on_some_input_is_one_error_at_encode(tmp_path, model):
    from psp_hf import load

    folder = _with_normalizer_pattern(model, tmp_path, "(x+)+y")  # ordinary text passes; long runs of x do not
    encoder = load(folder)
    with pytest.raises(PSPInputError, match="the tokenizer failed"):
        encoder.encode(["x" * 60 + " dog"])
    (tmp_path / "in.txt").write_text("x" * 60 + "\n")
    code, _, err = run_cli("embed", "-m", str(folder), str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.npy"))
    assert code == 2 and "the tokenizer failed" in one_error_line(err)
    assert not (tmp_path / "out.npy").exists()


# ------------------------------------------------------------------------------- (e) devices and FIFOs as -o
def _fifo_reader(fifo: Path) -> tuple[int, list[bytes]]:
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # opened first, so a writer never blocks
    return fd, []


def _drain(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def test_atomic_writes_write_into_a_fifo_instead_of_replacing_it(tmp_path):
    from psp_hf.io.writing import atomic_path

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    fd, _ = _fifo_reader(fifo)
    with atomic_path(fifo) as tmp:
        tmp.write_bytes(b"hello through the pipe\n")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert _drain(fd) == b"hello through the pipe\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.fifo"]  # no temporary left beside it


def test_psp_embed_into_a_fifo_streams_the_npy(tmp_path, model):
    fifo = tmp_path / "vectors.fifo"
    os.mkfifo(fifo)
    (tmp_path / "in.txt").write_text("a dog runs\nthe cat sits\n")
    fd, _ = _fifo_reader(fifo)
    result: dict = {}
    thread = threading.Thread(
        target=lambda: result.update(out=run_cli("embed", "-m", str(model), str(tmp_path / "in.txt"), "-o", str(fifo)))
    )
    thread.start()
    thread.join(120)
    code, _, err = result["out"]
    assert code == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    data = _drain(fd)
    (tmp_path / "copy.npy").write_bytes(data)
    assert np.load(tmp_path / "copy.npy").shape == (2, 16)


def test_psp_score_to_dev_null_keeps_the_device(tmp_path, model):
    (tmp_path / "pairs.tsv").write_text("a dog runs\tthe dog runs\n")
    before = os.stat("/dev/null")
    code, _, err = run_cli("score", "-m", str(model), str(tmp_path / "pairs.tsv"), "-o", "/dev/null")
    assert code == 0, err
    after = os.lstat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino


def test_a_socket_as_output_is_refused(tmp_path):
    import socket

    from psp_hf.io.writing import atomic_path

    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        with pytest.raises(PSPInputError, match="is a socket"), atomic_path(path) as tmp:
            tmp.write_text("x")
    finally:
        server.close()
    assert stat.S_ISSOCK(os.lstat(path).st_mode)


def test_a_link_to_a_descriptor_is_written_through_like_dev_stdout(tmp_path):
    from psp_hf.io.writing import atomic_path

    sink = tmp_path / "captured.txt"
    with open(sink, "wb") as handle:
        link = tmp_path / "stdout"
        link.symlink_to(f"/proc/self/fd/{handle.fileno()}")  # what /dev/stdout is
        with atomic_path(link) as tmp:
            tmp.write_bytes(b"to stdout\n")
    assert link.is_symlink(), "the descriptor link was replaced by a regular file"
    assert sink.read_bytes() == b"to stdout\n"


def test_a_link_to_a_regular_file_is_replaced_not_followed(tmp_path):
    from psp_hf.io.writing import atomic_path

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "out.txt"
    link.symlink_to(victim)
    with atomic_path(link) as tmp:
        tmp.write_text("new\n")
    assert victim.read_text() == "precious\n" and not link.is_symlink() and link.read_text() == "new\n"
