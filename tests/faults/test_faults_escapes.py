"""Security: what psp writes stays where the user sent it, and what it resumes from stays inside the run.

Links planted in output folders (at a file's name, through `/proc/self/root`, at a folder of a run), symlinks in a
folder given to `psp push`, links at a resumed back-translation folder's report and card, and checkpoint.json
pointers and counter files that lead out of the run."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from fault_helpers import english_pairs, one_error_line, run_cli, small_run, trained_run


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    return victim


def _through_proc_root(path: Path) -> str:
    # The same file by another name: a link whose target starts with /proc/ but names no descriptor.
    return f"/proc/self/root{path.resolve()}"


# ------------------------------------------------------------------------------- outputs: a link at the name
def test_psp_score_never_writes_through_a_link_by_way_of_proc_root(tmp_path, model):
    victim = _victim(tmp_path)
    (tmp_path / "pairs.tsv").write_text("a dog runs\tthe dog runs\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "s.tsv").symlink_to(_through_proc_root(victim))
    code, _, err = run_cli("score", "-m", str(model), str(tmp_path / "pairs.tsv"), "-o", str(out / "s.tsv"))
    assert code == 0, err
    assert victim.read_text() == "precious\n"
    assert not (out / "s.tsv").is_symlink()
    assert (out / "s.tsv").read_text().startswith("sentence1\tsentence2\tcosine")


def test_args_json_is_never_written_through_a_link_by_way_of_proc_root(tmp_path, tokenizer, train_here):
    victim = _victim(tmp_path)
    training = tmp_path / "run" / "training"
    training.mkdir(parents=True)
    (training / "args.json").symlink_to(_through_proc_root(victim))
    pairs = english_pairs(tmp_path / "pairs.tsv", 40)
    code, err = train_here(*small_run(pairs, tokenizer), "-o", str(tmp_path / "run"), "--max-steps", "1")
    assert code == 0, err
    assert victim.read_text() == "precious\n"
    assert json.loads((training / "args.json").read_text())["max_steps"] == 1


def test_a_link_to_a_descriptor_open_only_for_reading_is_refused(tmp_path):
    from psp_hf.errors import PSPInputError
    from psp_hf.io.writing import atomic_path

    victim = _victim(tmp_path)
    link = tmp_path / "out.txt"
    with open(victim, "rb") as handle:  # as psp holds an input open while it writes
        link.symlink_to(f"/proc/self/fd/{handle.fileno()}")
        with pytest.raises(PSPInputError, match="not open for writing"), atomic_path(link) as tmp:
            tmp.write_text("new\n")
    assert victim.read_text() == "precious\n"
    assert link.is_symlink()


def test_a_descriptor_of_this_process_open_for_writing_is_written_into(tmp_path):
    from psp_hf.io.writing import atomic_path

    read_end, write_end = os.pipe()  # what a shell's process substitution, -o >(gzip > x), hands over as /dev/fd/N
    try:
        with atomic_path(f"/dev/fd/{write_end}") as tmp:
            tmp.write_bytes(b"through the pipe\n")
        os.close(write_end)
        assert os.read(read_end, 100) == b"through the pipe\n"
    finally:
        os.close(read_end)
        with contextlib.suppress(OSError):
            os.close(write_end)


# ------------------------------------------------------------------------------- outputs: a linked folder in a run
def test_a_run_whose_training_folder_links_elsewhere_is_refused(tmp_path, tokenizer, train_here):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "training").symlink_to(elsewhere)
    pairs = english_pairs(tmp_path / "pairs.tsv", 40)
    code, err = train_here(*small_run(pairs, tokenizer), "-o", str(tmp_path / "run"), "--max-steps", "1")
    assert code == 2
    assert "training: is a symlink" in one_error_line(err)
    assert list(elsewhere.iterdir()) == []


def test_a_model_subfolder_linking_elsewhere_is_refused_before_training(tmp_path, tokenizer, train_here):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "2_Pooling").symlink_to(elsewhere)  # where the model folder's pooling config goes
    pairs = english_pairs(tmp_path / "pairs.tsv", 40)
    code, err = train_here(*small_run(pairs, tokenizer), "-o", str(tmp_path / "run"), "--max-steps", "1")
    assert code == 2
    assert "2_Pooling: is a symlink" in one_error_line(err)
    assert list(elsewhere.iterdir()) == []
    assert not (tmp_path / "run" / "training").exists()  # refused before any work


def test_an_atomic_write_below_an_output_folder_refuses_a_linked_folder(tmp_path):
    from psp_hf.errors import PSPInputError
    from psp_hf.io.writing import atomic_path, output_folder

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "sub").symlink_to(elsewhere)
    target = tmp_path / "out" / "sub" / "x.json"
    refused = pytest.raises(PSPInputError, match="inside the output folder")
    with output_folder(tmp_path / "out"), refused, atomic_path(target) as tmp:
        tmp.write_text("{}")
    assert list(elsewhere.iterdir()) == []
    with atomic_path(target) as tmp:  # no output folder declared: the link is the user's
        tmp.write_text("{}")
    assert (elsewhere / "x.json").read_text() == "{}"


# ------------------------------------------------------------------------------- psp push
def test_psp_push_uploads_only_regular_files_inside_the_folder(tmp_path, model, hub_server, hub_repo_id):
    secret = tmp_path / "secret.txt"
    secret.write_text("the password\n")
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "key.txt").write_text("another secret\n")
    folder = tmp_path / "M"
    shutil.copytree(model, folder)
    (folder / "notes.txt").symlink_to(secret)
    (folder / "linked").symlink_to(secrets)
    code, _, err = run_cli("push", str(folder), hub_repo_id)
    assert code == 0, err
    files = hub_server.repo_files(hub_repo_id)
    assert "model.safetensors" in files and "config.json" in files
    assert not [name for name in files if name == "notes.txt" or name.startswith("linked")], files
    assert "notes.txt" in err and "linked" in err  # named as left out


# ------------------------------------------------------------------------------- psp backtranslate resuming
def test_backtranslate_resuming_never_writes_through_links_at_report_and_card(tmp_path, capsys):
    from toy_translation import build_models, make_bitext

    models = build_models(tmp_path / "models")
    make_bitext(tmp_path / "b.tsv", 8, seed=1)
    args = ["backtranslate", str(tmp_path / "b.tsv"), "--src-lang", "cs", "--model", str(models / "mt")]
    args += ["--batch-size", "4", "--chunk-size", "4", "--max-new-tokens", "6", "-q", "-o", str(tmp_path / "bt")]
    code, _, err = run_cli(*args)
    assert code == 0, err
    victims = {name: tmp_path / f"victim-{name}" for name in ("report.json", "README.md")}
    for name, victim in victims.items():
        victim.write_text("precious\n")
        (tmp_path / "bt" / name).unlink()
        (tmp_path / "bt" / name).symlink_to(victim)
    code, _, err = run_cli(*args)
    assert code == 0, err
    for name, victim in victims.items():
        assert victim.read_text() == "precious\n", f"{name} was written through its link"
        assert not (tmp_path / "bt" / name).is_symlink()
    assert json.loads((tmp_path / "bt" / "report.json").read_text())["translation"]


# ------------------------------------------------------------------------------- --resume stays inside the run
def _point_at(out: Path, folder: str) -> None:
    pointer_path = out / "training" / "checkpoint.json"
    pointer = json.loads(pointer_path.read_text())
    pointer["folder"] = folder
    pointer_path.write_text(json.dumps(pointer))


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("kind", ["absolute", "dotdot", "old-layout-outside", "dangling-state-link"])
def test_resume_neither_loads_nor_writes_outside_the_run(tmp_path, tokenizer, train_here, kind):
    common, out, checkpoint = trained_run(tmp_path, tokenizer, train_here)
    outside = tmp_path / "outside" / "checkpoint-9"
    shutil.copytree(checkpoint, outside)  # a loadable checkpoint outside the run
    planted = tmp_path / "planted.json"
    if kind == "absolute":
        _point_at(out, str(outside))
    elif kind == "dotdot":
        _point_at(out, os.path.relpath(outside, out / "training"))
    elif kind == "old-layout-outside":
        state = json.loads((outside / "train_state.json").read_text())
        (outside / "train_state.json").unlink()
        torch.save(state, outside / "custom_checkpoint_0.pkl")
        _point_at(out, os.path.relpath(outside, out / "training"))
    else:
        state = json.loads((checkpoint / "train_state.json").read_text())
        (checkpoint / "train_state.json").unlink()
        torch.save(state, checkpoint / "custom_checkpoint_0.pkl")
        (checkpoint / "train_state.json").symlink_to(planted)
    before = _snapshot(tmp_path / "outside")
    code, err = train_here(*common, "-o", str(out), "--resume", "--max-steps", "3")
    assert code == 2, err
    assert "--resume" in one_error_line(err)
    assert _snapshot(tmp_path / "outside") == before  # nothing written or deleted there
    assert not planted.exists()
