"""Training pairs streamed through `datasets`: TSV/JSONL/parquet files, a datasets folder or a Hub dataset id.

Nothing is loaded into memory as a whole: `load_dataset(..., streaming=True)` reads files in chunks, the
shuffle buffer holds a fixed number of pairs, and mini-batches are cut from the stream as they arrive. The
position in the stream is the number of raw rows this process consumed in the current epoch; with the
dataset's seeded shuffle (seed + epoch) that is enough to continue exactly where a checkpoint left off.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ...errors import PSPInputError
from ...io.reading import decode_line, iter_raw_lines

logger = logging.getLogger(__name__)

# Column pairs recognised without --columns, in order of preference.
KNOWN_COLUMN_PAIRS = [
    ("sentence1", "sentence2"),
    ("src", "tgt"),
    ("source", "target"),
    ("text1", "text2"),
    ("anchor", "positive"),
    ("query", "positive"),
    ("sentence_A", "sentence_B"),
]
TSV_SUFFIXES = (".tsv", ".tsv.gz", ".tab", ".tab.gz")
JSON_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz")
PARQUET_SUFFIXES = (".parquet",)


@dataclass
class MiniBatchText:
    """Texts of one mini-batch of pairs and the stream position just after its last row."""

    first: list[str]
    second: list[str]
    position: int

    def __len__(self) -> int:
        return len(self.first)


def _suffix_kind(path: Path) -> str | None:
    name = path.name.lower()
    for kind, suffixes in (("csv", TSV_SUFFIXES), ("json", JSON_SUFFIXES), ("parquet", PARQUET_SUFFIXES)):
        if name.endswith(suffixes):
            return kind
    return None


def _local_files(entries: list[str]) -> list[Path] | None:
    """The files named by `entries` (paths or globs), or None when `entries` is a Hub dataset id."""
    files: list[Path] = []
    for entry in entries:
        matches = sorted(glob.glob(entry)) if any(ch in entry for ch in "*?[") else [entry]
        if not matches:
            raise PSPInputError(f"--data {entry}: no file matches")
        for match in matches:
            path = Path(match)
            if path.is_dir():
                raise PSPInputError(f"--data {path}: a folder must be the only --data entry (a datasets folder)")
            files.append(path)  # a file, or perhaps a Hub id: decided below
    existing = [path for path in files if path.is_file()]
    if not existing:
        if len(entries) == 1 and not entries[0].startswith((".", "/", "~")) and not _suffix_kind(Path(entries[0])):
            return None
        raise PSPInputError(f"--data {entries[0]}: no such file")
    missing = [path for path in files if not path.is_file()]
    if missing:
        raise PSPInputError(f"--data {missing[0]}: no such file")
    return files


MAX_REPORTED_BAD_LINES = 10
BAD_LINE = "_bad_line"  # column of a local TSV row that was malformed: its error message (else None)


def pair_key(first: str, second: str) -> int:
    """A stable hash of a pair's text (which pairs are held back must not depend on the process or the run)."""
    return zlib.crc32(f"{first}\t{second}".encode())


def _tsv_header(path: Path) -> list[str]:
    try:
        first = next(iter_raw_lines(path), None)
    except (OSError, EOFError, zlib.error) as error:
        raise PSPInputError(f"{path}: cannot read: {error}") from None
    if first is None or not first[1].strip():
        raise PSPInputError(f"{path}:1: empty file or missing header line (TSV files need a header)")
    return decode_line(path, 1, first[1]).split("\t")


