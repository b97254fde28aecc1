"""`io.iter_line_blocks` (psp embed's reader): the same lines, numbers and errors as the line-by-line reader."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from psp_hf.errors import PSPInputError
from psp_hf.io import lines as io_lines
from psp_hf.io import reading as io
from psp_hf.io.lines import iter_line_blocks
from psp_hf.io.reading import iter_raw_lines


def by_line(path) -> list:
    """What `iter_raw_lines` gives, decoded the way `iter_line_blocks` reports a line (str, or bytes if not UTF-8)."""
    lines = []
    for _, raw in iter_raw_lines(path):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            lines.append(raw)
    return lines


def by_block(path, block_bytes: int) -> list:
    lines, expected_first = [], 1
    for first, block in iter_line_blocks(path, block_bytes):
        assert first == expected_first  # numbers run on from block to block
        expected_first += len(block)
        lines.extend(block)
    return lines


def random_text(seed: int) -> bytes:
    """Lines of ASCII, accented and CJK text, empty lines, CRLF endings, bad UTF-8, maybe no final newline."""
    rng = np.random.default_rng(seed)
    pieces = ["plain words", "caf\u00e9 cr\u00e8me", "\u4e2d\u6587", "", " spaced  out ", "\u00e9"]
    out = bytearray()
    for _ in range(int(rng.integers(0, 60))):
        line = pieces[int(rng.integers(len(pieces)))].encode() * int(rng.integers(1, 4))
        if rng.random() < 0.1:
            line += b"\xff\xfe"  # not UTF-8
        out += line + [b"\n", b"\r\n", b"\r\r\n"][int(rng.integers(3))]
    if rng.random() < 0.5:
        out += b"last line without an ending"
    return bytes(out)


@pytest.mark.parametrize("seed", range(12))
def test_blocks_give_the_lines_the_line_reader_gives(tmp_path, seed):
    path = tmp_path / "in.txt"
    path.write_bytes(random_text(seed))
    want = by_line(path)
    for block_bytes in (1, 7, 64, 1 << 20):  # blocks that end inside lines and inside characters
        assert by_block(path, block_bytes) == want
    gz = tmp_path / "in.txt.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert by_block(gz, 5) == want


def test_an_empty_file_has_no_lines(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    assert list(iter_line_blocks(tmp_path / "empty.txt")) == []
    (tmp_path / "one.txt").write_bytes(b"\n")
    assert by_block(tmp_path / "one.txt", 4) == [""]


def test_a_line_past_the_bound_is_refused_with_its_number(tmp_path, monkeypatch):
    monkeypatch.setattr(io, "MAX_LINE_BYTES", 10)
    monkeypatch.setattr(io_lines, "MAX_LINE_BYTES", 10)
    path = tmp_path / "long.txt"
    path.write_bytes(b"short\nalso short\n" + b"x" * 11 + b"\nafter\n")
    for block_bytes in (3, 1 << 20):
        with pytest.raises(PSPInputError, match=r"long.txt:3: line longer than 10 bytes"):
            by_block(path, block_bytes)
    path.write_bytes(b"short\n" + b"x" * 11 + b"\n" + b"z" * 30 + b"\n")  # two too long in one block: the first
    with pytest.raises(PSPInputError, match=r"long.txt:2: line longer than 10 bytes"):
        by_block(path, 1 << 20)
    path.write_bytes(b"ok\n" + b"y" * 40)  # no newline at all after line 1: refused before it is read whole
    with pytest.raises(PSPInputError, match=r"long.txt:2: line longer"):
        by_block(path, 4)


def test_broken_gzip_names_the_next_line(tmp_path):
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(gzip.compress(b"one\ntwo\nthree\n" * 1000)[:-30])
    with pytest.raises(io.TruncatedInputError, match=r"cut.txt.gz:\d+: cannot read further"):
        by_block(path, 64)
