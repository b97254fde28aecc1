"""A full disk while safetensors writes weights: at the first checkpoint, at a later one, at the end of `psp train`
and in `psp export`. safetensors' Rust writer reports it as a `SafetensorError` (not an `OSError`), which went out as
a traceback; each is one `psp: error:` line that says what is kept.

The disk is filled by a stand-in for safetensors' writer that raises the error the real one raises on ENOSPC (its
exact wording, with the errno and the path): a full file system cannot be made without root here."""

from __future__ import annotations

import json
from pathlib import Path

from fault_helpers import build_model, english_pairs, one_error_line, run_cli, small_run


def _fill_the_disk(monkeypatch, when) -> None:
    """Make safetensors' writer fail as on a full disk for the files `when(path)` picks."""
    import safetensors
    import safetensors.numpy
    import safetensors.torch

    real = safetensors.torch.serialize_file

    def serialize_file(tensors, filename, *args, **kwargs):
        if when(str(filename)):
            raise safetensors.SafetensorError(
                f'Error while serializing: I/O error: No space left on device (os error 28) at path "{filename}"'
            )
        return real(tensors, filename, *args, **kwargs)

    # save_file looks serialize_file up in its module at each call: every writer (Accelerate's too) goes through it.
    monkeypatch.setattr(safetensors.torch, "serialize_file", serialize_file)
    monkeypatch.setattr(safetensors.numpy, "serialize_file", serialize_file)


def _train(tmp_path: Path, out: Path) -> tuple[int, str]:
    pairs = english_pairs(tmp_path / "pairs.tsv", 200)
    code, _, err = run_cli("train", *small_run(pairs, None), "-o", str(out), "--max-steps", "6",
                           "--save-every", "2")  # fmt: skip
    return code, err


def test_a_full_disk_at_the_first_checkpoint_is_one_error_line(tmp_path, monkeypatch):
    _fill_the_disk(monkeypatch, lambda name: ".checkpoint-tmp-" in name)
    out = tmp_path / "run"
    code, err = _train(tmp_path, out)
    assert code == 2
    line = one_error_line(err)
    assert "cannot write checkpoint" in line and "No space left on device" in line
    assert "no earlier checkpoint exists" in line
    assert not list((out / "training").glob(".checkpoint-tmp-*"))


def test_a_full_disk_at_a_later_checkpoint_keeps_the_previous_one(tmp_path, monkeypatch):
    out = tmp_path / "run"
    pointer = out / "training" / "checkpoint.json"
    _fill_the_disk(monkeypatch, lambda name: ".checkpoint-tmp-" in name and pointer.is_file())
    code, err = _train(tmp_path, out)
    assert code == 2
    line = one_error_line(err)
    kept = out / "training" / json.loads(pointer.read_text())["folder"]
    assert "No space left on device" in line and f"the previous checkpoint {kept} is kept" in line
    assert kept.is_dir() and not list((out / "training").glob(".checkpoint-tmp-*"))


def test_a_full_disk_at_the_final_export_is_one_error_line_and_resume_writes_the_folder(tmp_path, monkeypatch):
    _fill_the_disk(monkeypatch, lambda name: ".export-" in name)
    out = tmp_path / "run"
    code, err = _train(tmp_path, out)
    assert code == 2
    line = one_error_line(err)
    assert f"{out}: cannot write the model folder (No space left on device)" in line and "--resume" in line
    assert ".export-" not in line  # the output is named, not the staging folder
    assert not list(out.glob(".export-*")) and not (out / "model.safetensors").exists()
    monkeypatch.undo()  # space freed: the rerun the message suggests writes the folder
    pairs = tmp_path / "pairs.tsv"
    code, _, err = run_cli("train", *small_run(pairs, None), "-o", str(out), "--max-steps", "6",
                           "--save-every", "2", "--resume")  # fmt: skip
    assert code == 0, err
    assert (out / "model.safetensors").is_file()


def test_a_full_disk_in_psp_export_is_one_error_line(tmp_path, monkeypatch):
    model = build_model(tmp_path / "model")
    _fill_the_disk(monkeypatch, lambda name: True)
    out = tmp_path / "small"
    code, _, err = run_cli("export", str(model), "-o", str(out), "-q")
    assert code == 2
    line = one_error_line(err)
    assert f"--output {out}: cannot write it (No space left on device)" in line and ".export-" not in line
    assert not out.exists() and not list(tmp_path.glob(".small.export-*"))
