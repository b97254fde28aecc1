"""The numpy twin of `psp_hf.modeling`'s unknown-piece rule and `pool_bags`, for inference without torch.

Same layout as the torch functions: `flat_ids` holds the pieces of all sentences back to back and `offsets[i]` is
where sentence i starts. Tests check that both give the same numbers; training and the Hub remote code use the
torch versions.
"""

from __future__ import annotations

import contextlib
import sys

import numpy as np

# Gather at most this many table rows at once: the gathered block stays small enough to sit in cache.
_ROWS_PER_CHUNK = 4096
# Up to this many bags, one numpy reduction per bag beats sorting bags by length.
_FEW_BAGS = 8


def bag_lengths(offsets: np.ndarray, n_ids: int) -> np.ndarray:
    """Number of pieces of each bag."""
    lengths = np.empty(len(offsets), dtype=np.int64)
    if len(offsets):
        np.subtract(offsets[1:], offsets[:-1], out=lengths[:-1])
        lengths[-1] = n_ids - offsets[-1]
    return lengths


def apply_unknown_rule(
    flat_ids: np.ndarray, offsets: np.ndarray, unk_token_id: int, boundary_token_id: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Drop unknown pieces from each bag unless it has nothing else; a bag without content becomes one unknown.

    Content is any piece but the unknown one and, when given, the bare word-boundary piece that the tokenizer
    puts before a word it cannot segment: a sentence of only out-of-vocabulary characters is then the unknown
    piece, as the unknown rule says, not the boundary piece. Mirrors `psp_hf.modeling.apply_unknown_rule`.
    """
    n = len(offsets)
    lengths = bag_lengths(offsets, len(flat_ids))
    unknown = flat_ids == unk_token_id
    content = ~unknown
    if boundary_token_id is not None:
        content &= flat_ids != boundary_token_id
    if content.all() and lengths.all():  # the common case, answered without grouping by bag
        return flat_ids, offsets
    # The bag of each entry (np.repeat would do, but it holds the GIL while encode's threads run this).
    bag = np.searchsorted(offsets, np.arange(len(flat_ids)), side="right") - 1
    content_per_bag = np.bincount(bag[content], minlength=n)
    if not unknown.any() and (content_per_bag > 0).all():
        return flat_ids, offsets
    empty = content_per_bag == 0
    keep = ~unknown & ~empty[bag]
    new_lengths = np.bincount(bag[keep], minlength=n)
    new_lengths[empty] = 1
    new_offsets = np.zeros(n, dtype=offsets.dtype)
    np.cumsum(new_lengths[:-1], out=new_offsets[1:])
    ids = np.full(int(new_lengths.sum()), unk_token_id, dtype=flat_ids.dtype)
    kept_positions = np.ones(len(ids), dtype=bool)
    kept_positions[new_offsets[empty]] = False
    ids[kept_positions] = flat_ids[keep]
    return ids, new_offsets


# Below this many pieces numpy pools; above, torch's embedding_bag (one pass, threaded) pays for importing torch.
BULK_PIECES = 2_000_000


# From this many sentences on, importing torch (about a second) is repaid by its faster pooling.
BULK_SENTENCES = 100_000


def prepare_bulk(n_sentences: int) -> None:
    """Load torch for pooling when `n_sentences` is a bulk job and torch is installed (see `pool_bags_fast`)."""
    if n_sentences >= BULK_SENTENCES and "torch" not in sys.modules:
        with contextlib.suppress(ImportError):
            import torch  # noqa: F401


def pool_bags_fast(
    table: np.ndarray,
    flat_ids: np.ndarray,
    offsets: np.ndarray,
    piece_weights: np.ndarray | None = None,
    mode: str = "mean",
    out: np.ndarray | None = None,
) -> np.ndarray:
    """`pool_bags`, through torch's `embedding_bag` when torch is already loaded or the batch is large.

    Both give the same numbers for mean, max and sum (torch's embedding_bag adds each bag's rows in order, as
    the numpy code does); weighted means may differ in the last bit.
    """
    prepare_bulk(BULK_SENTENCES if len(flat_ids) >= BULK_PIECES else 0)
    if "torch" not in sys.modules:
        return pool_bags(table, flat_ids, offsets, piece_weights, mode, out)
    import torch

    ids, starts = torch.from_numpy(np.ascontiguousarray(flat_ids)), torch.from_numpy(np.ascontiguousarray(offsets))
    with torch.inference_mode():
        weights = None if piece_weights is None else torch.from_numpy(np.ascontiguousarray(piece_weights))
        pooled = torch.nn.functional.embedding_bag(
            ids,
            torch.from_numpy(table),
            offsets=starts,
            mode="sum" if weights is not None else mode,
            per_sample_weights=weights,
        )
        if weights is not None:
            totals = np.bincount(
                np.repeat(np.arange(len(offsets)), bag_lengths(offsets, len(flat_ids))),
                weights=piece_weights,
                minlength=len(offsets),
            )
            pooled /= torch.from_numpy(np.maximum(totals, 1e-12).astype(np.float32)).unsqueeze(1)
    if out is None:
        return pooled.numpy()
    out[:] = pooled.numpy()
    return out


def pool_bags(
    table: np.ndarray,
    flat_ids: np.ndarray,
    offsets: np.ndarray,
    piece_weights: np.ndarray | None = None,
    mode: str = "mean",
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Pool the rows `table[flat_ids]` per bag: `mode` ("mean", "max", "sum"), or with `piece_weights` (one weight
    per entry of `flat_ids`) their weighted mean. An empty bag pools to zeros, as in torch's `embedding_bag`.
    """
    if mode not in ("mean", "max", "sum"):
        raise ValueError(f"mode must be 'mean', 'max' or 'sum', got {mode!r}")
    n = len(offsets)
    if out is None:
        out = np.empty((n, table.shape[1]), dtype=np.float32)
    lengths = bag_lengths(offsets, len(flat_ids))
    if n <= _FEW_BAGS:
        bounds = [*offsets.tolist(), len(flat_ids)]
        for index in range(n):
            start, stop = bounds[index], bounds[index + 1]
            weights = None if piece_weights is None else piece_weights[start:stop]
            out[index] = _pool_one(table, flat_ids[start:stop], weights, mode)
        return out
    # Chunks of whole bags, each gathering about _ROWS_PER_CHUNK rows.
    ends = offsets + lengths
    first = 0
    while first < n:
        last = int(np.searchsorted(ends, offsets[first] + _ROWS_PER_CHUNK, side="right"))
        last = max(last, first + 1)
        _pool_chunk(table, flat_ids, offsets[first:last], lengths[first:last], piece_weights, mode, out[first:last])
        first = last
    return out


def _pool_one(table: np.ndarray, ids: np.ndarray, weights: np.ndarray | None, mode: str) -> np.ndarray:
    """One bag; numpy reduces the rows of a 2-D block along axis 0 one after another, as embedding_bag does."""
    if len(ids) == 0:
        return np.zeros(table.shape[1], dtype=np.float32)
    rows = table[ids]
    if weights is not None:
        weights = weights.astype(np.float32, copy=False)
        rows *= weights[:, None]
        return np.add.reduce(rows, axis=0) / np.maximum(np.add.reduce(weights), np.float32(1e-12))
    if mode == "max":
        return np.maximum.reduce(rows, axis=0)
    summed = np.add.reduce(rows, axis=0)
    return summed if mode == "sum" else summed / np.float32(len(ids))


def _pool_chunk(table, flat_ids, offsets, lengths, piece_weights, mode, out) -> None:
    start, stop = int(offsets[0]), int(offsets[-1] + lengths[-1])
    if start == stop:
        out[:] = 0.0
        return
    rows = table[flat_ids[start:stop]]
    weights = None
    if piece_weights is not None:
        weights = piece_weights[start:stop].astype(np.float32, copy=False)
        rows *= weights[:, None]
    # Bags longest first, so the bags still adding at step k are a prefix; each bag then adds its rows one by
    # one in order, exactly as torch's embedding_bag does (same rounding, same numbers).
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = lengths[order]
    first_rows = offsets[order] - start
    active = np.searchsorted(-sorted_lengths, -np.arange(1, int(sorted_lengths[0]) + 1), side="right")
    n_filled = int(active[0])
    accumulated = np.zeros((len(order), rows.shape[1]), dtype=np.float32)
    accumulated[:n_filled] = rows[first_rows[:n_filled]]
    combine = np.maximum if mode == "max" and weights is None else np.add
    for step in range(1, len(active)):
        count = int(active[step])
        combine(accumulated[:count], rows[first_rows[:count] + step], out=accumulated[:count])
    if weights is not None:
        totals = np.zeros(len(order), dtype=np.float32)
        totals[:n_filled] = weights[first_rows[:n_filled]]
        for step in range(1, len(active)):
            count = int(active[step])
            totals[:count] += weights[first_rows[:count] + step]
        accumulated /= np.maximum(totals, np.float32(1e-12))[:, None]
    elif mode == "mean":
        accumulated[:n_filled] /= sorted_lengths[:n_filled, None].astype(np.float32)
    out[order] = accumulated
