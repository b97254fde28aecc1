"""Reading the files psp is given: sentence and pair files line by line with errors that name `FILE:LINE`, input
checks, and JSON objects."""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import os
import stat
import sys
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..errors import PSPInputError

STDIN = "-"


# Endings of the files psp reads and writes: a name ending so is a path, never a Hub repo id.
FILE_SUFFIXES = (".txt", ".tsv", ".tab", ".csv", ".jsonl", ".json", ".parquet", ".gz", ".npy", ".safetensors")


def cannot_be_hub_id(spec: str) -> bool:
    """True when `spec` (a name that is no local file or folder) cannot be a Hub repo id either, so it is a local
    path that does not exist: `./x`, `/x`, `~/x`, `a/b/c`, `data.tsv`, or anything the Hub's own check refuses."""
    if spec.startswith((".", "/", "~")) or spec.count("/") > 1 or (os.sep != "/" and os.sep in spec):
        return True
    if spec.lower().endswith(FILE_SUFFIXES):
        return True
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(spec)
    except HFValidationError:
        return True
    return False


def check_input(path: str | os.PathLike) -> None:
    """Refuse what cannot be read as a text file, saying what it is; `-` (stdin) and FIFOs are fine."""
    if os.fspath(path) == STDIN:
        return
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise PSPInputError(f"{path}: no such file") from None
    except OSError as error:
        raise PSPInputError(f"{path}: cannot read it ({error.strerror})") from None
    if stat.S_ISDIR(mode):
        raise PSPInputError(f"{path}: is a directory, expected a text file")
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
        raise PSPInputError(f"{path}: is not a regular file, a pipe or a terminal")
    if not os.access(path, os.R_OK):
        raise PSPInputError(f"{path}: cannot read it (permission denied)")


def open_binary(path: str | os.PathLike) -> IO[bytes]:
    """Open a file for reading bytes (gzip when it ends in .gz; `-` is stdin), after `check_input`."""
    check_input(path)
    if os.fspath(path) == STDIN:
        return contextlib.nullcontext(sys.stdin.buffer)  # stdin stays open for the caller
    if Path(path).suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def open_text(path: str | os.PathLike) -> IO[str]:
    """Open a UTF-8 text file (gzip when it ends in .gz; `-` is stdin) for reading."""
    check_input(path)
    if os.fspath(path) == STDIN:
        return contextlib.nullcontext(sys.stdin)
    if Path(path).suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


# The longest line psp reads (1 MiB): far beyond any sentence, and a bound on the memory one line can take.
MAX_LINE_BYTES = 1 << 20


class TruncatedInputError(PSPInputError):
    """A compressed file that breaks off (or turns to garbage) after some good lines: nothing after can be read."""


def iter_raw_lines(path: str | os.PathLike) -> Iterator[tuple[int, bytes]]:
    """Yield `(line_number, bytes)` with the line ending removed; line numbers start at 1. `-` reads stdin."""
    with open_binary(path) as handle:
        number = 0
        try:
            # Read at most MAX_LINE_BYTES + 1 bytes a line: one huge line (a 50 MB file without newlines) is refused
            # here instead of tokenized into gigabytes.
            lines = iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b"")
            for number, raw in enumerate(lines, start=1):  # noqa: B007 - number names the line of an error
                if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    raise PSPInputError(too_long_message(path, number))
                yield number, raw.rstrip(b"\r\n")
        except (EOFError, gzip.BadGzipFile, zlib.error) as error:
            raise TruncatedInputError(f"{path}:{number + 1}: cannot read further: broken gzip data ({error})") from None


def too_long_message(path: str | os.PathLike, number: int) -> str:
    """The error for line `number` of `path` when it is longer than `MAX_LINE_BYTES`."""
    return f"{path}:{number}: line longer than {MAX_LINE_BYTES:,} bytes; psp reads one sentence (or one pair) a line"


@dataclass
class ReadResult:
    """Rows read from a file, and the 1-based line numbers that were skipped as bad."""

    rows: list = field(default_factory=list)
    line_numbers: list[int] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)


def decode_line(path, number: int, raw: bytes) -> str:
    """`raw` as UTF-8; an error names `path:number` and the first bad byte."""
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
            text = decode_line(path, number, raw)
        except PSPInputError as error:
            if not skip_bad_lines:
                raise
            result.skipped.append((number, str(error)))
            continue
        result.rows.append(text)
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
        row = decode_line(path, number, raw).split("\t")
        if number == 1 and header is not False:
            if header is not True and row != list(header):
                raise PSPInputError(f"{path}:1: expected header {'<TAB>'.join(header)}, got {'<TAB>'.join(row)}")
            if header is not True and expected is None:
                expected = len(header)
            continue
        if expected is not None and len(row) != expected:
            raise PSPInputError(f"{path}:{number}: expected {expected} tab-separated fields, got {len(row)}")
        yield number, row


def iter_tsv_columns(
    path: str | os.PathLike, columns: Sequence[str], label: str = ""
) -> Iterator[tuple[int, list[str]]]:
    """Yield `(line_number, values of `columns`)` of a headed TSV whose first line names at least `columns` (in any
    order, other columns ignored); every row must have as many fields as the header. Errors name the file and line,
    after `label` (the flag that named the file, e.g. "--dev-bitext ")."""
    indices: list[int] | None = None
    width = 0
    for number, row in iter_tsv(path):
        if indices is None:
            if not all(column in row for column in columns):
                raise PSPInputError(f"{label}{path}:1: the header must name {' and '.join(columns)}, got {row}")
            indices, width = [row.index(column) for column in columns], len(row)
            continue
        if len(row) != width:
            raise PSPInputError(f"{label}{path}:{number}: {len(row)} column(s), expected {width}")
        yield number, [row[index] for index in indices]
    if indices is None:
        raise PSPInputError(f"{label}{path}:1: the header must name {' and '.join(columns)}, got an empty file")


def read_regular_file(path: str | os.PathLike) -> bytes:
    """The bytes of `path`, a regular file whose own name is no symlink: a FIFO would block the read forever and a
    planted link could lead out of the folder that holds it. Other errors are the `OSError` of the read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise PSPInputError(f"{path}: is a symlink; psp reads it only as a regular file") from None
        raise
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PSPInputError(f"{path}: is not a regular file")
        return handle.read()


def read_json(path: str | os.PathLike, kind: type = dict, what: str | None = None) -> Any:
    """The JSON value of `path`, which must be a `kind` (dict: an object; list: an array), for JSON files a user hands
    psp (model configs, shard manifests, `psp push`'s reports): a bad one ends in a one-line error naming the file
    (`what`, e.g. the option that named it, goes first) and the line of a syntax error."""
    label = f"{what} {path}" if what else f"{path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PSPInputError(f"{label}: no such file") from None
    except UnicodeDecodeError as error:
        raise PSPInputError(f"{label}: not valid JSON (not UTF-8 at byte {error.start})") from None
    except OSError as error:
        raise PSPInputError(f"{label}: cannot read it ({error.strerror})") from None
    try:
        value = json.loads(text)
    except ValueError as error:  # json.JSONDecodeError, with the line
        line = f":{error.lineno}" if isinstance(error, json.JSONDecodeError) else ""
        raise PSPInputError(f"{label}{line}: not valid JSON ({getattr(error, 'msg', error)})") from None
    if not isinstance(value, kind):
        expected = {dict: "a JSON object", list: "a JSON array"}.get(kind, kind.__name__)
        raise PSPInputError(f"{label}: expected {expected}, found a {type(value).__name__}")
    return value
