"""`psp embed-dataset`: embed a dataset into resumable shards, on several threads and processes.

    psp embed-dataset wiki.txt.gz -m MODEL -o wiki-emb                           # one process, all cores
    psp embed-dataset data/ --column text -m MODEL -o out --num-proc 4          # 4 local processes
    torchrun --nproc-per-node 4 -m psp_hf.cli embed-dataset ...                   # same, per RANK/WORLD_SIZE
    psp embed-dataset user/dataset --column sentence --split train -m MODEL -o out --format parquet

The work is `psp_hf.corpus.embed_dataset`; this module holds the flags and the --num-proc launcher.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..errors import PSPInputError
from . import flags

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `psp embed-dataset`."""
    parser.epilog = (
        "Output: OUT/shard-NNNNN.npy (float32 rows) + shard-NNNNN.rows.npy (0-based input row of each embedding), "
        "or shard-NNNNN.parquet (columns row, embedding); OUT/index.json lists the input files and their first "
        "row. Rerun the same command after a kill: finished shards are kept and skipped. Under torchrun or "
        "accelerate launch each process takes the shards k with k % WORLD_SIZE == RANK."
    )
    parser.add_argument(
        "input",
        help="text file (one sentence a line), .tsv (header), .jsonl or .parquet file "
        "(.gz ok), a folder of them, or a Hugging Face Hub dataset id (streamed)",
    )
    flags.add_model(parser)
    flags.add_output(parser, required=True, help="folder for the shards (created; reused to resume)")
    parser.add_argument("--column", default=None, help="field holding the sentences (TSV/JSONL/parquet/Hub)")
    parser.add_argument("--data-config", default=None, help="Hub dataset configuration name")
    parser.add_argument("--split", default="train", help="Hub dataset split (default: train)")
    parser.add_argument("--format", default="npy", choices=["npy", "parquet"], help="shard format (default: npy)")
    parser.add_argument("--shard-size", type=int, default=100_000, help="rows per shard (default: 100000)")
    parser.add_argument("--batch-size", type=int, default=1024, help="sentences per encode batch (default: 1024)")
    flags.add_threads(parser, "encode threads, shared among the --num-proc processes")
    parser.add_argument("--num-proc", type=int, default=1, help="local processes, each with its share of the shards")
    parser.add_argument("--normalize", action="store_true", help="L2-normalise the embeddings")


def _child_command(args: argparse.Namespace, threads: int) -> list[str]:
    command = [sys.executable, "-m", "psp_hf.cli", "embed-dataset", args.input, "-m", args.model]
    command += ["-o", args.output, "--split", args.split, "--format", args.format]
    command += ["--shard-size", str(args.shard_size), "--batch-size", str(args.batch_size), "--threads", str(threads)]
    for flag, value in (("--column", args.column), ("--data-config", args.data_config)):
        if value is not None:
            command += [flag, value]
    return command + (["--normalize"] if args.normalize else []) + (["--quiet"] if args.quiet else [])


def _die_with_parent() -> None:
    """In a child, before it runs: ask Linux to send SIGTERM when the parent dies (a SIGKILLed psp leaves no
    workers writing on); elsewhere nothing."""
    try:
        import ctypes

        parent = os.getppid()
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(1)
    except (OSError, AttributeError):
        pass


def _run_children(command: list[str], environments: list[dict]) -> list[int]:
    """Start one worker a rank and wait for them; on SIGTERM, Ctrl-C or any error, stop them first."""
    from ..io.writing import terminate_as_exception

    children: list[subprocess.Popen] = []
    with terminate_as_exception():  # SIGTERM becomes `Terminated` here, so the workers are stopped below
        try:
            for environment in environments:
                children.append(subprocess.Popen(command, env=environment, preexec_fn=_die_with_parent))
            return [child.wait() for child in children]
        except BaseException:
            for child in children:
                child.terminate()
            for child in children:
                try:
                    child.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
            raise


def run(args: argparse.Namespace) -> int:
    """Embed the dataset in this process (its RANK's share) or spawn --num-proc processes that do."""
    if args.num_proc < 1:
        raise PSPInputError(f"--num-proc must be at least 1, got {args.num_proc}")
    if Path(args.output).exists() and not Path(args.output).is_dir():
        raise PSPInputError(f"--output {args.output}: is a file; psp embed-dataset writes a folder of shards there")
    # --threads is the whole run's: each of the --num-proc processes takes its share.
    threads = max(1, args.threads // args.num_proc)
    start = time.perf_counter()
    if args.num_proc > 1:
        command = _child_command(args, threads)
        environments = [dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.num_proc)) for r in range(args.num_proc)]
        codes = _run_children(command, environments)
        failed = [r for r, code in enumerate(codes) if code != 0]
        if failed:
            raise PSPInputError(
                f"process(es) {failed} failed (exit codes {[codes[r] for r in failed]}); rerun to resume"
            )
        logger.info("wrote %s with %d processes in %.1f s", args.output, args.num_proc, time.perf_counter() - start)
        return 0
    from ..corpus.embed_dataset import embed_dataset, process_rank
    from ..encoder import load
    from ..inference.pooling import prepare_bulk

    rank, world = process_rank()
    encoder = load(args.model)
    prepare_bulk(args.shard_size)
    if "torch" in sys.modules:
        import torch

        # Parallelism is encode's batch threads; torch's own threads would only compete with them.
        torch.set_num_threads(1)
    counts = embed_dataset(
        encoder,
        args.input,
        args.output,
        args.column,
        data_config=args.data_config,
        split=args.split,
        shard_size=args.shard_size,
        fmt=args.format,
        batch_size=args.batch_size,
        num_threads=threads,
        normalize=args.normalize,
        model_name=str(Path(args.model).resolve()) if Path(args.model).is_dir() else args.model,
        rank=rank,
        world_size=world,
        show_progress=not args.quiet and sys.stderr.isatty(),
    )
    seconds = time.perf_counter() - start
    logger.info(
        f"rank {rank}/{world}: {counts['rows']} input rows in {counts['shards']} shards; embedded "
        f"{counts['embedded_rows']} rows ({counts['embedded_shards']} shards, {counts['skipped_shards']} already "
        f"done) in {seconds:.1f} s ({counts['embedded_rows'] / max(seconds, 1e-9):,.0f} sentences/s)"
    )
    return 0