def tsv_rows(files: list[str], header: tuple[str, ...], skip_bad_lines: bool) -> Iterator[dict[str, str | None]]:
    """Rows of headed TSV files through `psp_hf.io.reading`'s line reader: every row has the header's fields.

    A malformed line (wrong field count, invalid UTF-8) stops with `FILE:LINE`; with `skip_bad_lines` it
    becomes a row whose `_bad_line` holds the message (the stream counts and reports it). A truncated or
    corrupt .gz file names the last good line.
    """
    width = len(header)
    for name in files:
        path = Path(name)
        lines = iter_raw_lines(path)
        last = 0
        while True:
            try:
                number, raw = next(lines)
            except StopIteration:
                break
            except (OSError, EOFError, zlib.error, PSPInputError) as error:
                if isinstance(error, PSPInputError) and last == 0:
                    raise  # not a readable file at all
                message = f"{path}: truncated or corrupt after line {last} ({error})"
                if not skip_bad_lines:
                    raise PSPInputError(message) from None
                yield {**dict.fromkeys(header), BAD_LINE: message + "; the rest of the file is skipped"}
                break
            last = number
            if number == 1:
                continue
            try:
                fields = decode_line(path, number, raw).split("\t")
                if len(fields) != width:
                    raise PSPInputError(
                        f"{path}:{number}: expected {width} tab-separated fields (as in the header), got {len(fields)}"
                    )
            except PSPInputError as error:
                if not skip_bad_lines:
                    raise
                yield {**dict.fromkeys(header), BAD_LINE: str(error)}
                continue
            yield {**dict(zip(header, fields, strict=True)), BAD_LINE: None}


def tsv_tables(files: list[str], header: tuple[str, ...], skip_bad_lines: bool, rows_per_table: int = 1024):
    """`tsv_rows` in Arrow tables of `rows_per_table` rows, keyed for `datasets` (one shard per file)."""
    import pyarrow as pa

    names = [*header, BAD_LINE]
    columns: dict[str, list] = {name: [] for name in names}
    count = 0
    for row in tsv_rows(files, header, skip_bad_lines):
        for name in names:
            columns[name].append(row[name])
        count += 1
        if count % rows_per_table == 0:
            yield f"{files[0]}:{count}", pa.table(columns, schema=_schema(names))
            columns = {name: [] for name in names}
    if columns[BAD_LINE]:
        yield f"{files[0]}:{count}", pa.table(columns, schema=_schema(names))


def _schema(names: list[str]):
    import pyarrow as pa

    return pa.schema([(name, pa.string()) for name in names])


def _tsv_dataset(files: list[str], header: list[str], skip_bad_lines: bool):
    """A streaming `datasets.IterableDataset` over headed TSV files, one shard per file."""
    from datasets import DatasetInfo, Features, IterableDataset, Value
    from datasets.iterable_dataset import ArrowExamplesIterable

    features = Features({**{name: Value("string") for name in header}, BAD_LINE: Value("string")})
    kwargs = {"files": files, "header": tuple(header), "skip_bad_lines": skip_bad_lines}
    return IterableDataset(ArrowExamplesIterable(tsv_tables, kwargs), info=DatasetInfo(features=features))


@contextlib.contextmanager
def reading_errors(description: str, files: list[Path] | None = None) -> Iterator[None]:
    """Errors of `datasets` / pyarrow / pandas while streaming the data become one `PSPInputError` naming it.

    `datasets` also logs a failed file at ERROR level before raising; that would be a second message (with a
    traceback when logging's stream is gone), so its logger is held at CRITICAL while the data streams.
    """
    logger = logging.getLogger("datasets")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    except PSPInputError:
        raise
    except Exception as error:  # noqa: BLE001 - parse errors of many libraries
        located = _first_bad_json_line(files or [])  # the JSON readers' errors name no line: find it
        if located:
            raise PSPInputError(located) from None
        reason = (str(error).splitlines() or [""])[0]
        if "BatchSize must be greater than 0" in reason:  # pyarrow's answer to a parquet file with no rows
            reason = "a table with no rows"
        raise PSPInputError(f"--data {description}: reading failed: {reason}") from None
    finally:
        logger.setLevel(level)


def _first_bad_json_line(files: list[Path]) -> str | None:
    """`FILE:LINE: not a JSON object (...)` for the first line of a JSON Lines file that does not parse."""
    import json

    for path in files:
        if not path.name.lower().endswith((".jsonl", ".jsonl.gz", ".json", ".json.gz")):
            continue
        for number, raw in iter_raw_lines(path):
            if not raw.strip():
                continue
            text = decode_line(path, number, raw)
            try:
                value = json.loads(text)
            except ValueError as error:
                return f"{path}:{number}: not valid JSON ({error})"
            if not isinstance(value, dict):
                return f"{path}:{number}: expected a JSON object, got {type(value).__name__}"
    return None


