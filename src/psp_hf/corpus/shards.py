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

from pathlib import Path

import numpy as np

from ..errors import PSPInputError
from ..io.reading import read_json
from ..io.writing import write_json

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
        try:
            old = read_json(path)
        except PSPInputError as error:
            if any(folder.glob("shard-*")):  # shards of unknown settings: resuming could mix two kinds
                raise PSPInputError(f"{error}; the shards beside it cannot be resumed, use another --output") from None
            old = {}  # nothing embedded yet: the new settings simply apply
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
    from ..io.writing import atomic_path

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
    info = read_json(folder / MANIFEST)
    try:
        index = read_json(folder / INDEX)
    except PSPInputError as error:
        raise PSPInputError(f"{error}; rerun the same psp embed-dataset command to rewrite it") from None
    problem = _manifest_problem(info)
    if problem:
        raise PSPInputError(f"{folder / MANIFEST}: {problem}; embed into a new folder")
    problem = _index_problem(index, info["shard_size"])
    if problem:
        raise PSPInputError(f"{folder / INDEX}: {problem}; rerun the same psp embed-dataset command to rewrite it")
    info.update(index)
    missing = [i for i in range(info["shards"]) if not shard_done(folder, i, info["format"])]
    if missing:
        shown = ", ".join(map(str, missing[:10]))
        raise PSPInputError(
            f"{folder}: {len(missing)} shard(s) missing ({shown}); rerun the same psp embed-dataset command"
        )
    return info


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _manifest_problem(manifest: dict) -> str | None:
    """What is wrong with a manifest's settings (None when nothing is)."""
    absent = [key for key in SHARD_SETTINGS if key not in manifest]
    if absent:
        return f"lacks {', '.join(absent)}"
    if manifest["format"] not in ("npy", "parquet"):
        return f"format {manifest['format']!r} is neither npy nor parquet"
    for key in ("shard_size", "dim"):
        if not _count(manifest[key]) or manifest[key] < 1:
            return f"{key} {manifest[key]!r} is not a positive whole number"
    if not isinstance(manifest["input"], str):
        return f"input {manifest['input']!r} is not a name"
    return None


def _index_problem(index: dict, shard_size: int) -> str | None:
    """What is wrong with an index's counts (None when nothing is)."""
    for key in ("rows", "shards"):
        if not _count(index.get(key)):
            return f"{key} {index.get(key)!r} is not a count"
    if index["shards"] != -(-index["rows"] // shard_size):  # the shards the rows fill, the last one part full
        return f"{index['rows']} rows make {-(-index['rows'] // shard_size)} shard(s), not {index['shards']}"
    return None


def _read_shard(stem: Path, fmt: str, dim: int, mmap: bool) -> tuple[np.ndarray, np.ndarray]:
    """`(rows, embeddings)` of one shard; an error names the shard's file and how to embed it again."""
    redo = f"remove {stem.name}.* and rerun the same psp embed-dataset command to embed it again"
    path = stem.with_suffix(".parquet") if fmt == "parquet" else Path(f"{stem}.npy")
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
            flat = table.column("embedding").combine_chunks().values.to_numpy(zero_copy_only=False)
            embeddings = flat.reshape(len(table), -1).astype(np.float32, copy=False)
            rows = table.column("row").to_numpy()
        else:
            embeddings = np.load(path, mmap_mode="r" if mmap else None)
            path = Path(f"{stem}.rows.npy")
            rows = np.load(path)  # allow_pickle stays off: a pickled rows file is refused, never run
    except (OSError, ValueError, EOFError, KeyError, AttributeError) as error:  # ArrowInvalid is a ValueError
        raise PSPInputError(f"{path}: shard cannot be read ({type(error).__name__}: {error}); {redo}") from None
    if embeddings.ndim != 2 or embeddings.shape[1] != dim or rows.ndim != 1 or len(rows) != len(embeddings):
        raise PSPInputError(
            f"{path}: shard holds {embeddings.shape} embeddings and {rows.shape} row numbers, expected "
            f"(n, {dim}) and (n,); {redo}"
        )
    if rows.dtype.kind not in "iu":
        raise PSPInputError(f"{path}: its row numbers are {rows.dtype}, not integers; {redo}")
    return rows, embeddings


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
        rows, embeddings = _read_shard(stem, info["format"], info["dim"], mmap)
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
