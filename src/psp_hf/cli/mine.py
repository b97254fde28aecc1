"""`psp mine`: bitext or near-duplicate pairs between two embedded sets (or within one), written as a dataset.

    psp mine de-emb/ --target en-emb/ -o pairs.parquet                 # bitext: ratio margin, k = 4
    psp mine wiki-emb/ --mode threshold --threshold 0.95 -o dups.tsv   # near-duplicates within one set

Inputs are `.npy` arrays (row i = input row i) or `psp embed-dataset` folders (rows as in their index).
"""

from __future__ import annotations

import argparse
import logging
import math
import time
from pathlib import Path

from . import flags

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `psp mine`."""
    parser.add_argument("source", help="embeddings: .npy file or psp embed-dataset output folder")
    parser.add_argument("--target", default=None, help="the other side (default: mine within SOURCE)")
    flags.add_output(parser, required=True, help="pairs as .parquet or .tsv (header), written atomically")
    parser.add_argument(
        "--mode",
        default="margin",
        choices=["margin", "threshold"],
        help="margin: bitext by ratio margin (Artetxe & Schwenk 2019); threshold: every pair with "
        "cosine >= --threshold among the k nearest (near-duplicates) (default: margin)",
    )
    parser.add_argument("-k", "--k", type=int, default=None, help="neighbours (default: 4 for margin, 10 threshold)")
    parser.add_argument("--threshold", type=float, default=0.9, help="cosine threshold of --mode threshold")
    parser.add_argument("--min-margin", type=float, default=None, help="keep margin pairs scoring at least this")
    parser.add_argument(
        "--retrieval",
        default="max",
        choices=["forward", "backward", "max", "intersect"],
        help="margin pairs: best target per source, best source per target, both (max), or only "
        "mutual best (default: max)",
    )
    parser.add_argument(
        "--index",
        default="auto",
        choices=["auto", "exact", "approx"],
        help="Faiss index: exact IndexFlatIP, approximate IndexIVFFlat, or auto (approximate from "
        "500000 vectors) (default: auto)",
    )
    parser.add_argument("--nprobe", type=int, default=32, help="lists searched by the approximate index (default: 32)")
    flags.add_threads(parser, "Faiss threads")


def write_pairs(path: str | Path, columns: dict) -> None:
    """Pairs as parquet (by extension) or a TSV file with a header, written atomically."""
    import numpy as np

    from ..errors import PSPInputError
    from ..io.writing import atomic_path, check_output

    path = Path(path)
    check_output(path)
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".tsv"):
        raise PSPInputError(f"{path}: give a .parquet or .tsv output file")
    with atomic_path(path) as tmp:
        if suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table({name: np.asarray(values) for name, values in columns.items()}), tmp)
        else:
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.write("\t".join(columns) + "\n")
                values = list(columns.values())
                for row in zip(*(v.tolist() for v in values), strict=True):
                    handle.write("\t".join(f"{x:.6f}" if isinstance(x, float) else str(x) for x in row) + "\n")


# The largest embedding value psp mine normalises: beyond it the squared norm overflows float32, and Faiss makes the
# row all zeros (cosine 0 with everything, margins NaN).
MAX_EMBEDDING_VALUE = 1e15


def _finite_rows(rows, embeddings, path) -> tuple:
    """Drop rows holding NaN, infinity or values too large to normalise (`psp embed --skip-bad-lines` writes a
    skipped line as a NaN row), saying how many; Faiss would otherwise rank them as neighbours with a NaN cosine."""
    import numpy as np

    keep = np.ones(len(embeddings), dtype=bool)
    for start in range(0, len(embeddings), 65536):  # in blocks: the array may be a memory map larger than RAM
        with np.errstate(invalid="ignore"):
            keep[start : start + 65536] = (np.abs(embeddings[start : start + 65536]) <= MAX_EMBEDDING_VALUE).all(axis=1)
    if keep.all():
        return rows, embeddings
    logger.warning(
        "psp mine: %s: skipped %d row(s) holding NaN or infinity (or values beyond ±%.0e)",
        path,
        int((~keep).sum()),
        MAX_EMBEDDING_VALUE,
    )
    return rows[keep], np.ascontiguousarray(embeddings[keep])


def run(args: argparse.Namespace) -> int:
    """Load both sets, search them with Faiss, score the pairs and write them."""
    from ..corpus.mine import mine_margin, mine_threshold
    from ..corpus.shards import load_embeddings
    from ..errors import PSPInputError

    k = args.k if args.k is not None else (4 if args.mode == "margin" else 10)
    if k < 1 or args.nprobe < 1:
        raise PSPInputError(f"-k and --nprobe must be at least 1, got {k} and {args.nprobe}")
    for flag, value in (("--threshold", args.threshold), ("--min-margin", args.min_margin)):
        if value is not None and not math.isfinite(value):  # every comparison with NaN is False: nothing mined
            raise PSPInputError(f"{flag} must be a finite number, got {value}")
    start = time.perf_counter()
    source_rows, source = _finite_rows(*load_embeddings(args.source), args.source)
    target_rows, target = (
        (source_rows, None) if args.target is None else _finite_rows(*load_embeddings(args.target), args.target)
    )
    if target is not None and target.shape[1] != source.shape[1]:
        raise PSPInputError(f"{args.source} has {source.shape[1]}-d embeddings, {args.target} {target.shape[1]}-d")
    if len(source) < 2 and target is None or len(source) == 0 or target is not None and len(target) == 0:
        raise PSPInputError("nothing to mine: a set is empty (or one row mined against itself)")
    from ..corpus.mine import _faiss

    _faiss().omp_set_num_threads(args.threads)
    if args.mode == "margin":
        src, tgt, cos, margin = mine_margin(source, target, k, args.retrieval, args.index, args.nprobe)
        if args.min_margin is not None:
            keep = margin >= args.min_margin
            src, tgt, cos, margin = src[keep], tgt[keep], cos[keep], margin[keep]
        columns = {"source_row": source_rows[src], "target_row": target_rows[tgt], "cosine": cos, "margin": margin}
    else:
        src, tgt, cos = mine_threshold(source, target, args.threshold, k, args.index, args.nprobe)
        columns = {"source_row": source_rows[src], "target_row": target_rows[tgt], "cosine": cos}
    write_pairs(args.output, columns)
    logger.info(
        f"wrote {args.output}: {len(src)} pairs ({args.mode}, k={k}, index {args.index}) from {len(source)} x "
        f"{len(source) if target is None else len(target)} embeddings in {time.perf_counter() - start:.1f} s"
    )
    return 0