class PairSource:
    """Where training pairs come from, with the two text columns resolved.

    `dataset` is an unshuffled `datasets.IterableDataset`; `first_column` / `second_column` are the text
    columns (for bitext: the non-English side first). Passing `dataset=` (a `datasets` object or a list of
    pairs) uses it instead of opening `data`, which is then only the description.
    """

    def __init__(
        self,
        data: list[str],
        columns: list[str] | None = None,
        lang: str | None = None,
        split: str = "train",
        data_config: str | None = None,
        skip_bad_lines: bool = False,
        dataset=None,
    ):
        self.description = " ".join(data)
        self.files = None
        if dataset is not None:  # a datasets object or a list of pairs (the Python API's data=)
            from .objects import iterable_from_object

            dataset = iterable_from_object(dataset, split)
        else:
            dataset = self._open(data, split, data_config, skip_bad_lines)
        self._resolve_columns(dataset, columns, lang)

    def _open(self, data: list[str], split: str, data_config: str | None, skip_bad_lines: bool):
        """The unshuffled `IterableDataset` of files, a datasets folder or a Hub dataset id."""
        from datasets import load_dataset

        # One folder (e.g. what `psp prepare` writes) or a Hub id is opened by `datasets` itself.
        folder = len(data) == 1 and Path(data[0]).is_dir()
        files = self.files = None if folder else _local_files(data)
        if files is None:
            try:
                dataset = load_dataset(data[0], name=data_config, split=split, streaming=True)
            except Exception as error:
                kind = "a datasets folder" if folder else "a Hub dataset"
                raise PSPInputError(f"--data {data[0]}: cannot open as {kind}: {error}") from None
        else:
            kinds = {_suffix_kind(path) for path in files}
            if None in kinds:
                bad = next(path for path in files if _suffix_kind(path) is None)
                raise PSPInputError(f"{bad}: unknown file type; use .tsv, .jsonl or .parquet (optionally .gz)")
            if len(kinds) > 1:
                raise PSPInputError(f"--data mixes file types ({', '.join(sorted(kinds))}); use one type per run")
            kind = kinds.pop()
            data_files = [os.fspath(path) for path in files]
            if kind == "csv":
                header = _tsv_header(files[0])
                for path in files[1:]:
                    if _tsv_header(path) != header:
                        raise PSPInputError(f"{path}:1: header differs from {files[0]}'s ({' '.join(header)})")
                # Read by psp_hf.io.reading's line reader (no quoting, every field a string), streamed in Arrow tables:
                # errors name FILE:LINE like psp embed/score, and --skip-bad-lines counts instead of stopping.
                dataset = _tsv_dataset(data_files, header, skip_bad_lines)
            else:
                with reading_errors(self.description, files):
                    dataset = load_dataset(kind, data_files=data_files, split="train", streaming=True)
        return dataset

    def _resolve_columns(self, dataset, columns: list[str] | None, lang: str | None) -> None:
        translation_langs: tuple[str, str] | None = None
        all_columns = self._column_names(dataset)
        self.marks_bad_lines = BAD_LINE in all_columns
        column_names = [name for name in all_columns if name != BAD_LINE]
        if columns:
            missing = [name for name in columns if name not in column_names]
            if missing:
                raise PSPInputError(
                    f"--columns: {', '.join(missing)} not in {self.description} (columns: {', '.join(column_names)})"
                )
            first, second = columns
        elif "translation" in column_names and lang:
            first, second = "translation", "translation"
            translation_langs = (lang, "en")
        else:
            first, second = self._detect_columns(column_names, lang)
        self.first_column, self.second_column = first, second
        self.translation_langs = translation_langs
        keep = sorted({first, second} | ({BAD_LINE} if self.marks_bad_lines else set()))
        self.dataset = dataset.select_columns(keep)

    def _column_names(self, dataset) -> list[str]:
        if dataset.features is not None:
            return list(dataset.features)
        with reading_errors(self.description, self.files):
            example = next(iter(dataset), None)
        if example is None:
            raise PSPInputError(f"--data {self.description}: no rows")
        return list(example)

    def _detect_columns(self, names: list[str], lang: str | None) -> tuple[str, str]:
        if lang and lang in names and "en" in names and lang != "en":
            return lang, "en"
        for first, second in KNOWN_COLUMN_PAIRS:
            if first in names and second in names:
                return first, second
        if len(names) == 2:
            return names[0], names[1]
        raise PSPInputError(
            f"--data {self.description}: cannot tell which two columns hold the sentences "
            f"(columns: {', '.join(names)}); pass --columns A,B"
        )

    def texts(self, limit: int) -> Iterator[str]:
        """Up to `limit` sentences from both columns, in file order (for training a tokenizer)."""
        produced = 0
        with reading_errors(self.description, self.files):
            for chunk in self.dataset.iter(batch_size=1024):
                for first, second in zip(*self.columns(chunk), strict=True):
                    for text in (first, second):
                        if isinstance(text, str) and text.strip():
                            yield text
                            produced += 1
                            if produced >= limit:
                                return

    def columns(self, chunk: dict) -> tuple[list, list]:
        if self.translation_langs is not None:
            source, target = self.translation_langs
            rows = chunk["translation"]
            return [row.get(source) for row in rows], [row.get(target) for row in rows]
        return chunk[self.first_column], chunk[self.second_column]


