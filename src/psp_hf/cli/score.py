"""`psp score`: the cosine similarity of tab-separated sentence pairs, as a TSV."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys

from ..errors import PSPInputError
from . import flags
from .rows import BATCH_CHARS, Skipped, batches, progress

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `psp score`."""
    parser.add_argument("input", help="TSV file with two columns: sentence1<TAB>sentence2 (.gz ok; - reads stdin)")
    flags.add_model(parser)
    flags.add_output(parser, help="output TSV, written atomically (default or -: stdout)")
    flags.add_columns(parser, "take these two 1-based columns (e.g. 2,3) instead of requiring exactly two")
    parser.add_argument("--header", action="store_true", help="the first line is a header; skip it")
    parser.add_argument("--batch-size", type=int, default=1024, help="pairs per encode batch (default 1024)")
    flags.add_skip_bad_lines(
        parser, "skip lines that are not UTF-8 or have the wrong number of columns (reported on stderr)"
    )


def _pair_parser(path: str, columns: list[int] | None):
    from ..io.reading import decode_line

    def parse(number: int, raw: bytes) -> tuple[str, str]:
        fields = decode_line(path, number, raw).split("\t")
        if columns is None:
            if len(fields) != 2:
                raise PSPInputError(f"{path}:{number}: expected 2 tab-separated columns, got {len(fields)}")
            return fields[0], fields[1]
        if len(fields) <= max(columns):
            raise PSPInputError(
                f"{path}:{number}: expected at least {max(columns) + 1} tab-separated columns, got {len(fields)}"
            )
        return fields[columns[0]], fields[columns[1]]

    return parse


def run(args: argparse.Namespace) -> int:
    """Score the pairs of args.input into args.output (or stdout)."""
    from ..encoder import load
    from ..inference.similarity import cosine_pairs
    from ..io.reading import check_input, iter_raw_lines
    from ..io.writing import atomic_path, check_output

    flags.check_batch_size(args.batch_size)
    if args.columns is not None and not all(isinstance(column, int) for column in args.columns):
        raise PSPInputError(f"--columns: psp score takes column numbers like 2,3; got {args.columns}")
    check_input(args.input)
    to_stdout = args.output in (None, "-")
    if not to_stdout:
        check_output(args.output)
    model = load(args.model)
    parse = _pair_parser(args.input, args.columns)
    rows = (
        (number, lambda n=number, r=raw: parse(n, r))
        for number, raw in iter_raw_lines(args.input)
        if not (args.header and number == 1)
    )
    skipped = Skipped()
    bar = progress(args, "pair")
    written = 0
    with contextlib.ExitStack() as stack:
        if to_stdout:
            handle = sys.stdout
        else:
            tmp = stack.enter_context(atomic_path(args.output))
            handle = stack.enter_context(open(tmp, "w", encoding="utf-8", newline="\n"))
        handle.write("sentence1\tsentence2\tcosine\n")
        for batch in batches(rows, args.batch_size, args.skip_bad_lines, skipped, max_chars=BATCH_CHARS):
            pairs = [pair for pair in batch if pair is not None]
            left = model.encode([a for a, _ in pairs], batch_size=max(len(pairs), 1))
            right = model.encode([b for _, b in pairs], batch_size=max(len(pairs), 1))
            cosines = cosine_pairs(left, right)
            handle.write("".join(f"{a}\t{b}\t{c:.6f}\n" for (a, b), c in zip(pairs, cosines, strict=True)))
            written += len(pairs)
            if bar is not None:
                bar.update(len(batch))
        handle.flush()
    if bar is not None:
        bar.close()
    if not to_stdout:
        logger.info("wrote %s: %d scored pairs", args.output, written)
    if skipped.count:
        logger.warning(skipped.summary(args.input) + " (left out of the output)")
    return 0
