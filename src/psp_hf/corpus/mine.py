"""Nearest neighbours between embedded sets with Faiss, scored by ratio margin (bitext) or a cosine threshold.

Vectors are scaled to unit length, so inner product is cosine. The exact index is `IndexFlatIP`; from
`APPROX_FROM` vectors on (or when asked) an inverted-file index (`IndexIVFFlat`, trained on a sample) searches
`nprobe` of its lists only.
"""

from __future__ import annotations

import numpy as np

from ..inference.ratio_margin import ratio_margin

# From this many indexed vectors on, "auto" picks the approximate index.
APPROX_FROM = 500_000
_CHUNK = 65_536


def _faiss():
    try:
        import faiss
    except ImportError as error:
        raise ImportError(f"psp mine needs Faiss ({error}): pip install 'psp-hf[mine]'") from error
    return faiss


def _unit_chunks(embeddings: np.ndarray):
    faiss = _faiss()
    for start in range(0, len(embeddings), _CHUNK):
        block = np.array(embeddings[start : start + _CHUNK], dtype=np.float32, order="C")
        faiss.normalize_L2(block)
        yield block


def build_index(embeddings: np.ndarray, kind: str = "auto", nlist: int | None = None, nprobe: int = 32, seed: int = 0):
    """A Faiss inner-product index over the unit-length rows of `embeddings` (`kind`: auto, exact or approx)."""
    faiss = _faiss()
    if kind not in ("auto", "exact", "approx"):
        raise ValueError(f"index kind must be auto, exact or approx, got {kind!r}")
    n, dim = embeddings.shape
    if kind == "auto":
        kind = "approx" if n >= APPROX_FROM else "exact"
    if kind == "exact" or n < 2:
        index = faiss.IndexFlatIP(dim)
    else:
        nlist = nlist or max(1, min(int(np.sqrt(n)), n // 40))
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
        # k-means on a sample: 50 points a list is plenty for the centroids and keeps training fast.
        sample = np.random.default_rng(seed).choice(n, size=min(n, 50 * nlist), replace=False)
        index.train(np.concatenate(list(_unit_chunks(np.asarray(embeddings[np.sort(sample)])))))
        index.nprobe = min(nprobe, nlist)
    for block in _unit_chunks(embeddings):
        index.add(block)
    return index


def search(index, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Cosines `(n, k)` and ids `(n, k)` of each query's `k` nearest indexed vectors (id -1: none)."""
    k = min(k, index.ntotal)
    sims = np.empty((len(queries), k), dtype=np.float32)
    ids = np.empty((len(queries), k), dtype=np.int64)
    at = 0
    for block in _unit_chunks(queries):
        sims[at : at + len(block)], ids[at : at + len(block)] = index.search(block, k)
        at += len(block)
    # An approximate index may find fewer than k; those slots count as cosine 0 in neighbour means.
    sims[ids < 0] = 0.0
    return sims, ids


def _drop_self(sims: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Within one set: remove each row's own id from its k + 1 neighbours, keeping k."""
    own = ids == np.arange(len(ids))[:, None]
    # Rows where the vector itself was not returned (exact duplicates outrank it) drop their last neighbour.
    own[~own.any(axis=1), -1] = True
    keep = ~own
    return sims[keep].reshape(len(ids), -1)[:, :k], ids[keep].reshape(len(ids), -1)[:, :k]


def neighbours(source, target, k: int, index_kind: str = "auto", nprobe: int = 32, need: str = "both"):
    """k nearest neighbours source -> target and target -> source (`target` None: within `source`, self excluded).

    `need="forward"`: the target -> source search covers only the targets found as source neighbours (the other
    rows of its result stay empty); `need="backward"` likewise the other way. Margins need no more than that.
    """
    if target is None:
        index = build_index(source, index_kind, nprobe=nprobe)
        forward = _drop_self(*search(index, source, k + 1), k)
        return forward, forward
    target_index = build_index(target, index_kind, nprobe=nprobe)
    forward = search(target_index, source, k) if need != "backward" else None
    source_index = build_index(source, index_kind, nprobe=nprobe)
    if need == "forward":
        return forward, _search_rows(source_index, target, np.unique(forward[1][forward[1] >= 0]), k)
    backward = search(source_index, target, k)
    if need == "backward":
        return _search_rows(target_index, source, np.unique(backward[1][backward[1] >= 0]), k), backward
    return forward, backward


def _search_rows(index, queries, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """`search` for the query rows `rows` only; the other rows get cosine 0 and id -1."""
    k = min(k, index.ntotal)
    sims, ids = np.zeros((len(queries), k), dtype=np.float32), np.full((len(queries), k), -1, dtype=np.int64)
    sims[rows], ids[rows] = search(index, np.asarray(queries[rows]), k)
    return sims, ids


def mine_margin(source, target=None, k: int = 4, retrieval: str = "max", index_kind: str = "auto", nprobe: int = 32):
    """Bitext candidates by ratio margin: `(source_ids, target_ids, cosine, margin)`, best margin first.

    retrieval: `forward` (best target for each source), `backward` (best source for each target), `max` (both,
    each pair once), `intersect` (pairs that are each other's best).
    """
    if retrieval not in ("forward", "backward", "max", "intersect"):
        raise ValueError(f"retrieval must be forward, backward, max or intersect, got {retrieval!r}")
    need = retrieval if retrieval in ("forward", "backward") else "both"
    (f_sims, f_ids), (b_sims, b_ids) = neighbours(source, target, k, index_kind, nprobe, need)
    mean_x, mean_y = f_sims.mean(axis=1), b_sims.mean(axis=1)
    pairs = []
    if retrieval != "backward":
        margins = np.where(f_ids >= 0, ratio_margin(f_sims, mean_x[:, None], mean_y[f_ids]), -np.inf)
        best = margins.argmax(axis=1)
        rows = np.arange(len(f_ids))
        pairs.append((rows, f_ids[rows, best], f_sims[rows, best], margins[rows, best]))
    if retrieval != "forward":
        margins = np.where(b_ids >= 0, ratio_margin(b_sims, mean_y[:, None], mean_x[b_ids]), -np.inf)
        best = margins.argmax(axis=1)
        rows = np.arange(len(b_ids))
        pairs.append((b_ids[rows, best], rows, b_sims[rows, best], margins[rows, best]))
    if retrieval == "intersect":
        # pairs[1][0][t] is the best source of target t: keep the forward pairs it agrees with.
        keep = pairs[1][0][pairs[0][1]] == pairs[0][0]
        pairs = [tuple(column[keep] for column in pairs[0])]
    src, tgt, cos, margin = (np.concatenate(column) for column in zip(*pairs, strict=True))
    if target is None:  # within one set, (i, j) and (j, i) are the same pair
        src, tgt = np.minimum(src, tgt), np.maximum(src, tgt)
    order = np.lexsort((tgt, src, -margin))
    src, tgt, cos, margin = src[order], tgt[order], cos[order], margin[order]
    _, first = np.unique(src * (max(len(b_ids), len(f_ids)) + 1) + tgt, return_index=True)
    first = np.sort(first)
    return src[first], tgt[first], cos[first], margin[first]


def mine_threshold(source, target=None, threshold: float = 0.9, k: int = 10, index_kind: str = "auto", nprobe=32):
    """Near-duplicates: pairs among each source row's k nearest with cosine >= threshold, highest first.

    Returns `(source_ids, target_ids, cosine)`; within one set each pair appears once, as (smaller, larger id).
    """
    (sims, ids), _ = neighbours(source, None if target is None else target, k, index_kind, nprobe)
    rows, columns = np.nonzero((sims >= threshold) & (ids >= 0))
    src, tgt, cos = rows.astype(np.int64), ids[rows, columns], sims[rows, columns]
    if target is None:
        src, tgt = np.minimum(src, tgt), np.maximum(src, tgt)
        _, first = np.unique(src * (len(ids) + 1) + tgt, return_index=True)
        src, tgt, cos = src[first], tgt[first], cos[first]
    order = np.lexsort((tgt, src, -cos))
    return src[order], tgt[order], cos[order]
