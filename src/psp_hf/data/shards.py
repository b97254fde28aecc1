"""Writing prepared pairs as parquet shards, optionally in an exact random order, with bounded memory.

Every shard is written by `datasets`' own parquet writer (the one behind `Dataset.to_parquet` and
`push_to_hub`), so the files carry the dataset's features in their metadata and use content-defined chunks
that the Hub's storage deduplicates. What `datasets` does not offer is an exact shuffle of a stream larger
than memory; that part is here:

each incoming row goes to one of `num_shards` temporary buckets
chosen uniformly at random (Arrow IPC files on disk); at the end every bucket is read back alone,
permuted, and written as one parquet shard. A random bucket followed by a random order inside the bucket
is a uniformly random permutation of all rows, and memory peaks at one bucket.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

SHARD_PATTERN = "train-*.parquet"
ROW_GROUP_SIZE = 100_000


def _parquet_writer(path: Path, schema):
    from datasets.arrow_writer import ParquetWriter

    return ParquetWriter(path=str(path), schema=schema, writer_batch_size=ROW_GROUP_SIZE)


def shard_name(index: int, count: int) -> str:
    """Hub-style shard file name: `train-00000-of-00004.parquet`."""
    return f"train-{index:05d}-of-{count:05d}.parquet"


def estimate_num_shards(paths: list[Path], rows_per_shard: int = 1_000_000) -> int:
    """Shards for about `rows_per_shard` rows each, guessed from input sizes (gzip counted as 4x, ~100 B a row)."""
    total = 0
    for path in paths:
        size = os.path.getsize(path)
        total += size * 4 if str(path).endswith(".gz") else size
    return int(min(1024, max(1, -(-total // (100 * rows_per_shard)))))


class ShardWriter:
    """Collects record batches and writes `train-XXXXX-of-YYYYY.parquet` shards into `directory`.

    With `seed` the rows end up in a uniformly random order spread over `num_shards` shards; without it,
    in input order, `rows_per_shard` rows per shard.
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        schema,
        seed: int | None = None,
        num_shards: int = 1,
        rows_per_shard: int = 1_000_000,
    ):
        if num_shards < 1:
            raise ValueError(f"num_shards must be at least 1, got {num_shards}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        self.shuffle = seed is not None
        self.rng = np.random.default_rng(seed)
        self.num_shards = num_shards
        self.rows_per_shard = rows_per_shard
        self.rows = 0
        self._parts: list[Path] = []
        self._writer = None  # the open sequential parquet writer (datasets.arrow_writer.ParquetWriter), or
        self._buckets: dict[int, object] = {}  # open IPC writers per bucket when shuffling
        self._rows_in_part = 0

    # ------------------------------------------------------------------------------------------ writing
    def write(self, columns: dict[str, object]) -> None:
        """Append rows given as `{column: list or array}` in the writer's schema."""
        import pyarrow as pa

        batch = pa.RecordBatch.from_pydict(columns, schema=self.schema)
        if batch.num_rows == 0:
            return
        self.rows += batch.num_rows
        if self.shuffle:
            self._write_buckets(batch)
        else:
            self._write_sequential(batch)

    def _write_buckets(self, batch) -> None:
        import pyarrow as pa

        buckets = self.rng.integers(self.num_shards, size=batch.num_rows)
        order = np.argsort(buckets, kind="stable")
        bounds = np.searchsorted(buckets[order], np.arange(self.num_shards + 1))
        for bucket in range(self.num_shards):
            rows = order[bounds[bucket] : bounds[bucket + 1]]
            if len(rows) == 0:
                continue
            writer = self._buckets.get(bucket)
            if writer is None:
                path = self.directory / f".bucket-{bucket:05d}.arrow"
                writer = pa.ipc.new_stream(str(path), self.schema)
                self._buckets[bucket] = writer
                self._parts.append(path)
            writer.write_batch(batch.take(pa.array(rows)))

    def _write_sequential(self, batch) -> None:
        import pyarrow as pa

        offset = 0
        while offset < batch.num_rows:
            if self._writer is None:
                path = self.directory / f".part-{len(self._parts):05d}.parquet"
                self._parts.append(path)
                self._writer = _parquet_writer(path, self.schema)
                self._rows_in_part = 0
            take = min(batch.num_rows - offset, self.rows_per_shard - self._rows_in_part)
            self._writer.write_table(pa.Table.from_batches([batch.slice(offset, take)]))
            self._rows_in_part += take
            offset += take
            if self._rows_in_part >= self.rows_per_shard:
                self._writer.finalize()
                self._writer = None

    # ------------------------------------------------------------------------------------------ finishing
    def close(self) -> list[Path]:
        """Finish every shard and return their paths (at least one, possibly empty, shard)."""
        import pyarrow as pa

        if self._writer is not None:
            self._writer.finalize()
            self._writer = None
        for writer in self._buckets.values():
            writer.close()
        self._buckets.clear()
        parts = sorted(self._parts)
        if not parts:
            empty = self.directory / ".part-00000.parquet"
            _parquet_writer(empty, self.schema).finalize()
            parts = [empty]
        shards = []
        for index, part in enumerate(parts):
            final = self.directory / shard_name(index, len(parts))
            if self.shuffle and part.suffix == ".arrow":
                with pa.memory_map(str(part)) as source:
                    table = pa.ipc.open_stream(source).read_all()
                table = table.take(pa.array(self.rng.permutation(table.num_rows)))
                writer = _parquet_writer(final, self.schema)
                writer.write_table(table)
                writer.finalize()
                del table
                part.unlink()
            else:
                os.replace(part, final)
            shards.append(final)
        return shards

    def abort(self) -> None:
        """Close open files after a failure (the caller removes the folder)."""
        if self._writer is not None:
            self._writer.finalize()
            self._writer = None
        for writer in self._buckets.values():
            writer.close()
        self._buckets.clear()
