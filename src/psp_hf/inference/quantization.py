"""Embedding post-processing as sentence-transformers does it: truncation and quantisation (numpy only).

`quantize_embeddings` gives the same arrays as `sentence_transformers.quantization.quantize_embeddings` (tests
compare them), so embeddings made by psp and by sentence-transformers can share an index:

- "int8"/"uint8": per dimension, the range [min, max] over the embeddings being quantised is cut into 255 steps;
  a value becomes `floor((x - min) / step)` clipped to [0, 255] (minus 128 for int8). The ranges come from the
  whole call, so quantise a representative set at once, or pass `ranges`.
- "binary"/"ubinary": one bit per dimension (`x > 0`), packed 8 to a byte (minus 128 for binary).
- "float16": a plain cast; "float32": unchanged.
"""

from __future__ import annotations

import numpy as np

PRECISIONS = ("float32", "float16", "int8", "uint8", "binary", "ubinary")


def check_precision(precision: str) -> None:
    """Raise ValueError unless `precision` is one `encode` supports."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}")


def check_truncate_dim(truncate_dim: int | None, dim: int) -> None:
    """Raise ValueError unless `truncate_dim` is None or an integer in [1, dim]."""
    if truncate_dim is None:
        return
    if isinstance(truncate_dim, bool) or not isinstance(truncate_dim, int) or not 1 <= truncate_dim <= dim:
        raise ValueError(f"truncate_dim must be an integer from 1 to the model's dimension {dim}, got {truncate_dim!r}")


def quantization_ranges(embeddings: np.ndarray) -> np.ndarray:
    """Per-dimension `[min; max]` of `embeddings`: the `(2, dim)` ranges int8/uint8 quantisation uses."""
    embeddings = np.asarray(embeddings)
    if embeddings.ndim == 1 or embeddings.shape[0] == 1:
        raise ValueError(
            "cannot compute int8/uint8 quantization ranges from a single embedding; encode a representative set "
            "at once, or quantize with ranges=quantization_ranges(calibration_embeddings)"
        )
    return np.vstack((np.min(embeddings, axis=0), np.max(embeddings, axis=0)))


def quantize_embeddings(embeddings: np.ndarray, precision: str, ranges: np.ndarray | None = None) -> np.ndarray:
    """`embeddings` (float, `(n, dim)`) in `precision`; see the module docstring for what each precision means."""
    check_precision(precision)
    embeddings = np.asarray(embeddings)
    if embeddings.dtype in (np.int8, np.uint8):
        raise ValueError("embeddings to quantize must be float, not int8 or uint8")
    if embeddings.ndim == 2 and embeddings.shape[0] == 0:
        width = embeddings.shape[1] if precision.endswith("int8") else (embeddings.shape[1] + 7) // 8
        if precision in ("int8", "binary"):
            return np.zeros((0, width), dtype=np.int8)
        if precision in ("uint8", "ubinary"):
            return np.zeros((0, width), dtype=np.uint8)
    if precision == "float32":
        return embeddings.astype(np.float32)
    if precision == "float16":
        return embeddings.astype(np.float16)
    if precision.endswith("int8"):
        if ranges is None:
            ranges = quantization_ranges(embeddings)
        # The same operations in the same order (and float32 ranges) as sentence-transformers: equal bytes.
        ranges = np.asarray(ranges).astype(np.float32, copy=False)
        starts = ranges[0, :]
        steps = (ranges[1, :] - starts) / 255
        steps = np.where(steps == 0, 1, steps)
        levels = np.clip(np.floor((embeddings - starts) / steps), 0, 255)
        return levels.astype(np.uint8) if precision == "uint8" else (levels - 128).astype(np.int8)
    packed = np.packbits(embeddings > 0, axis=-1)
    return packed if precision == "ubinary" else (packed - 128).astype(np.int8)
