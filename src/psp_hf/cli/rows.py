"""Input lines read in batches for `psp embed` and `psp score`: a bad line stops the run or is skipped and counted."""

from __future__ import annotations

import argparse
import sys

from ..errors import PSPInputError


class Skipped:
    """Bad lines skipped so far: a count and the first few line numbers (memory stays small)."""

    SHOWN = 10

    def __init__(self) -> None:
        self.count = 0
        self.first: list[int] = []

    def add(self, number: int) -> None:
        """Count line `number` as skipped."""
        self.count += 1
        if len(self.first) < self.SHOWN:
            self.first.append(number)

    def summary(self, path: str) -> str:
        """One line for stderr: how many lines of `path` were skipped, and the first few."""
        more = " …" if self.count > len(self.first) else ""
        return f"{path}: skipped {self.count} bad line(s): {', '.join(map(str, self.first))}{more}"


def batches(rows, batch_size: int, skip_bad_lines: bool, skipped: Skipped):
    """Group `(line_number, parse)` into lists of batch_size parsed rows; a bad row is None when skipped."""
    batch = []
    for number, parse in rows:
        try:
            batch.append(parse())
        except PSPInputError:
            if not skip_bad_lines:
                raise
            skipped.add(number)
            batch.append(None)
        if len(batch) == batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def sentence_batches(path: str, batch_size: int, skip_bad_lines: bool, skipped: Skipped):
    """Lists of batch_size sentences of `path`, one a line (the last list may be shorter); a line that is not
    UTF-8 stops the run, or is None in its list and counted in `skipped`."""
    from ..io import decode_line, iter_line_blocks

    batch: list = []
    for first, lines in iter_line_blocks(path):
        for offset, line in enumerate(lines) if any(type(line) is bytes for line in lines) else ():
            if type(line) is bytes:
                if not skip_bad_lines:
                    decode_line(path, first + offset, line)  # raises, naming the line and the byte
                skipped.add(first + offset)
                lines[offset] = None
        batch.extend(lines)
        while len(batch) >= batch_size:
            yield batch[:batch_size]
            del batch[:batch_size]
    if batch:
        yield batch


def progress(args: argparse.Namespace, unit: str):
    """A progress bar on stderr, or None when quiet or when stderr is not a terminal."""
    if args.quiet or not sys.stderr.isatty():
        return None
    from tqdm.auto import tqdm

    return tqdm(desc="Encoding", unit=unit, file=sys.stderr)
