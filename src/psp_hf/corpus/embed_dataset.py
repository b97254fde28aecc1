"""`psp embed-dataset`: embed a dataset into resumable shards, on several threads and processes.

    psp embed-dataset wiki.txt.gz -m MODEL -o wiki-emb                                # one process, all cores
    psp embed-dataset data/ --column text -m MODEL -o out --num-proc 4                # 4 local processes
    torchrun --nproc-per-node 4 -m psp_hf.cli embed-dataset ...                        # same, per RANK/WORLD_SIZE
    psp embed-dataset user/dataset --column sentence --split train -m MODEL -o out --format parquet

The input is streamed; shard k holds input rows [k * shard_size, (k + 1) * shard_size) and belongs to process
k mod WORLD_SIZE. Shards already written are skipped, so rerunning the same command after a kill finishes the job.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from ..errors import PSPInputError
from ..io.writing import write_json
from .shards import INDEX, check_manifest, shard_done, write_shard


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
