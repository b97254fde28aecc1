"""Teacher-mined paraphrase pairs: nearest neighbours by teacher cosine within the unlabelled distillation corpus.

Each sentence is paired with its nearest other sentence when their teacher cosine reaches `threshold`; pairs
that are near-copies (`filters.trigram_overlap`, ParaNMT's measure that `psp prepare` uses too, at or above
`max_trigram_overlap`, or equal `distill_corpus.normalize_key`) are dropped, and each unordered pair is kept once.
Corpus sentences have at least three words (`distill_corpus.CleaningRules`), so every one has a trigram to
compare. Small corpora are searched exactly with blocked matrix products; large ones through a coarse k-means
index (each sentence is compared with the members of its `nprobe` nearest clusters), which costs about
`N * nprobe * N / nlist` dot products instead of `N * N`.

Run: ``psp prepare mine-pairs --cache CACHE -o PAIRS.tsv`` (`mine_cache`). The output (`write_pairs`) is a
TSV with the header ``sentence1  sentence2  score`` that the training loop reads as paraphrase pairs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..inference.similarity import unit_rows
from ..io.writing import atomic_path
from .distill_corpus import normalize_key
from .filters import trigram_overlap


def nearest_neighbours_exact(embeddings: np.ndarray, block_size: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """For every row, the index and cosine of its most similar other row (blocked `X @ X.T`)."""
    x = unit_rows(embeddings)
    n = len(x)
    best = np.full(n, -1, dtype=np.int64)
    score = np.full(n, -np.inf, dtype=np.float32)
    for start in range(0, n, block_size):
        sims = x[start : start + block_size] @ x.T
        rows = np.arange(sims.shape[0])
        sims[rows, start + rows] = -np.inf  # never oneself
        best[start : start + len(rows)] = sims.argmax(axis=1)
        score[start : start + len(rows)] = sims[rows, best[start : start + len(rows)]]
    return best, score


def _group_by(keys: np.ndarray, count: int, values: np.ndarray) -> list[np.ndarray]:
    """`values` split into `count` groups by `keys` (0..count-1), each group in its original order."""
    order = np.argsort(keys, kind="stable")
    return np.split(values[order], np.cumsum(np.bincount(keys, minlength=count))[:-1])


def nearest_neighbours_clustered(
    embeddings: np.ndarray, nlist: int, nprobe: int = 2, seed: int = 0, block_size: int = 4096
) -> tuple[np.ndarray, np.ndarray]:
    """Approximate nearest other row: k-means into `nlist` clusters, search the `nprobe` nearest clusters."""
    from sklearn.cluster import MiniBatchKMeans

    x = unit_rows(embeddings)
    n = len(x)
    nlist = max(1, min(nlist, n))
    nprobe = max(1, min(nprobe, nlist))
    kmeans = MiniBatchKMeans(n_clusters=nlist, random_state=seed, batch_size=8192, n_init=1, max_iter=20)
    kmeans.fit(x[np.random.default_rng(seed).permutation(n)[: max(nlist * 64, 20_000)]])
    centroids = unit_rows(kmeans.cluster_centers_)
    # Each row's nprobe nearest clusters, found blockwise to bound memory.
    probes = np.empty((n, nprobe), dtype=np.int64)
    for start in range(0, n, block_size):
        sims = x[start : start + block_size] @ centroids.T
        probes[start : start + len(sims)] = np.argsort(-sims, axis=1)[:, :nprobe]
    members = _group_by(probes[:, 0], nlist, np.arange(n))  # rows by their nearest cluster
    queries_by_cluster = _group_by(probes.ravel(), nlist, np.repeat(np.arange(n), nprobe))
    best = np.full(n, -1, dtype=np.int64)
    score = np.full(n, -np.inf, dtype=np.float32)
    # Queries grouped by probed cluster: one matrix product per (cluster, its queries).
    for cluster in range(nlist):
        candidates = members[cluster]
        if len(candidates) == 0:
            continue
        queries = queries_by_cluster[cluster]
        for start in range(0, len(queries), block_size):
            rows = queries[start : start + block_size]
            sims = x[rows] @ x[candidates].T
            sims[rows[:, None] == candidates[None, :]] = -np.inf
            top = sims.argmax(axis=1)
            top_score = sims[np.arange(len(rows)), top]
            better = top_score > score[rows]
            score[rows[better]] = top_score[better]
            best[rows[better]] = candidates[top[better]]
    return best, score


@dataclass
class MinedPairs:
    """Mined pairs and how many candidates each filter removed."""

    pairs: list[tuple[str, str, float]]
    below_threshold: int
    near_copies: int
    duplicates: int


def mine_pairs(
    sentences: list[str],
    embeddings: np.ndarray,
    threshold: float = 0.8,
    max_trigram_overlap: float = 0.5,
    exact_limit: int = 50_000,
    nlist: int | None = None,
    nprobe: int = 2,
    seed: int = 0,
) -> MinedPairs:
    """Paraphrase pairs from nearest teacher neighbours (see the module docstring).

    Corpora up to `exact_limit` sentences are searched exactly; larger ones with `nlist` clusters
    (default `4 * sqrt(N)`).
    """
    if len(sentences) != len(embeddings):
        raise ValueError(f"{len(sentences)} sentences but {len(embeddings)} embeddings")
    if len(sentences) < 2:
        return MinedPairs([], 0, 0, 0)
    if len(sentences) <= exact_limit:
        best, score = nearest_neighbours_exact(embeddings)
    else:
        nlist = nlist or int(4 * np.sqrt(len(sentences)))
        best, score = nearest_neighbours_clustered(embeddings, nlist=nlist, nprobe=nprobe, seed=seed)
    pairs: list[tuple[str, str, float]] = []
    seen: set[tuple[int, int]] = set()
    below = near_copies = duplicates = 0
    for i in np.argsort(-score, kind="stable"):
        j = int(best[i])
        if j < 0 or score[i] < threshold:
            below += 1
            continue
        key = (min(i, j), max(i, j))
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        a, b = sentences[i], sentences[j]
        if normalize_key(a) == normalize_key(b) or trigram_overlap(a, b) >= max_trigram_overlap:
            near_copies += 1
            continue
        pairs.append((a, b, float(score[i])))
    return MinedPairs(pairs, below, near_copies, duplicates)


def write_pairs(pairs: list[tuple[str, str, float]], path: str | os.PathLike) -> Path:
    """A TSV with the header ``sentence1  sentence2  score`` (tabs/newlines inside sentences become spaces)."""
    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        handle.write("sentence1\tsentence2\tscore\n")
        for a, b, score in pairs:
            a, b = (" ".join(s.split()) for s in (a, b))
            handle.write(f"{a}\t{b}\t{score:.4f}\n")
    return path


def mine_cache(
    cache: str | os.PathLike,
    out: str | os.PathLike,
    threshold: float = 0.8,
    max_trigram_overlap: float = 0.5,
    nprobe: int = 2,
) -> tuple[MinedPairs, int]:
    """Mine pairs from a teacher cache (`teacher_labels.TeacherCache`) and write them to `out` as TSV.

    Returns the mined pairs and the number of sentences searched.
    """
    from ..teachers.labels import TeacherCache

    sentences, embeddings = TeacherCache(cache).load()
    mined = mine_pairs(
        sentences, embeddings, threshold=threshold, max_trigram_overlap=max_trigram_overlap, nprobe=nprobe
    )
    write_pairs(mined.pairs, out)
    return mined, len(sentences)
