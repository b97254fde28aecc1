"""`psp embed-dataset`: embed a dataset into resumable shards, on several threads and processes.

    psp embed-dataset wiki.txt.gz -m MODEL --output-dir wiki-emb                      # one process, all cores
    psp embed-dataset data/ --column text -m MODEL --output-dir out --num-proc 4       # 4 local processes
    torchrun --nproc-per-node 4 -m psp_hf.cli embed-dataset ...                        # same, per RANK/WORLD_SIZE
    psp embed-dataset user/dataset --column sentence --split train -m MODEL --output-dir out --format parquet

The input is streamed; shard k holds input rows [k * shard_size, (k + 1) * shard_size) and belongs to process
k mod WORLD_SIZE. Shards already written are skipped, so rerunning the same command after a kill finishes the job.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import PSPInputError
from .shards import INDEX, check_manifest, shard_done, write_json, write_shard


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def process_rank() -> tuple[int, int]:
    """`(RANK, WORLD_SIZE)` as set by torchrun / accelerate launch / --num-proc; `(0, 1)` when unset."""
    try:
        rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise PSPInputError("RANK and WORLD_SIZE must be integers") from None
    if world < 1 or not 0 <= rank < world:
        raise PSPInputError(f"RANK={rank} WORLD_SIZE={world}: need 0 <= RANK < WORLD_SIZE")
    return rank, world


def embed_dataset(
    encoder,
    spec: str,
    output_dir: str | os.PathLike,
    column: str | None = None,
    *,
    data_config: str | None = None,
    split: str = "train",
    shard_size: int = 100_000,
    fmt: str = "npy",
    batch_size: int = 1024,
    num_threads: int = 1,
    normalize: bool = False,
    model_name: str | None = None,
    rank: int = 0,
    world_size: int = 1,
    show_progress: bool = False,
) -> dict:
    """Embed every row of `spec` into shards under `output_dir`; returns counts of rows and shards written.

    Only shard k with k % world_size == rank is embedded here; existing shards are skipped. At most one shard
    of sentences and embeddings is held at a time.
    """
    from .sources import iter_part, list_parts

    if shard_size < 1 or batch_size < 1:
        raise PSPInputError(f"--shard-size and --batch-size must be at least 1, got {shard_size} and {batch_size}")
    if fmt not in ("npy", "parquet"):
        raise PSPInputError(f"--format must be npy or parquet, got {fmt!r}")
    folder = Path(output_dir)
    parts = list_parts(spec)
    settings = dict(
        input=spec,
        column=column,
        data_config=data_config,
        split=split,
        model=model_name,
        shard_size=shard_size,
        format=fmt,
        normalize=normalize,
        dim=encoder.dim,
    )
    folder.mkdir(parents=True, exist_ok=True)
    check_manifest(folder, settings)
    progress = None
    if show_progress:
        from tqdm.auto import tqdm

        label = f"embed (rank {rank}/{world_size})" if world_size > 1 else "embed"
        progress = tqdm(desc=label, unit="sentence", unit_scale=True, position=rank, file=sys.stderr)
    counts = {"rows": 0, "shards": 0, "embedded_shards": 0, "skipped_shards": 0, "embedded_rows": 0}
    files: list[dict] = []
    buffer: list[str] = []
    index = 0

    def finish_shard(n_rows: int) -> None:
        nonlocal buffer, index
        if buffer:
            start = index * shard_size
            embeddings = encoder.encode(
                buffer, batch_size=batch_size, num_threads=num_threads, normalize_embeddings=normalize
            )
            write_shard(folder, index, fmt, np.arange(start, start + n_rows, dtype=np.int64), embeddings)
            counts["embedded_shards"] += 1
            counts["embedded_rows"] += n_rows
            if progress is not None:
                progress.update(n_rows)
        elif index % world_size == rank:
            counts["skipped_shards"] += 1
        buffer = []
        index += 1

    in_shard = 0
    mine = index % world_size == rank and not shard_done(folder, index, fmt)
    for part in parts:
        first_row = counts["rows"]
        for text in iter_part(part, column, data_config, split):
            if mine:
                buffer.append(text)
            in_shard += 1
            counts["rows"] += 1
            if in_shard == shard_size:
                finish_shard(in_shard)
                in_shard = 0
                mine = index % world_size == rank and not shard_done(folder, index, fmt)
        files.append({"name": part.name, "first_row": first_row, "rows": counts["rows"] - first_row})
    if in_shard:
        finish_shard(in_shard)
    if progress is not None:
        progress.close()
    counts["shards"] = index
    # Every process read the whole input, so each can write the same index; the atomic writer makes that safe.
    write_json(folder / INDEX, {"rows": counts["rows"], "shards": index, "files": files})
    return counts


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
    parser.add_argument("-m", "--model", required=True, help="model folder or Hugging Face Hub repo id")
    parser.add_argument("-o", "--output-dir", required=True, help="folder for the shards (created; reused to resume)")
    parser.add_argument("--column", default=None, help="field holding the sentences (TSV/JSONL/parquet/Hub)")
    parser.add_argument("--data-config", default=None, help="Hub dataset configuration name")
    parser.add_argument("--split", default="train", help="Hub dataset split (default: train)")
    parser.add_argument("--format", default="npy", choices=["npy", "parquet"], help="shard format (default: npy)")
    parser.add_argument("--shard-size", type=int, default=100_000, help="rows per shard (default: 100000)")
    parser.add_argument("--batch-size", type=int, default=1024, help="sentences per encode batch (default: 1024)")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="encode threads per process (default: the cores available / --num-proc)",
    )
    parser.add_argument("--num-proc", type=int, default=1, help="local processes, each with its share of the shards")
    parser.add_argument("--normalize", action="store_true", help="L2-normalise the embeddings")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")


def _child_command(args: argparse.Namespace, threads: int) -> list[str]:
    command = [sys.executable, "-m", "psp_hf.cli", "embed-dataset", args.input, "-m", args.model]
    command += ["-o", args.output_dir, "--split", args.split, "--format", args.format]
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
    from ..io import _terminate_as_exception

    children: list[subprocess.Popen] = []
    with _terminate_as_exception():  # SIGTERM becomes `Terminated` here, so the workers are stopped below
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
    threads = args.threads if args.threads is not None else max(1, available_cores() // args.num_proc)
    if threads < 1:
        raise PSPInputError(f"--threads must be at least 1, got {threads}")
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
        if not args.quiet:
            print(
                f"wrote {args.output_dir} with {args.num_proc} processes in {time.perf_counter() - start:.1f} s",
                file=sys.stderr,
            )
        return 0
    from .. import load
    from ..pooling import prepare_bulk

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
        args.output_dir,
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
    if not args.quiet:
        seconds = time.perf_counter() - start
        print(
            f"rank {rank}/{world}: {counts['rows']} input rows in {counts['shards']} shards; embedded "
            f"{counts['embedded_rows']} rows ({counts['embedded_shards']} shards, {counts['skipped_shards']} already "
            f"done) in {seconds:.1f} s ({counts['embedded_rows'] / max(seconds, 1e-9):,.0f} sentences/s)",
            file=sys.stderr,
        )
    return 0
