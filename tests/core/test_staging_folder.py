"""Folders built beside their output and put in place at the end: staging_folder, publish_folder and the clean-up
of what dead processes left."""

import os
import subprocess
import sys

from psp_hf.io.writing import publish_folder, remove_dead_staging, staging_folder


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_staged_folder_replaces_the_old_output_only_when_published(tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    (out / "old.txt").write_text("old", encoding="utf-8")
    staging = staging_folder(out, "export")
    assert staging.parent == tmp_path and staging.name.startswith(f".model.export-{os.getpid()}-")
    assert staging.stat().st_mode & 0o777 == 0o777 & ~_umask()  # the mode a plain mkdir gives, as `out` will have
    (staging / "new.txt").write_text("new", encoding="utf-8")
    assert (out / "old.txt").is_file()  # untouched until published
    publish_folder(staging, out)
    assert sorted(path.name for path in out.iterdir()) == ["new.txt"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["model"]  # no staging and no old folder left


def test_publishing_into_a_new_place(tmp_path):
    out = tmp_path / "deeper" / "out"
    staging = staging_folder(out)
    (staging / "file").write_text("x", encoding="utf-8")
    publish_folder(staging, out)
    assert (out / "file").read_text(encoding="utf-8") == "x" and not staging.exists()


def test_only_the_staging_folders_of_dead_processes_are_removed(tmp_path):
    out = tmp_path / "out"
    dead = tmp_path / f".out.tmp-{_dead_pid()}-abcd1234"
    live = tmp_path / f".out.tmp-{os.getpid()}-abcd1234"
    other = tmp_path / f".other.tmp-{_dead_pid()}-abcd1234"  # another output's
    unrelated = tmp_path / ".out.notes"
    for folder in (dead, live, other, unrelated):
        folder.mkdir()
    assert remove_dead_staging(out) == [dead]
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([live.name, other.name, unrelated.name])
    # A new staging folder cleans up first.
    dead.mkdir()
    staging = staging_folder(out)
    assert not dead.exists() and live.exists() and staging.exists()


def test_names_with_glob_characters(tmp_path):
    out = tmp_path / "model [v2]"
    dead = tmp_path / f".model [v2].tmp-{_dead_pid()}-abcd1234"
    dead.mkdir()
    assert remove_dead_staging(out) == [dead]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