class PairStream:
    """Mini-batches of pairs from a `PairSource`, shuffled per epoch and split across processes."""

    def __init__(
        self,
        source: PairSource,
        batch_size: int,
        shuffle_buffer: int = 50_000,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        read_size: int = 1024,
        exclude: set[int] | None = None,
    ):
        from datasets.distributed import split_dataset_by_node

        self.source = source
        self.batch_size = batch_size
        self.read_size = read_size
        dataset = source.dataset
        if shuffle_buffer > 0:
            # The same seed on every process: they must agree on the order before taking their share.
            dataset = dataset.shuffle(seed=seed, buffer_size=shuffle_buffer)
        if world_size > 1:
            dataset = split_dataset_by_node(dataset, rank=rank, world_size=world_size)
        self.dataset = dataset
        self.world_size = world_size
        self.skipped_rows = 0
        self.bad_lines = 0  # malformed lines skipped under --skip-bad-lines (this process's share)
        self.report_bad_lines = rank == 0
        # Pairs held back as the dev set (`pair_key` of each): skipped, still counted as read.
        self.exclude = exclude or set()

    def _bad_line(self, message: str) -> None:
        self.bad_lines += 1
        if self.report_bad_lines and self.bad_lines <= MAX_REPORTED_BAD_LINES:
            logger.warning("psp train: skipped bad line: %s", message)
            if self.bad_lines == MAX_REPORTED_BAD_LINES:
                logger.warning("psp train: (further bad lines are counted, not shown)")

    def minibatches(self, epoch: int, skip: int = 0) -> Iterator[MiniBatchText]:
        """Mini-batches of `batch_size` valid pairs (the last one may be smaller) after `skip` raw rows.

        A row whose text is missing or blank on either side is skipped (it still counts for the position).
        """
        self.dataset.set_epoch(epoch)
        first: list[str] = []
        second: list[str] = []
        row = 0  # raw rows consumed so far in this epoch
        pairs = 0  # valid pairs met in this epoch
        with reading_errors(self.source.description, self.source.files):
            for chunk in self.dataset.iter(batch_size=self.read_size):
                left, right = self.source.columns(chunk)
                bad = chunk.get(BAD_LINE) or [None] * len(left)
                n = len(left)
                start = 0
                if row < skip:
                    start = min(n, skip - row)
                for index in range(start, n):
                    a, b = left[index], right[index]
                    if bad[index] is not None:
                        self._bad_line(bad[index])
                        continue
                    if not (isinstance(a, str) and isinstance(b, str) and a.strip() and b.strip()):
                        self.skipped_rows += 1
                        continue
                    if self.exclude and pair_key(a, b) in self.exclude:
                        continue
                    first.append(a)
                    second.append(b)
                    pairs += 1
                    if len(first) == self.batch_size:
                        yield MiniBatchText(first, second, row + index + 1)
                        first, second = [], []
                row += n
        if first:
            yield MiniBatchText(first, second, row)
        if pairs == 0 and skip == 0 and self.world_size == 1:
            # A header-only file (or all rows blank or bad) would otherwise train 0 steps and exit as a success.
            raise PSPInputError(
                f"--data {self.source.description}: no training pairs ({row} row(s) read, none with two sentences)"
            )
