"""Input lines read in batches for `psp embed` and `psp score`: a bad line stops the run or is skipped and counted."""

from __future__ import annotations

import argparse
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

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


# The most text (characters) one batch of rows holds (`sentence_batches`, `batches`): tokenizing takes tens of bytes a
# character, so a batch of long lines (each under the 1 MiB line limit) is cut short instead of taking gigabytes.
BATCH_CHARS = 1 << 23


def batches(rows, batch_size: int, skip_bad_lines: bool, skipped: Skipped, max_chars: int | None = None):
    """Group `(line_number, parse)` into lists of batch_size parsed rows; a bad row is None when skipped. With
    `max_chars`, a list also ends once its rows (tuples of texts) hold that many characters."""
    batch = []
    chars = 0
    for number, parse in rows:
        try:
            row = parse()
        except PSPInputError:
            if not skip_bad_lines:
                raise
            skipped.add(number)
            row = None
        batch.append(row)
        if max_chars is not None and row is not None:
            chars += sum(map(len, row))
        if len(batch) == batch_size or max_chars is not None and chars >= max_chars:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def sentence_batches(path: str, batch_size: int, skip_bad_lines: bool, skipped: Skipped, max_chars: int = BATCH_CHARS):
    """Lists of batch_size sentences of `path`, one a line (the last list may be shorter, and so is a list that
    reaches `max_chars` characters first); a line that is not UTF-8 stops the run, or is None in its list and
    counted in `skipped`."""
    from ..io.lines import iter_line_blocks
    from ..io.reading import decode_line

    batch: list = []
    chars = 0
    for first, lines in iter_line_blocks(path):
        if bytes in map(type, lines):  # lines that are not UTF-8 (one pass in C)
            for offset, line in enumerate(lines):
                if type(line) is bytes:
                    if not skip_bad_lines:
                        decode_line(path, first + offset, line)  # raises, naming the line and the byte
                    skipped.add(first + offset)
                    lines[offset] = None
        size = sum(map(len, filter(None, lines)))
        if chars + size < max_chars:  # the usual case: whole blocks, cut by line count only
            batch.extend(lines)
            while len(batch) >= batch_size:
                yield batch[:batch_size]
                del batch[:batch_size]
            chars = sum(map(len, filter(None, batch)))
            continue
        for line in lines:  # long lines: cut by characters as well
            batch.append(line)
            chars += len(line) if line else 0
            if len(batch) >= batch_size or chars >= max_chars:
                yield batch
                batch, chars = [], 0
    if batch:
        yield batch


def read_ahead(items: Iterator, ahead: int = 2) -> Iterator:
    """`items`, produced on a thread of their own up to `ahead` in advance, so that reading the next batch overlaps
    the work on this one; an error of the producer is raised where its item would have come. Closing the generator
    stops the producer."""
    slots: queue.Queue = queue.Queue(maxsize=ahead)
    stop = threading.Event()
    done = object()

    def offer(entry: tuple) -> bool:
        """Queue `entry` once there is room; False (not queued) when the consumer stopped."""
        while not stop.is_set():
            try:
                slots.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not offer((item, None)):
                    return
            offer((done, None))
        except BaseException as error:  # raised on the consuming side, in order
            offer((done, error))

    thread = threading.Thread(target=produce, name="psp-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item, error = slots.get()
            if item is done:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        # The producer stops at its next item; one blocked on a slow input (a terminal on stdin) is not waited for.
        thread.join(timeout=5)


class WriteBehind:
    """Runs each write on a thread of its own while the caller computes the next rows; one write at a time, in
    order, and the caller waits for the previous one before handing over the next (memory stays bounded, and an
    error of a write comes out at the next `write` or at `finish`)."""

    def __init__(self, write: Callable[[Any], None]):
        self._write = write
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="psp-write")
        self._pending: Future | None = None

    def write(self, rows: Any) -> None:
        """Hand `rows` to the writing thread, once the previous write is done."""
        self.finish()
        self._pending = self._pool.submit(self._write, rows)

    def finish(self) -> None:
        """Wait for the write under way (raising its error)."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def __enter__(self) -> WriteBehind:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self.finish()
        finally:
            self._pool.shutdown(wait=True)


def progress(args: argparse.Namespace, unit: str):
    """A progress bar on stderr, or None when quiet or when stderr is not a terminal."""
    if args.quiet or not sys.stderr.isatty():
        return None
    from tqdm.auto import tqdm

    return tqdm(desc="Encoding", unit=unit, file=sys.stderr)
