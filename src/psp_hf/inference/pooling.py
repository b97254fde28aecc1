"""The numpy twin of `psp_hf.modeling`'s unknown-piece rule and `pool_bags`, for inference without torch, and
`pool_bags_fast`, which encode calls: psp's compiled kernel, else torch's `embedding_bag`, else numpy.

Same layout as the torch functions: `flat_ids` holds the pieces of all sentences back to back and `offsets[i]` is
where sentence i starts. Tests check that all give the same numbers; training and the Hub remote code use the
torch versions.
"""

from __future__ import annotations

import contextlib
import logging
import sys

import numpy as np

from . import intra_op
from .kernels import load_kernel

logger = logging.getLogger(__name__)

_kernel = load_kernel("_pooling")  # one pass per batch without the GIL; None: numpy or torch pool instead
_KERNEL_MODES = {"mean": 0, "sum": 1, "max": 2}

# Gather at most this many bytes of table rows at once: the gathered block stays small enough to sit in cache.
_BLOCK_BYTES = 1 << 20
# Pool a batch in parts of about this many pieces: bounds the index arrays of a very large batch.
_CHUNK_PIECES = 1 << 20
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
    if _kernel is not None and flat_ids.dtype == offsets.dtype == np.int64:  # one pass, without the GIL
        ids, new_offsets = np.empty(len(flat_ids) + len(offsets), dtype=np.int64), np.empty_like(offsets)
        boundary = -1 if boundary_token_id is None else boundary_token_id
        count = _kernel.apply_unknown_rule(flat_ids, offsets, unk_token_id, boundary, ids, new_offsets)
        return ids[:count], new_offsets
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
    """Load torch for pooling when `n_sentences` is a bulk job, torch is installed and the kernel is not (see
    `pool_bags_fast`)."""
    if _kernel is None and n_sentences >= BULK_SENTENCES and "torch" not in sys.modules:
        with contextlib.suppress(ImportError):
            import torch  # noqa: F401


