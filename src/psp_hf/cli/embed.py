"""`psp embed`: a file of sentences, one a line, into a .npy array (row i = line i + 1)."""

from __future__ import annotations

import argparse
import logging

from . import flags
from .rows import Skipped, WriteBehind, progress, read_ahead, sentence_batches

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `psp embed`."""
    parser.add_argument("input", help="text file, one sentence a line (.gz ok; - reads stdin)")
    flags.add_model(parser)
    flags.add_output(parser, required=True, help="output .npy file (written atomically)")
    parser.add_argument("--batch-size", type=int, default=1024, help="sentences per encode batch (default 1024)")
    flags.add_threads(parser, "encode threads")
    parser.add_argument("--normalize", action="store_true", help="L2-normalise the embeddings")
    flags.add_skip_bad_lines(
        parser, "skip lines that are not UTF-8 or have the wrong number of columns (reported on stderr)"
    )


def run(args: argparse.Namespace) -> int:
    """Embed args.input into args.output, batch by batch; a skipped line is a row of NaN."""
    import numpy as np

    from ..encoder import load
    from ..inference.pooling import prepare_bulk
    from ..io.npy import NpyRowWriter
    from ..io.reading import check_input
    from ..io.writing import atomic_path, check_output

    flags.check_batch_size(args.batch_size)
    check_input(args.input)
    check_output(args.output)
    model = load(args.model)
    skipped = Skipped()
    bar = progress(args, "line")
    lines = sentence_batches(args.input, args.batch_size * 4 * args.threads, args.skip_bad_lines, skipped)
    with atomic_path(args.output) as tmp, NpyRowWriter(tmp, model.dim) as writer, WriteBehind(writer.write) as out:
        # Rows stream to the file batch by batch; row i stays line i + 1, a skipped line is a row of NaN. Several
        # batches a read, so that --threads threads each have batches to encode; the next lines are read and the
        # last rows written on threads of their own meanwhile.
        n_rows = 0
        for batch in read_ahead(lines):
            prepare_bulk(n_rows + len(batch))
            good = batch if None not in batch else [text for text in batch if text is not None]
            embeddings = model.encode(
                good, batch_size=args.batch_size, normalize_embeddings=args.normalize, num_threads=args.threads
            )
            if len(good) < len(batch):
                block = np.full((len(batch), model.dim), np.nan, dtype=np.float32)
                block[[text is not None for text in batch]] = embeddings
                embeddings = block
            out.write(embeddings)
            n_rows += len(batch)
            if bar is not None:
                bar.update(len(batch))
    if bar is not None:
        bar.close()
    if skipped.count:
        logger.warning(skipped.summary(args.input) + " (their rows are NaN)")
    logger.info("wrote %s: %d x %d float32 (row i = line i + 1)", args.output, n_rows, model.dim)
    return 0
