"""Streaming the sentences of a dataset: local text/TSV/JSONL/parquet files, a folder of them, or a Hub dataset id.

Every source yields its sentences one by one and never holds the whole input, so memory does not grow with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import PSPInputError

_KINDS = {".txt": "text", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet"}


@dataclass(frozen=True)
class Part:
    """One file of a local input (or the whole Hub dataset), with how to read it."""

    name: str
    kind: str


def file_kind(path: Path) -> str:
    """How a local file is read, from its name: text (default), tsv, jsonl or parquet; `.gz` is looked through."""
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    return _KINDS.get(suffixes[-1], "text") if suffixes else "text"


def _known_suffix(path: Path) -> bool:
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    return bool(suffixes) and suffixes[-1] in _KINDS


def list_parts(spec: str) -> list[Part]:
    """The files of a local file or folder (sorted, recursive), or the Hub dataset `spec` when no such path exists."""
    path = Path(spec)
    if path.is_file() or spec == "-":
        return [Part(spec, file_kind(path))]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".") and _known_suffix(p))
        if not files:
            raise PSPInputError(f"{spec}: no .txt/.tsv/.jsonl/.parquet files (or .gz) in this folder")
        return [Part(str(p), file_kind(p)) for p in files]
    # A Hub id is "name" or "owner/name"; anything else that does not exist is a mistyped path.
    from ..io.reading import cannot_be_hub_id

    if cannot_be_hub_id(spec):
        raise PSPInputError(f"{spec}: no such file or folder")
    return [Part(spec, "hub")]


def iter_part(part: Part, column: str | None, data_config: str | None = None, split: str = "train") -> Iterator[str]:
    """The sentences of one part, in order. `column` names the text field (not used for plain text files)."""
    if part.kind == "text":
        from ..io.reading import decode_line, iter_raw_lines

        for number, raw in iter_raw_lines(part.name):
            yield decode_line(part.name, number, raw)
        return
    if column is None:
        if part.kind == "hub":  # most often a mistyped local name: say that first
            raise PSPInputError(
                f"{part.name}: no such file or folder (as a Hub dataset id it would need --column NAME, the field "
                "holding the sentences)"
            )
        raise PSPInputError(f"{part.name}: give --column NAME, the field holding the sentences")
    if part.kind == "tsv":
        yield from _iter_tsv(part.name, column)
    elif part.kind == "jsonl":
        yield from _iter_jsonl(part.name, column)
    elif part.kind == "parquet":
        yield from _iter_parquet(part.name, column)
    else:
        yield from _iter_hub(part.name, column, data_config, split)


def _checked(name: str, row: int, column: str, value) -> str:
    if not isinstance(value, str):
        raise PSPInputError(f"{name}: row {row}: column {column!r} holds {type(value).__name__}, not text")
    return value


def _iter_tsv(path: str, column: str) -> Iterator[str]:
    from ..io.reading import iter_tsv, open_text

    with open_text(path) as handle:
        header = handle.readline().rstrip("\r\n").split("\t")
    if column not in header:
        raise PSPInputError(f"{path}:1: no column {column!r} in the header ({', '.join(header)})")
    index = header.index(column)
    for _, fields in iter_tsv(path, header=header):
        yield fields[index]


def _iter_jsonl(path: str, column: str) -> Iterator[str]:
    from ..io.reading import decode_line, iter_raw_lines

    for number, raw in iter_raw_lines(path):
        try:
            record = json.loads(decode_line(path, number, raw))
        except json.JSONDecodeError as error:
            raise PSPInputError(f"{path}:{number}: not JSON ({error.msg})") from None
        if not isinstance(record, dict) or column not in record:
            raise PSPInputError(f"{path}:{number}: no field {column!r}")
        yield _checked(f"{path}:{number}", number, column, record[column])


def _iter_parquet(path: str, column: str) -> Iterator[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = 0
    try:
        handle = pq.ParquetFile(path)
        if column not in handle.schema_arrow.names:
            raise PSPInputError(f"{path}: no column {column!r} (columns: {', '.join(handle.schema_arrow.names)})")
        for batch in handle.iter_batches(batch_size=65536, columns=[column]):
            for value in batch.column(0).to_pylist():
                yield _checked(path, row, column, value)
                row += 1
    except (OSError, pa.ArrowException) as error:  # a truncated or garbled file: the footer or a page is unreadable
        reason = " ".join(str(error).split())  # Arrow's messages may end in a newline
        raise PSPInputError(f"{path}: not a readable parquet file after {row:,} rows ({reason})") from None


def _iter_hub(dataset_id: str, column: str, data_config: str | None, split: str) -> Iterator[str]:
    try:
        from datasets import load_dataset
    except ImportError as error:
        raise ImportError(f"reading a Hub dataset needs datasets ({error}): pip install 'psp-hf[train]'") from error
    stream = load_dataset(dataset_id, name=data_config, split=split, streaming=True)
    for row, record in enumerate(stream):
        if column not in record:
            raise PSPInputError(f"{dataset_id}: no column {column!r} (columns: {', '.join(record)})")
        value = record[column]
        # The CSV/TSV reader of `datasets` turns an empty cell into None; a local TSV gives "" for the same row.
        yield "" if value is None else _checked(dataset_id, row, column, value)
