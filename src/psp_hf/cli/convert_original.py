"""`psp convert-original`: a checkpoint of the authors' P-SP code into a psp model folder (`hub.convert_original`)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from ..errors import PSPInputError
from . import flags

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `psp convert-original`."""
    parser.add_argument("--checkpoint", required=True, type=Path, help="checkpoint of the original code (.pt)")
    parser.add_argument("--sp-model", required=True, type=Path, help="the sentencepiece model it was trained with")
    flags.add_output(parser, required=True, type=Path, help="psp model folder to write")
    parser.add_argument(
        "--side", default="first", choices=("first", "second"),
        help="which table when the two languages have separate vocabularies (default: first)",
    )  # fmt: skip
    parser.add_argument("--overwrite", action="store_true", help="replace --output if it exists")
    parser.add_argument(
        "--trust-pickle", action="store_true",
        help="required: the original checkpoints are pickles, which can run code when read; pass this only for "
        "files you trust (tensors are read with torch's restricted loader first)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Run `psp convert-original`."""
    from ..hub.convert_original import convert_original_checkpoint, load_original_checkpoint, save_converted

    output = Path(args.output)
    if not args.trust_pickle:
        # The refusal comes before anything is read or written (same message as load_original_checkpoint's).
        load_original_checkpoint(args.checkpoint, trust_pickle=False)
    if output.exists() and (not output.is_dir() or any(output.iterdir())) and not args.overwrite:
        # Checked before the (slow) conversion too, so a typo costs nothing.
        raise PSPInputError(f"--output {output}: exists and is not empty; pass --overwrite to replace it")
    encoder, report = convert_original_checkpoint(
        args.checkpoint, args.sp_model, side=args.side, trust_pickle=args.trust_pickle
    )
    save_converted(encoder, args.sp_model, output, overwrite=args.overwrite)
    logger.info(report.summary())
    logger.info("wrote %s: %r", output, encoder)
    return 0
