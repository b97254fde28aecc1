"""Smaller psp tables: fewer dimensions (PCA fitted on the table) and float16 or int8 storage.

- `reduce_dimensions`: as model2vec's `pca_dims`, the table is centred and projected onto its top principal
  components. Centring moves every sentence embedding (a mean of rows) by the same vector, so cosines change
  slightly; the components are those of the pieces, unweighted by how often they occur.
- `quantize_table`: "float16" is a cast; "int8" stores each row as integers in [-127, 127] and one float32 scale
  per row (max |value| / 127), `table_scales` in `model.safetensors`. A scale per row keeps rare pieces with small
  values from rounding to zero, which one scale for the whole table (model2vec's choice) would do.

Both psp (`model_folder.read_weights`, numpy only) and the transformers remote code (`PSPModel`) read such folders
back as float32 tables.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..io.writing import atomic_path
from .model_folder import SCALES_KEY, TABLE_KEY, WEIGHTS_KEY

TABLE_DTYPES = ("float32", "float16", "int8")


def check_table_options(quantize_to: str | None, dimensionality: int | None, dim: int) -> None:
    """Raise ValueError for a storage type or a dimensionality that cannot be applied to a `dim`-wide table."""
    if quantize_to is not None and quantize_to not in TABLE_DTYPES:
        raise ValueError(f"quantize_to must be one of {', '.join(TABLE_DTYPES)}; got {quantize_to!r}")
    if dimensionality is not None and (
        isinstance(dimensionality, bool) or not isinstance(dimensionality, int) or not 1 <= dimensionality <= dim
    ):
        raise ValueError(
            f"dimensionality must be an integer from 1 to the model's dimension {dim}, got {dimensionality!r}"
        )


def reduce_dimensions(table: np.ndarray, dimensionality: int) -> np.ndarray:
    """`table` centred and projected onto its `dimensionality` top principal components (float32)."""
    centred = table.astype(np.float64) - table.astype(np.float64).mean(axis=0)
    # The eigenvectors of the (dim x dim) covariance: cheaper than an SVD of the (vocab x dim) table.
    values, vectors = np.linalg.eigh(centred.T @ centred)
    top = vectors[:, np.argsort(values)[::-1][:dimensionality]]
    # A fixed sign per component (largest loading positive), so the same table always gives the same result.
    top *= np.where(top[np.abs(top).argmax(axis=0), np.arange(top.shape[1])] < 0, -1.0, 1.0)
    return (centred @ top).astype(np.float32)


def quantize_table(table: np.ndarray, quantize_to: str) -> dict[str, np.ndarray]:
    """The safetensors entries storing `table` as `quantize_to` (see the module docstring)."""
    if quantize_to == "float32":
        return {TABLE_KEY: np.ascontiguousarray(table, dtype=np.float32)}
    if quantize_to == "float16":
        return {TABLE_KEY: table.astype(np.float16)}
    scales = (np.abs(table).max(axis=1) / 127.0).astype(np.float32)
    scales[scales == 0] = 1.0  # an all-zero row stays zero with any scale
    integers = np.clip(np.rint(table / scales[:, None]), -127, 127).astype(np.int8)
    return {TABLE_KEY: integers, SCALES_KEY: scales}


def restore_table(entries: dict[str, np.ndarray]) -> np.ndarray:
    """The float32 table that `quantize_table`'s `entries` store (as `model_folder.read_weights` reads it back)."""
    table = entries[TABLE_KEY].astype(np.float32)
    if SCALES_KEY in entries:
        table *= entries[SCALES_KEY][:, None]
    return table


def with_stored_table(encoder, quantize_to: str):
    """`encoder` (a `PSPEncoder`) with its table as stored in `quantize_to` and read back, float32 in memory: the
    embeddings of the folder `save_pretrained(..., quantize_to=...)` writes (`load(..., quantize_to=...)`)."""
    check_table_options(quantize_to, None, encoder.dim)
    if not encoder.averages_pieces:
        raise ValueError("quantize_to: averaging encoders only; this model embeds through its transformers model")
    table, piece_weights = encoder.weights()
    return encoder.with_table(restore_table(quantize_table(table, quantize_to)), piece_weights)


def write_smaller_weights(directory: Path, table: np.ndarray, piece_weights: np.ndarray | None, quantize_to: str):
    """Rewrite `directory`'s `model.safetensors` with `table` stored as `quantize_to`, and say so in config.json."""
    from safetensors.numpy import save

    tensors = quantize_table(table, quantize_to)
    if piece_weights is not None:
        tensors[WEIGHTS_KEY] = np.ascontiguousarray(piece_weights, dtype=np.float32)
    with atomic_path(directory / "model.safetensors") as temporary:
        # Bytes written into the temporary file keep its mode (save_file would replace it with a 0600 file).
        Path(temporary).write_bytes(save(tensors, metadata={"format": "pt"}))
    config_path = directory / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["table_dtype"] = quantize_to
    with atomic_path(config_path) as temporary:
        Path(temporary).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def folder_megabytes(directory: Path) -> float:
    """Size on disk of every file under `directory`, in MB (10^6 bytes)."""
    return sum(path.stat().st_size for path in Path(directory).rglob("*") if path.is_file()) / 1e6
