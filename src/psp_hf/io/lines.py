"""Reading a file of lines a block at a time: `iter_line_blocks`, the fast twin of `io.iter_raw_lines`."""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator

import numpy as np

from ..errors import PSPInputError
from .reading import MAX_LINE_BYTES, TruncatedInputError, open_binary, too_long_message

# `iter_line_blocks` reads about this many bytes at a time.
LINE_BLOCK_BYTES = 1 << 22
_NEWLINE = 10


def iter_line_blocks(path: str | os.PathLike, block_bytes: int = LINE_BLOCK_BYTES) -> Iterator[tuple[int, list]]:
    """`iter_raw_lines` a block of lines at a time, decoded: `(number of the first line, lines)`, where a line is
    a `str`, or its `bytes` when it is not UTF-8 (for the caller to report or skip with `decode_line`).

    A block is decoded and split by one call each, not line by line (no Python work per line when all is UTF-8).
    Line numbers, line endings, the line-length bound and the errors are those of `iter_raw_lines`.
    """
    with open_binary(path) as handle:
        number, rest = 1, b""
        while True:
            data, broken = _read_block(handle, block_bytes)
            block = rest + data
            # A broken stream keeps its last, incomplete line back: that line is the one the error names.
            end = block.rfind(b"\n") + 1 if data or broken else len(block)
            if not block:
                if broken:
                    raise _truncated(path, number, broken)
                return
            if not end:  # no newline yet: one long line so far
                if len(block) > MAX_LINE_BYTES:
                    raise PSPInputError(too_long_message(path, number))
                if broken:
                    raise _truncated(path, number, broken)
                rest = block
                continue
            rest = block[end:]
            body = block[: end - 1 if block[end - 1 : end] == b"\n" else end]
            # Line count and longest line from the newlines' positions (numpy, not a bytes object per line).
            bounds = np.flatnonzero(np.frombuffer(body, dtype=np.uint8) == _NEWLINE)
            lengths = np.diff(bounds, prepend=-1, append=len(body)) - 1
            if lengths.max() > MAX_LINE_BYTES:  # the first line over the bound is the one named
                first_too_long = int(np.flatnonzero(lengths > MAX_LINE_BYTES)[0])
                raise PSPInputError(too_long_message(path, number + first_too_long))
            yield number, _decoded_lines(body)
            number += len(lengths)
            if broken:
                raise _truncated(path, number, broken)


def _truncated(path: str | os.PathLike, number: int, error: BaseException) -> TruncatedInputError:
    return TruncatedInputError(f"{path}:{number}: cannot read further: broken gzip data ({error})")


def _read_block(handle, size: int) -> tuple[bytes, BaseException | None]:
    """Up to `size` bytes of `handle`, and the error that broke the stream off (None when it did not).

    Read by `read1` calls, one decompressed chunk at a time: a single `read(size)` of a gzip stream that breaks
    inside the block would drop the whole block with the error, and the error would name the block's first line
    instead of the line where the data ends.
    """
    parts: list[bytes] = []
    total = 0
    try:
        while total < size:
            chunk = handle.read1(size - total)
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        return b"".join(parts), error
    return b"".join(parts), None


def _decoded_lines(body: bytes) -> list:
    """The lines of `body` (a block of whole lines without its last newline) as text with their line endings
    removed; a line that is not UTF-8 stays bytes."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        lines: list = []
        for raw in body.split(b"\n"):
            try:
                lines.append(raw.rstrip(b"\r").decode("utf-8"))
            except UnicodeDecodeError:
                lines.append(raw.rstrip(b"\r"))
        return lines
    lines = text.split("\n")
    return [line.rstrip("\r") for line in lines] if "\r" in text else lines
