"""psp_hf.io.writing's atomic writer, psp_hf.io.npy's .npy writers and psp_hf.io.reading's input checks: modes,
stale temporaries, disk-full errors."""

from __future__ import annotations

import errno
import os
import stat

import numpy as np
import pytest

from psp_hf.errors import PSPInputError
from psp_hf.io.npy import NpyRowWriter, open_npy_for_writing
from psp_hf.io.reading import check_input, iter_raw_lines
from psp_hf.io.writing import atomic_path, check_output


@pytest.fixture
def umask():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_output_follows_the_umask(tmp_path, umask, mask, mode):
    os.umask(mask)
    target = tmp_path / "out.txt"
    with atomic_path(target) as tmp:
        tmp.write_text("x", encoding="utf-8")
    assert stat.S_IMODE(target.stat().st_mode) == mode


def test_stale_temporaries_of_dead_writers_are_removed(tmp_path):
    target = tmp_path / "out.npy"
    dead = tmp_path / ".out.npy.999999999-0a1b2c3d.tmp"  # above any pid_max: that writer is surely gone
    live = tmp_path / f".out.npy.{os.getppid()}-0a1b2c3d.tmp"  # a running process's: must stay
    other = tmp_path / ".other.npy.999999999-0a1b2c3d.tmp"  # another output's, its writer dead too (issue 35)
    for path in (dead, live, other):
        path.write_bytes(b"partial")
    with atomic_path(target) as tmp:
        assert tmp.name.startswith(f".out.npy.{os.getpid()}-") and tmp.name.endswith(".tmp")
        tmp.write_bytes(b"done")
    assert not dead.exists() and live.exists() and not other.exists()
    assert target.read_bytes() == b"done"


def test_failed_block_keeps_old_output_and_removes_temporary(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("new", encoding="utf-8")
        raise RuntimeError("boom")
    assert target.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_disk_full_is_one_clear_error(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(PSPInputError, match=r"out.txt: cannot write it: no space left on the device"):  # noqa: SIM117
        with atomic_path(target):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert list(tmp_path.iterdir()) == []


def test_npy_row_writer_streams_rows_and_fills_in_the_count(tmp_path):
    path = tmp_path / "rows.npy"
    rows = np.arange(24, dtype=np.float64).reshape(6, 4)
    with NpyRowWriter(path, 4) as writer:
        writer.write(rows[:2])
        writer.write(rows[2:])
    loaded = np.load(path)
    assert loaded.dtype == np.float32 and loaded.shape == (6, 4)
    np.testing.assert_array_equal(loaded, rows)


def test_preallocated_memmap_reports_disk_full_up_front(tmp_path, monkeypatch):
    out = open_npy_for_writing(tmp_path / "ok.npy", (3, 2))
    out[:] = 1.5
    out.flush()
    del out
    np.testing.assert_array_equal(np.load(tmp_path / "ok.npy"), np.full((3, 2), 1.5, dtype=np.float32))

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(OSError) as caught:
        open_npy_for_writing(tmp_path / "full.npy", (1000, 1000))
    assert caught.value.errno == errno.ENOSPC


def test_input_checks_say_what_the_path_is(tmp_path):
    with pytest.raises(PSPInputError, match="is a directory, expected a text file"):
        check_input(tmp_path)
    with pytest.raises(PSPInputError, match="no such file"):
        check_input(tmp_path / "missing.txt")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    check_input(fifo)  # a pipe is read as a stream
    check_input("-")


def test_output_checks_before_the_work(tmp_path, monkeypatch):
    with pytest.raises(PSPInputError, match="is a directory; give a file name"):
        check_output(tmp_path)
    blocker = tmp_path / "file.txt"
    blocker.write_text("x", encoding="utf-8")
    with pytest.raises(PSPInputError, match="file.txt is not a folder"):
        check_output(blocker / "sub" / "out.npy")
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(PSPInputError, match="cannot write in"):
        check_output(tmp_path / "new" / "out.npy")


def test_truncated_gzip_names_the_line(tmp_path):
    import gzip

    path = tmp_path / "in.txt.gz"
    data = gzip.compress(b"".join(b"line %d\n" % i for i in range(2000)))
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(PSPInputError, match=r"in.txt.gz:\d+: cannot read further: broken gzip data"):
        for _ in iter_raw_lines(path):
            pass
