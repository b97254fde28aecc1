"""`psp export`: a smaller psp folder (float16/int8 table, PCA dimensions) or a model2vec folder."""

from __future__ import annotations

import argparse
import logging
import shutil
from pathlib import Path

from ..errors import PSPInputError, os_error_of
from . import flags

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `psp export` flags."""
    parser.add_argument("model", metavar="MODEL", help="psp, model2vec or sentence-transformers static model folder")
    flags.add_output(parser, required=True, metavar="OUT", help="folder to write (new or empty)")
    parser.add_argument(
        "--quantize-to",
        choices=("float32", "float16", "int8"),
        default=None,
        help="store the table as float16, or int8 with one scale per row (psp) / per table (model2vec)",
    )
    parser.add_argument(
        "--dimensionality",
        type=int,
        default=None,
        metavar="N",
        help="keep N dimensions: the table's top N principal components (PCA fitted on the table)",
    )
    parser.add_argument(
        "--format",
        choices=("psp", "model2vec"),
        default="psp",
        help="psp (loads in psp and transformers) or model2vec (loads in model2vec and sentence-transformers)",
    )


def run(args: argparse.Namespace) -> int:
    """Load MODEL, shrink it as asked and write OUT."""
    from ..encoder import load
    from ..io.writing import check_writable_parent, publish_folder, staging_folder
    from ..persistence.smaller_tables import check_table_options, folder_megabytes, reduce_dimensions
    from ..persistence.static_models import save_model2vec

    output = Path(args.output)
    if output.exists() and not output.is_dir():
        raise PSPInputError(f"--output {output}: is a file; psp export writes a model folder, give a folder name")
    if output.exists() and any(output.iterdir()):
        raise PSPInputError(f"--output {output}: exists and is not an empty folder; choose a new one")
    # The folder is staged beside OUT: its parent must be writable, checked before the model is loaded.
    check_writable_parent(output, f"--output {output}")
    encoder = load(args.model)
    try:
        check_table_options(args.quantize_to, args.dimensionality, encoder.dim)
    except ValueError as error:
        raise PSPInputError(f"--{str(error).replace('_', '-')}") from None
    if args.format == "model2vec" and args.dimensionality is not None and args.dimensionality != encoder.dim:
        table, piece_weights = encoder.weights()
        encoder = encoder.with_table(reduce_dimensions(table, args.dimensionality), piece_weights)
    # Written into a hidden folder beside OUT and renamed at the end: a kill or a full disk leaves no half folder
    # that would refuse the rerun (a dead run's staging folder is removed by the next export beside it).
    staging = staging_folder(output, "export")
    try:
        if args.format == "psp":
            encoder.save_pretrained(staging, quantize_to=args.quantize_to, dimensionality=args.dimensionality)
        else:
            save_model2vec(encoder, staging, quantize_to=args.quantize_to)
        publish_folder(staging, output)  # replaces the empty folder OUT may be (checked above)
    except Exception as error:  # a full disk: an OSError, or safetensors' SafetensorError naming the errno
        failure = os_error_of(error)
        if failure is None:
            raise
        reason = failure.strerror or failure
        raise PSPInputError(f"--output {output}: cannot write it ({reason}); nothing was written") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logger.info("psp export: wrote %s (%.1f MB, %s)", output, folder_megabytes(output), args.format)
    return 0
