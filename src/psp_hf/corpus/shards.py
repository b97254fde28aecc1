"""The layout of an embedded dataset: a manifest, numbered shards, and reading them back.

    OUT/manifest.json          settings the shards were made with (a rerun must match them)
    OUT/shard-00000.npy        float32 (rows, dim) embeddings of input rows 0 .. shard_size-1   (format npy)
    OUT/shard-00000.rows.npy   int64 input row number of each embedding (0-based, over all input files)
    OUT/shard-00000.parquet    columns `row` and `embedding` in one file                        (format parquet)
    OUT/index.json             written once the input has been read: total rows, shard count, input files

Each shard file is written atomically, so a shard that exists is complete; a killed run loses at most the
shards it was writing, and the next run with the same command writes only the missing ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import PSPInputError
from ..io.files import write_json

MANIFEST = "manifest.json"
INDEX = "index.json"
# Settings that change what a shard holds: a rerun into the same folder must use the same ones.
SHARD_SETTINGS = ("input", "column", "data_config", "split", "model", "shard_size", "format", "normalize", "dim")


def shard_stem(index: int) -> str:
    """File name stem of shard `index`."""
    return f"shard-{index:05d}"


def shard_done(folder: Path, index: int, fmt: str) -> bool:
    """Whether shard `index` was completely written (its last-written file exists)."""
    return (folder / f"{shard_stem(index)}.{'parquet' if fmt == 'parquet' else 'npy'}").is_file()


def check_manifest(folder: Path, settings: dict) -> None:
    """Write the manifest of a new output folder, or check that an existing one was made with `settings`."""
    path = folder / MANIFEST
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        changed = [key for key in SHARD_SETTINGS if old.get(key) != settings.get(key)]
        # With no shard written yet (say the first run named a wrong column) the new settings simply apply.
        if changed and any(folder.glob("shard-*")):
            details = "; ".join(f"{key}: {old.get(key)!r} there, {settings.get(key)!r} now" for key in changed)
            raise PSPInputError(
                f"{folder}: holds shards made with other settings ({details}); use another --output or the "
                "same settings to resume"
            )
        if not changed:
            return
    write_json(path, {key: settings.get(key) for key in SHARD_SETTINGS})


def write_shard(folder: Path, index: int, fmt: str, rows: np.ndarray, embeddings: np.ndarray) -> None:
    """Write one shard atomically: for npy the row numbers first, the embeddings (the done marker) last."""
    from ..io.files import atomic_path

    stem = folder / shard_stem(index)
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        flat = pa.array(np.ascontiguousarray(embeddings, dtype=np.float32).reshape(-1))
        table = pa.table(
            {
                "row": pa.array(rows, pa.int64()),
                "embedding": pa.FixedSizeListArray.from_arrays(flat, embeddings.shape[1]),
            }
        )
        with atomic_path(stem.with_suffix(".parquet")) as tmp:
            pq.write_table(table, tmp)
        return
    with atomic_path(Path(f"{stem}.rows.npy")) as tmp, open(tmp, "wb") as handle:
        np.save(handle, rows.astype(np.int64))
    with atomic_path(Path(f"{stem}.npy")) as tmp, open(tmp, "wb") as handle:
        np.save(handle, np.ascontiguousarray(embeddings, dtype=np.float32))


def read_index(folder: str | Path) -> dict:
    """`index.json` and `manifest.json` of a finished output folder; an error says what is missing."""
    folder = Path(folder)
    if not (folder / MANIFEST).is_file():
        raise PSPInputError(f"{folder}: not a psp embed-dataset output folder (no {MANIFEST})")
    if not (folder / INDEX).is_file():
        raise PSPInputError(f"{folder}: embedding not finished (no {INDEX}); rerun the same psp embed-dataset command")
    info = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    info.update(json.loads((folder / INDEX).read_text(encoding="utf-8")))
    check_counts(folder, info)
    missing = [i for i in range(info["shards"]) if not shard_done(folder, i, info["format"])]
    if missing:
        shown = ", ".join(map(str, missing[:10]))
        raise PSPInputError(
            f"{folder}: {len(missing)} shard(s) missing ({shown}); rerun the same psp embed-dataset command"
        )
    return info


def _whole_number(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_counts(folder: Path, info: dict) -> None:
    """Refuse an index whose counts do not fit its manifest: the shard count is the rows over the shard size,
    rounded up (a crafted `"shards": 100000000` would otherwise have every shard looked for, for hours)."""
    rows, shards, size = info.get("rows"), info.get("shards"), info.get("shard_size")
    if not (_whole_number(rows) and _whole_number(shards) and _whole_number(size) and size >= 1):
        raise PSPInputError(
            f"{folder / INDEX}: rows {rows!r}, shards {shards!r} and shard_size {size!r} (in {MANIFEST}) must be "
            "whole numbers; rerun the psp embed-dataset command into a new folder"
        )
    if shards != -(-rows // size):
        raise PSPInputError(
            f"{folder / INDEX}: {shards} shard(s) cannot hold {rows} rows of {size} a shard; the folder is damaged, "
            "rerun the psp embed-dataset command into a new folder"
        )


def check_shard(stem: Path, index: int, info: dict, rows: np.ndarray, embeddings: np.ndarray) -> None:
    """Refuse shard `index` unless it holds the input rows its place says, one embedding for each: rows that do not
    match their embeddings would pair other sentences in `psp mine`, without a word."""
    size = info["shard_size"]
    first = index * size
    count = min(size, info["rows"] - first)
    if rows.ndim != 1 or len(rows) != count or embeddings.ndim != 2 or len(embeddings) != count:
        raise PSPInputError(
            f"{stem}: holds {len(rows)} row number(s) and {len(embeddings)} embedding(s), expected {count} of each "
            f"(rows {first}..{first + count - 1}); the folder is damaged, rerun psp embed-dataset into a new folder"
        )
    if not np.array_equal(rows, np.arange(first, first + count)):
        raise PSPInputError(
            f"{stem}: its row numbers are not {first}..{first + count - 1} in order; the folder is damaged, rerun "
            "psp embed-dataset into a new folder"
        )


def iter_shards(folder: str | Path, mmap: bool = True):
    """Yield `(rows, embeddings)` of every shard in order (npy shards memory-mapped), each checked against its
    place in the index."""
    folder = Path(folder)
    info = read_index(folder)
    for index in range(info["shards"]):
        stem = folder / shard_stem(index)
        if info["format"] == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(stem.with_suffix(".parquet"))
            flat = table.column("embedding").combine_chunks().values.to_numpy(zero_copy_only=False)
            rows, embeddings = (
                table.column("row").to_numpy(),
                flat.reshape(len(table), -1).astype(np.float32, copy=False),
            )
        else:
            embeddings = np.load(f"{stem}.npy", mmap_mode="r" if mmap else None)
            rows = np.load(f"{stem}.rows.npy")
        check_shard(stem, index, info, rows, embeddings)
        yield rows, embeddings


def load_embeddings(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """`(rows, embeddings)` of a `.npy` file (rows 0..n-1) or of an embed-dataset folder (all shards, in order)."""
    path = Path(path)
    if path.is_dir():
        parts = list(iter_shards(path))
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        return np.concatenate([r for r, _ in parts]), np.concatenate([e for _, e in parts])
    if not path.is_file():
        raise PSPInputError(f"{path}: no such file or folder")
    try:
        embeddings = np.load(path, mmap_mode="r")
    except ValueError as error:
        raise PSPInputError(f"{path}: not a .npy array ({error})") from None
    if embeddings.ndim != 2:
        raise PSPInputError(f"{path}: expected a 2-D array of embeddings, got shape {embeddings.shape}")
    return np.arange(len(embeddings), dtype=np.int64), embeddings
