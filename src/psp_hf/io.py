"""Reading sentence and pair files with errors that name file:line, and atomic writes."""

from __future__ import annotations

import contextlib
import gzip
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from .errors import PSPInputError


def open_text(path: str | os.PathLike) -> IO[str]:
    """Open a UTF-8 text file (gzip when it ends in .gz) for reading."""
    path = Path(path)
    if not path.is_file():
        raise PSPInputError(f"{path}: no such file")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def iter_raw_lines(path: str | os.PathLike) -> Iterator[tuple[int, bytes]]:
    """Yield `(line_number, bytes)` with the line ending removed; line numbers start at 1."""
    path = Path(path)
    if not path.is_file():
        raise PSPInputError(f"{path}: no such file")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            yield number, raw.rstrip(b"\r\n")


@dataclass
class ReadResult:
    """Rows read from a file, and the 1-based line numbers that were skipped as bad."""

    rows: list = field(default_factory=list)
    line_numbers: list[int] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)

    def skipped_summary(self, path: str | os.PathLike, limit: int = 10) -> str:
        shown = ", ".join(str(number) for number, _ in self.skipped[:limit])
        more = " …" if len(self.skipped) > limit else ""
        return f"{path}: skipped {len(self.skipped)} bad line(s): {shown}{more}"


def _decode(path, number: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PSPInputError(
            f"{path}:{number}: not valid UTF-8 (byte {error.start}: {raw[error.start : error.start + 1]!r})"
        ) from None


def read_sentences(path: str | os.PathLike, skip_bad_lines: bool = False) -> ReadResult:
    """One sentence a line. Every line is a sentence (empty ones too), so row i is line i + 1."""
    result = ReadResult()
    for number, raw in iter_raw_lines(path):
        try:
            text = _decode(path, number, raw)
        except PSPInputError as error:
            if not skip_bad_lines:
                raise
            result.skipped.append((number, str(error)))
            continue
        result.rows.append(text)
        result.line_numbers.append(number)
    return result


def read_pairs(
    path: str | os.PathLike,
    columns: tuple[int, int] | None = None,
    header: bool = False,
    skip_bad_lines: bool = False,
) -> ReadResult:
    """Tab-separated sentence pairs. Without `columns`, each line must have exactly two fields.

    `columns` are 0-based field indexes to take (then lines need at least that many fields).
    """
    result = ReadResult()
    for number, raw in iter_raw_lines(path):
        if header and number == 1:
            continue
        try:
            fields = _decode(path, number, raw).split("\t")
            if columns is None:
                if len(fields) != 2:
                    raise PSPInputError(f"{path}:{number}: expected 2 tab-separated columns, got {len(fields)}")
                pair = (fields[0], fields[1])
            else:
                if len(fields) <= max(columns):
                    raise PSPInputError(
                        f"{path}:{number}: expected at least {max(columns) + 1} tab-separated columns, "
                        f"got {len(fields)}"
                    )
                pair = (fields[columns[0]], fields[columns[1]])
        except PSPInputError as error:
            if not skip_bad_lines:
                raise
            result.skipped.append((number, str(error)))
            continue
        result.rows.append(pair)
        result.line_numbers.append(number)
    return result


def iter_tsv(
    path: str | os.PathLike,
    header: Sequence[str] | bool = False,
    fields: int | None = None,
) -> Iterator[tuple[int, list[str]]]:
    """Yield `(line_number, fields)` of a tab-separated file (gzip when it ends in .gz), no quoting.

    `header=True` skips the first line; a list of names requires the first line to be exactly those names
    (then every row must have that many fields). `fields` requires that many fields in every row. Errors
    name the file and line.
    """
    expected = fields
    for number, raw in iter_raw_lines(path):
        row = _decode(path, number, raw).split("\t")
        if number == 1 and header is not False:
            if header is not True and row != list(header):
                raise PSPInputError(f"{path}:1: expected header {'<TAB>'.join(header)}, got {'<TAB>'.join(row)}")
            if header is not True and expected is None:
                expected = len(header)
            continue
        if expected is not None and len(row) != expected:
            raise PSPInputError(f"{path}:{number}: expected {expected} tab-separated fields, got {len(row)}")
        yield number, row


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; it replaces `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def open_npy_for_writing(path: Path, shape: tuple[int, ...]) -> np.memmap:
    """A float32 `.npy` memmap, so outputs larger than RAM stream to disk."""
    return np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=shape)
