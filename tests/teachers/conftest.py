"""Fixtures of the teacher tests."""

from __future__ import annotations

import pytest
from e5_tiny import write_tiny_e5


@pytest.fixture
def tiny_e5(tmp_path, monkeypatch):
    """Named e5-small made from the tiny model file, converted into a throwaway teachers home."""
    write_tiny_e5(tmp_path / "tiny.bin")
    monkeypatch.setattr("psp_hf.teachers.e5_convert.packaged_e5_file", lambda: tmp_path / "tiny.bin")
    monkeypatch.setenv("PSP_TEACHERS_HOME", str(tmp_path / "home"))
    return tmp_path / "home"
