"""Reading sentence-pair files for `psp prepare`: TSV (optionally gzipped) in the layouts the recipes meet.

Every file is tab-separated with no quoting. Supported out of the box:

* ParaNMT: `sentence1 <TAB> sentence2 [<TAB> score]`, no header;
* a headed TSV whose header names the columns (`sentence1`, `sentence2`, `score`), e.g. the Flickr30k
  caption pairs `image_idx sentence1 sentence2`;
* bitext with a header naming the language columns: Multi30k `de en`, WMT news `testset de en`;
* bitext without a header: `<xx sentence> <TAB> <English sentence>`.

The header is detected when its fields include the expected column names (`--header auto`), or forced on
or off. `columns` (and `score_column`) pick fields by 1-based number or by header name.

Lines come from `psp_hf.io.reading.iter_raw_lines` and are decoded as `psp_hf.io.reading` decodes them, so errors
read the same as `psp embed`'s. Bad lines, i.e. bytes that are not UTF-8, a field count different from the header's
(or, without a header, the first line's), or a score that is not a number, raise `PSPInputError` naming
file:line, or with `skip_bad_lines` are counted in `BadLines` and skipped. A gzip file that ends early (or is
corrupt) is bad from the line where reading stopped: an error, or with `skip_bad_lines` one bad line counted
and the end of that file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PSPInputError
from ..io.reading import TruncatedInputError, decode_line, iter_raw_lines

Column = int | str  # 0-based index, or a header name


@dataclass
class BadLines:
    """Lines skipped as bad, over all inputs: a count and the first few `file:line: reason` messages."""

    count: int = 0
    examples: list[str] = field(default_factory=list)
    keep: int = 20

    def add(self, message: str) -> None:
        """Record one skipped line."""
        self.count += 1
        if len(self.examples) < self.keep:
            self.examples.append(message)


@dataclass
class InputStats:
    """Per-file counts for the report."""

    path: str
    header: list[str] | None = None
    columns: list[str] = field(default_factory=list)
    pairs: int = 0
    bad_lines: int = 0


def parse_column(value: str) -> Column:
    """A `--columns` item: a 1-based number becomes a 0-based index; anything else is a header name."""
    value = value.strip()
    if value.isdigit():
        if int(value) < 1:
            raise PSPInputError(f"column numbers start at 1; got {value!r}")
        return int(value) - 1
    if not value:
        raise PSPInputError("empty column name")
    return value


@dataclass
class PairLayout:
    """Which columns hold the pair (and the score) in files of one kind."""

    first: Column
    second: Column
    score: Column | None = None
    # Header detection in `auto` mode: the first line is a header if its fields include all of these.
    header_names: tuple[str, ...] = ()
    # With a header but no explicit score column: use a column of this name when present.
    optional_score_name: str | None = None
    # Default layouts read headerless files positionally: the pair is columns 1 and 2.
    positional_fallback: bool = False


def paraphrase_layout(columns: Sequence[Column] | None = None, score_column: Column | None = None) -> PairLayout:
    """ParaNMT-style pairs: named `sentence1`/`sentence2`/`score` with a header, else columns 1, 2 (and 3)."""
    if columns is not None:
        return PairLayout(columns[0], columns[1], score_column, header_names=_names(columns, score_column))
    return PairLayout(
        "sentence1",
        "sentence2",
        score_column,
        header_names=("sentence1", "sentence2"),
        optional_score_name="score",
        positional_fallback=True,
    )


def bitext_layout(language: str, columns: Sequence[Column] | None = None) -> PairLayout:
    """Bitext: the `<language>` and `en` columns with a header, else columns 1 (language) and 2 (English)."""
    if columns is not None:
        return PairLayout(columns[0], columns[1], header_names=_names(columns, None))
    return PairLayout(language, "en", header_names=(language, "en"), positional_fallback=True)


def _names(columns: Sequence[Column], score: Column | None) -> tuple[str, ...]:
    return tuple(c for c in (*columns, score) if isinstance(c, str))


def _resolve(path: Path, column: Column, header: list[str] | None, width: int) -> int:
    if isinstance(column, int):
        if column >= width:
            raise PSPInputError(f"{path}: column {column + 1} asked for, but lines have {width} columns")
        return column
    if header is None:
        raise PSPInputError(f"{path}: column {column!r} asked for by name, but the file has no header")
    if column not in header:
        raise PSPInputError(f"{path}:1: header {header} has no column {column!r}")
    return header.index(column)


class PairReader:
    """Streams `(first, second, score_or_None)` from one file, checking every line."""

    def __init__(
        self,
        path: str | os.PathLike,
        layout: PairLayout,
        header: str = "auto",
        skip_bad_lines: bool = False,
        bad_lines: BadLines | None = None,
    ):
        if header not in ("auto", "yes", "no"):
            raise ValueError(f"header must be 'auto', 'yes' or 'no'; got {header!r}")
        self.path = Path(path)
        self.layout = layout
        self.header_mode = header
        self.skip_bad_lines = skip_bad_lines
        self.bad_lines = bad_lines if bad_lines is not None else BadLines()
        self.stats = InputStats(path=str(self.path))
        self._lines = self._checked_lines()
        self._pending: tuple[int, str] | None = None
        self._open()

    def _checked_lines(self) -> Iterator[tuple[int, bytes]]:
        """`iter_raw_lines`, with a truncated or corrupt gzip stream reported at the line where it broke."""
        try:
            yield from iter_raw_lines(self.path)
        except TruncatedInputError as error:
            # Nothing after it can be read: an error, or with skip_bad_lines one bad line and the end of this file.
            self._bad(str(error))

    def _bad(self, message: str) -> None:
        if not self.skip_bad_lines:
            raise PSPInputError(message)
        self.bad_lines.add(message)
        self.stats.bad_lines += 1

    def _first_decodable_line(self) -> tuple[int, str] | None:
        for number, raw in self._lines:
            try:
                # A UTF-8 byte-order mark would otherwise hide a header's first column name.
                return number, decode_line(self.path, number, raw).removeprefix("\ufeff")
            except PSPInputError as error:
                self._bad(str(error))
        return None

    def _open(self) -> None:
        first = self._first_decodable_line()
        if first is None:
            # An empty file has no pairs; nothing to resolve.
            self.width, self.indexes, self.score_index = 0, (0, 1), None
            return
        number, text = first
        fields = text.split("\t")
        layout = self.layout
        if self.header_mode == "yes":
            is_header = True
        elif self.header_mode == "no":
            is_header = False
        else:
            is_header = bool(layout.header_names) and set(layout.header_names) <= set(fields)
        header = fields if is_header else None
        self.width = len(fields)
        if not is_header:
            self._pending = (number, text)
        self.stats.header = header
        first_col, second_col = layout.first, layout.second
        if header is None and layout.positional_fallback:
            first_col, second_col = 0, 1
        elif header is None and any(isinstance(c, str) for c in (first_col, second_col, layout.score)):
            expected = ", ".join(repr(n) for n in layout.header_names)
            raise PSPInputError(
                f"{self.path}:{number}: expected a header naming the columns {expected}; got {fields[:4]} "
                "(pass column numbers for files without a header)"
            )
        self.indexes = (
            _resolve(self.path, first_col, header, self.width),
            _resolve(self.path, second_col, header, self.width),
        )
        score = layout.score
        if score is None and header is not None and layout.optional_score_name in header:
            score = layout.optional_score_name
        if score is None and header is None and layout.optional_score_name and self.width == 3:
            score = 2  # ParaNMT: sentence1, sentence2, score
        self.score_index = None if score is None else _resolve(self.path, score, header, self.width)
        names = header or [str(i + 1) for i in range(self.width)]
        self.stats.columns = [names[i] for i in self.indexes]
        if self.score_index is not None:
            self.stats.columns.append(names[self.score_index])

    def close(self) -> None:
        """Close the file (iteration ends early)."""
        self._lines.close()

    @property
    def has_score(self) -> bool:
        """Whether this file has a score column."""
        return self.score_index is not None

    def _decoded_lines(self) -> Iterator[tuple[int, str]]:
        if self._pending is not None:
            yield self._pending
            self._pending = None
        for number, raw in self._lines:
            try:
                yield number, decode_line(self.path, number, raw)
            except PSPInputError as error:
                self._bad(str(error))

    def __iter__(self) -> Iterator[tuple[str, str, float | None]]:
        width = self.width
        i, j = self.indexes
        k = self.score_index
        path = self.path
        for number, text in self._decoded_lines():
            fields = text.split("\t")
            if len(fields) != width:
                self._bad(f"{path}:{number}: expected {width} tab-separated columns, got {len(fields)}")
                continue
            score = None
            if k is not None:
                try:
                    score = float(fields[k])
                except ValueError:
                    self._bad(f"{path}:{number}: score {fields[k]!r} is not a number")
                    continue
            self.stats.pairs += 1
            yield fields[i], fields[j], score