def _pooling_torch():
    """`(torch, OpenMP runtime or None)` when torch pools now, else None: torch is loaded and its calls can be kept
    to one thread (where the runtime cannot be reached, only if the process runs torch on one thread)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    library = intra_op.runtime(torch)
    if library is None and torch.get_num_threads() != 1:
        return None
    return torch, library


def backend() -> str:
    """What `pool_bags_fast` pools float32 tables with now: "kernel" (psp's compiled kernel), "torch" (its
    `embedding_bag`: torch is loaded and the kernel was not built) or "numpy". The first two release the GIL for a
    whole batch; numpy holds it between its calls."""
    if _kernel is not None:
        return "kernel"
    return "torch" if _pooling_torch() is not None else "numpy"


def pool_bags_fast(
    table: np.ndarray,
    flat_ids: np.ndarray,
    offsets: np.ndarray,
    piece_weights: np.ndarray | None = None,
    mode: str = "mean",
    out: np.ndarray | None = None,
) -> np.ndarray:
    """`pool_bags`, through psp's compiled kernel; without it, through torch's `embedding_bag` when torch is already
    loaded or the batch is large.

    All give the same numbers for mean, max and sum (each adds a bag's rows in order, in float32); weighted means
    may differ from torch's in the last bit. The kernel and torch run on the calling thread only (torch: see
    `psp_hf.inference.intra_op`) and release the GIL for the whole call: threads pooling side by side overlap.
    """
    if _kernel is not None and table.dtype == np.float32 and table.flags.c_contiguous:
        return _pool_with_kernel(table, flat_ids, offsets, piece_weights, mode, out)
    prepare_bulk(BULK_SENTENCES if len(flat_ids) >= BULK_PIECES else 0)
    pooling = _pooling_torch()
    if pooling is None:
        return pool_bags(table, flat_ids, offsets, piece_weights, mode, out)
    torch, library = pooling
    with intra_op.OneThread(torch, library) if library is not None else contextlib.nullcontext():
        return _pool_with_torch(torch, table, flat_ids, offsets, piece_weights, mode, out)


def _pool_with_kernel(table, flat_ids, offsets, piece_weights, mode, out) -> np.ndarray:
    if mode not in _KERNEL_MODES:
        raise ValueError(f"mode must be 'mean', 'max' or 'sum', got {mode!r}")
    shape = (len(offsets), table.shape[1])
    target = out
    if out is None or out.dtype != np.float32 or not out.flags.c_contiguous or out.shape != shape:
        target = np.empty(shape, dtype=np.float32)
    weights = None if piece_weights is None else np.ascontiguousarray(piece_weights, dtype=np.float32)
    ids = np.ascontiguousarray(flat_ids, dtype=np.int64)
    _kernel.pool(table, ids, np.ascontiguousarray(offsets, dtype=np.int64), target, _KERNEL_MODES[mode], weights)
    if out is not None and target is not out:
        out[:] = target
        return out
    return target


def _pool_with_torch(torch, table, flat_ids, offsets, piece_weights, mode, out) -> np.ndarray:
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
    # Chunks of whole bags of about _CHUNK_PIECES pieces: bounds the index arrays of a very large batch.
    ends = offsets + lengths
    first = 0
    while first < n:
        last = max(first + 1, int(np.searchsorted(ends, offsets[first] + _CHUNK_PIECES, side="right")))
        start, stop = int(offsets[first]), int(ends[last - 1])
        weights = None if piece_weights is None else piece_weights[start:stop]
        _pool_chunk(table, flat_ids[start:stop], offsets[first:last] - start, weights, mode, out[first:last])
        first = last
    return out


def _pool_chunk(table, flat_ids, offsets, piece_weights, mode, out) -> None:
    """`pool_bags` of one chunk (offsets[0] == 0) into `out`.

    Bags of equal length go together: the chunk's ids are laid out group by group as (length, bags) blocks, and
    each block's rows are gathered (a cache-sized part at a time) and reduced along the length axis: numpy adds a
    bag's rows one after another in order, as embedding_bag does (same rounding, same numbers). A batch is then
    two numpy calls per distinct sentence length, each releasing the GIL, instead of one per piece position.
    """
    n, dim = len(offsets), table.shape[1]
    if len(flat_ids) and (flat_ids.min() < 0 or flat_ids.max() >= len(table)):  # the gather does not check
        raise IndexError(f"piece ids must be in [0, {len(table)}), got {flat_ids.min()}..{flat_ids.max()}")
    order, sorted_lengths, firsts, bases, destination = _length_groups(offsets, len(flat_ids))
    ids = np.empty_like(flat_ids)
    ids[destination] = flat_ids
    weights = None
    if piece_weights is not None:
        weights = np.empty(len(flat_ids), dtype=np.float32)
        weights[destination] = piece_weights
    block_rows = max(1, _BLOCK_BYTES // (4 * dim))
    rows_of = _row_gatherer(table, max(block_rows, int(sorted_lengths[-1]) if n else 1))
    pooled = np.empty((n, dim), dtype=np.float32)
    totals = None if weights is None else np.empty(n, dtype=np.float32)
    reduce = np.maximum.reduce if mode == "max" and weights is None else np.add.reduce
    bounds = [*firsts.tolist(), n]
    for group, length in enumerate(sorted_lengths[firsts].tolist()):
        first, count = bounds[group], bounds[group + 1] - bounds[group]
        if length == 0:
            pooled[first : first + count] = 0.0
            if totals is not None:
                totals[first : first + count] = 1.0
            continue
        block = slice(int(bases[first]), int(bases[first]) + length * count)
        group_ids = ids[block].reshape(length, count)
        step = max(1, block_rows // length)
        for begin in range(0, count, step):
            part = slice(begin, min(begin + step, count))
            rows = rows_of(group_ids[:, part])
            if weights is not None:
                rows *= weights[block].reshape(length, count)[:, part, None]
            reduce(rows, axis=0, out=pooled[first + part.start : first + part.stop])
        if totals is not None:
            np.add.reduce(weights[block].reshape(length, count), axis=0, out=totals[first : first + count])
    if totals is not None:
        pooled /= np.maximum(totals, np.float32(1e-12))[:, None]
    elif mode == "mean":
        pooled /= np.maximum(sorted_lengths, 1).astype(np.float32)[:, None]
    out[order] = pooled


def _length_groups(offsets: np.ndarray, n_ids: int) -> tuple[np.ndarray, ...]:
    """The bags sorted by length (stable `order`, `sorted_lengths`), where each length group starts in that order
    (`firsts`), where each sorted bag's group starts in the new layout (`bases`, by sorted bag), and where each
    piece goes in it (`destination`): piece k of the bag at sorted position r, in a group of `count` bags that
    starts at sorted position f and at `base` in the layout, goes to base + k * count + (r - f)."""
    n = len(offsets)
    lengths = bag_lengths(offsets, n_ids)
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    firsts = np.flatnonzero(np.diff(sorted_lengths, prepend=-1))
    counts = np.diff(firsts, append=n)
    bases = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sorted_lengths, out=bases[1:])
    group_of_sorted = np.repeat(np.arange(len(firsts)), counts)  # n entries: small next to the pieces
    count_of_bag = np.empty(n, dtype=np.int64)
    count_of_bag[order] = counts[group_of_sorted]
    shift = np.empty(n, dtype=np.int64)
    shift[order] = bases[firsts][group_of_sorted] + np.arange(n) - firsts[group_of_sorted]
    positions = np.arange(n_ids)
    bag = np.searchsorted(offsets, positions, side="right") - 1  # np.repeat would hold the GIL for this one
    destination = (shift - offsets * count_of_bag)[bag] + positions * count_of_bag[bag]
    return order, sorted_lengths, firsts, bases, destination


def _row_gatherer(table: np.ndarray, capacity: int):
    """`ids -> table[ids]` (shape `ids.shape + (dim,)`, at most `capacity` ids), written into one buffer that the
    next call reuses. Rows are taken as single opaque items, which copies about twice as fast as numpy's
    float-by-float fancy indexing, and with `mode="clip"`, which numpy does not buffer and does not check index by
    index (twice as fast again); the ids were checked against the table once, by the caller."""
    dim = table.shape[1]
    if not table.flags.c_contiguous or table.dtype != np.float32:
        return table.__getitem__
    rows = table.view(np.dtype((np.void, 4 * dim))).reshape(-1)
    buffer = np.empty(capacity, dtype=rows.dtype)

    def gather(ids: np.ndarray) -> np.ndarray:
        taken = buffer[: ids.size].reshape(ids.shape)
        np.take(rows, ids, mode="clip", out=taken)
        return taken.view(np.float32).reshape(*ids.shape, dim)

    return gather


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
