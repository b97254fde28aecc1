"""The teacher side of training: the labelled distillation corpus as a stream of (sentence, teacher vector) batches.

`TeacherCorpus` reads a `psp_hf.teachers.labels.TeacherCache` once: the sentences, and their teacher vectors kept
as float16 (384-d MiniLM labels of 430k sentences take 330 MB). For the distillation loss the sentences are
tokenized once into flat arrays, and a batch is gathered from them with numpy indexing. Each epoch of the corpus is
a seeded permutation (seed, epoch); with several processes every process takes an equal share of it (rank
`r` gets positions r, r + W, ...; the few rows left over by n % W wait for another epoch), so every process takes
the same number of distillation steps. The position inside the epoch is a row count, which is all a checkpoint
needs to continue exactly.

`--corpus-weights SOURCE=W,...` changes how often each source of the corpus is drawn in one pass: a sentence of a
source of weight W comes floor(W) times, and once more with probability W - floor(W) (drawn once per run, seeded),
so 2 doubles a source and 0.5 keeps a fixed half of it. The sources are those of the corpus the cache was labelled
from (`psp prepare distill-corpus`'s `sentences.parquet`, named in the cache's meta.json).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...data.distill_corpus import evaluation_matches
from ...errors import PSPInputError
from ...teachers.combine import WHITEN_SHRINK, transform_rows
from ...teachers.labels import CORPUS_REPORT


@dataclass
class TokenizedCorpus:
    """All corpus sentences tokenized once: piece ids back to back, with each sentence's start and length."""

    flat: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    @classmethod
    def build(cls, encoder, sentences: list[str], batch_size: int = 65536) -> TokenizedCorpus:
        """Tokenize `sentences` with `encoder` (a `PSPEncoder`)."""
        flats, lengths = [], []
        for start in range(0, len(sentences), batch_size):
            ids, offsets = encoder.tokenize(sentences[start : start + batch_size])
            ids, offsets = ids.numpy(), offsets.numpy()
            flats.append(ids)
            lengths.append(np.diff(offsets, append=len(ids)))
        flat = np.concatenate(flats)
        length = np.concatenate(lengths)
        starts = np.zeros(len(length), dtype=np.int64)
        np.cumsum(length[:-1], out=starts[1:])
        return cls(flat, starts, length)

    def batch(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """`(flat_ids, offsets)` of the sentences `rows`, in that order (vectorised gather)."""
        lengths = self.lengths[rows]
        offsets = np.zeros(len(rows), dtype=np.int64)
        np.cumsum(lengths[:-1], out=offsets[1:])
        positions = np.repeat(self.starts[rows] - offsets, lengths) + np.arange(int(lengths.sum()))
        return torch.from_numpy(self.flat[positions]), torch.from_numpy(offsets)


def parse_corpus_weights(text: str | None) -> dict[str, float]:
    """`--corpus-weights` ("wikipedia-2015=0.5,wordnet-glosses=2") as {source: weight}."""
    weights: dict[str, float] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, _, value = item.partition("=")
        try:
            weight = float(value)
        except ValueError:
            weight = -1.0
        if not name.strip() or weight < 0:
            raise PSPInputError(f"--corpus-weights {text!r}: give SOURCE=WEIGHT pairs, weights >= 0 (bad: {item!r})")
        weights[name.strip()] = weight
    return weights


def corpus_sources(cache_dir: str | os.PathLike, meta: dict, sentences: Sequence[str]) -> list[str]:
    """The source of each cached sentence, from the corpus that the cache's meta (`meta["corpus"]`) names."""
    import pyarrow.parquet as pq

    corpus = meta.get("corpus")
    parquet = Path(corpus) / "sentences.parquet" if corpus else None
    if parquet is None or not parquet.is_file():
        raise PSPInputError(
            f"--corpus-weights: the corpus the cache {cache_dir} was labelled from is needed for the sources "
            f"({parquet or 'meta.json names no corpus'} not found)"
        )
    table = pq.read_table(parquet, columns=["sentence", "source"])
    source_of = dict(zip(table.column("sentence").to_pylist(), table.column("source").to_pylist(), strict=True))
    return [source_of.get(sentence, "unknown") for sentence in sentences]


def weighted_rows(sources: Sequence[str], weights: dict[str, float], seed: int) -> np.ndarray:
    """The rows of one pass under `weights` (a source not named keeps weight 1), in row order."""
    names = sorted(set(sources))
    unknown = sorted(set(weights) - set(names))
    if unknown:
        known = ", ".join(names)
        raise PSPInputError(f"--corpus-weights: no source {', '.join(unknown)} in the corpus (it has {known})")
    weight = np.fromiter((weights.get(source, 1.0) for source in sources), dtype=np.float64, count=len(sources))
    whole = np.floor(weight).astype(np.int64)
    extra = np.random.default_rng([seed, 1 << 20]).random(len(weight)) < weight - whole
    counts = whole + extra
    if counts.sum() == 0:
        raise PSPInputError("--corpus-weights: every source has weight 0, nothing is left to distil")
    return np.repeat(np.arange(len(weight)), counts)


class TeacherCorpus:
    """Sentences and float16 teacher vectors of a cache; `tokenize()` prepares it for distillation batches."""

    def __init__(
        self,
        cache_dir: str | os.PathLike,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        weights: dict[str, float] | None = None,
    ):
        from ...teachers.labels import TeacherCache

        cache = TeacherCache(cache_dir)
        meta = cache.meta()
        if meta is None or not cache.chunk_files():
            raise PSPInputError(
                f"--teacher-cache {cache_dir}: no teacher labels there (run psp prepare "
                "label --corpus CORPUS --cache FOLDER first)"
            )
        self.directory = Path(cache_dir)
        self.meta = meta
        self.sentences, self.vectors = cache.load(dtype=np.float16)
        self.teacher = str(meta.get("teacher", "unknown"))
        self.dim = int(self.vectors.shape[1])
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        # One pass's rows: every row once, or each source as often as --corpus-weights says.
        self.pass_rows = None
        if weights:
            self.pass_rows = weighted_rows(corpus_sources(cache_dir, meta, self.sentences), weights, seed)
        self.pass_size = len(self.sentences) if self.pass_rows is None else len(self.pass_rows)
        self.shard_size = self.pass_size // world_size
        if self.shard_size < 1:
            raise PSPInputError(
                f"--teacher-cache {cache_dir}: {len(self.sentences)} sentences for {world_size} processes"
            )
        self.tokens = None
        self._index: dict[str, int] | None = None
        self._order_epoch: int | None = None
        self._order: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.sentences)

    def transform(self, kind: str, shrink: float = WHITEN_SHRINK) -> None:
        """Distil toward the vectors centred or whitened over the corpus (`--teacher-transform`)."""
        self.vectors = transform_rows(self.vectors, kind, shrink)

    # ------------------------------------------------------------------------------------------ batches
    def tokenize(self, encoder) -> None:
        """Tokenize every sentence once with `encoder` (a `PSPEncoder`)."""
        self.tokens = TokenizedCorpus.build(encoder, self.sentences)

    def steps_per_epoch(self, batch_size: int) -> int:
        """Distillation batches in one pass over this process's share."""
        return math.ceil(self.shard_size / batch_size)

    def shard(self, epoch: int) -> np.ndarray:
        """Row numbers of this process's share of `epoch`, in order (a seeded permutation)."""
        if self._order_epoch != epoch:
            order = np.random.default_rng([self.seed, epoch]).permutation(self.pass_size)
            if self.pass_rows is not None:
                order = self.pass_rows[order]
            self._order = order[self.rank :: self.world_size][: self.shard_size]
            self._order_epoch = epoch
        return self._order

    def rows(self, epoch: int, position: int, batch_size: int) -> np.ndarray:
        """The next batch of rows of `epoch` after `position` rows of this process's share."""
        return self.shard(epoch)[position : position + batch_size]

    def batch(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`(flat_ids, offsets, teacher vectors as float32)` of the sentences `rows`."""
        if self.tokens is None:
            raise RuntimeError("TeacherCorpus.tokenize() must be called before batch()")
        flat_ids, offsets = self.tokens.batch(rows)
        return flat_ids, offsets, torch.from_numpy(self.vectors[rows].astype(np.float32))

    # ------------------------------------------------------------------------------------------ lookups
    def lookup(self, sentences: Sequence[str]) -> torch.Tensor:
        """Teacher vectors of `sentences` as float32 `(len, dim)`; NaN rows for sentences the cache lacks."""
        if self._index is None:
            self._index = {text: row for row, text in enumerate(self.sentences)}
        index = self._index
        rows = np.fromiter((index.get(s, -1) for s in sentences), dtype=np.int64, count=len(sentences))
        out = self.vectors[np.maximum(rows, 0)].astype(np.float32)
        out[rows < 0] = np.nan
        return torch.from_numpy(out)

    # ------------------------------------------------------------------------------------------ provenance
    def text_info(self) -> dict:
        """Teacher, corpus size and text sources, for the training info and the model card."""
        info = {"teacher": self.teacher, "teacher_dim": self.dim, "corpus_sentences": len(self.sentences)}
        report = corpus_report(self.directory)
        info["training_text"] = describe_sources(report, len(self.sentences), self.directory)
        return info


def corpus_report(cache_dir: str | os.PathLike) -> dict | None:
    """The corpus's `report.json` (from `psp_hf.data.distill_corpus.write_corpus`) found with the cache, or None.

    Looked for in the cache folder (`corpus-report.json`, copied there when labelling), in the corpus folder the
    cache's meta names, and in a sibling folder holding a corpus (`report.json` beside `sentences.parquet`).
    """
    cache_dir = Path(cache_dir)
    candidates = [cache_dir / CORPUS_REPORT]
    meta_path = cache_dir / "meta.json"
    if meta_path.is_file():
        corpus = json.loads(meta_path.read_text(encoding="utf-8")).get("corpus")
        if corpus:
            corpus_path = Path(corpus)
            candidates.append((corpus_path if corpus_path.is_dir() else corpus_path.parent) / "report.json")
    if cache_dir.parent.is_dir():
        candidates += sorted(
            path / "report.json"
            for path in cache_dir.parent.iterdir()
            if path.is_dir() and (path / "sentences.parquet").is_file()
        )
    for path in candidates:
        if path.is_file():
            try:
                report = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                continue
            if isinstance(report, dict) and "sources" in report:
                return report
    return None


def describe_sources(report: dict | None, corpus_sentences: int, cache_dir: str | os.PathLike) -> str:
    """One line naming the corpus's sources with their kept counts and licences (or the cache folder's name)."""
    if not report:
        return f"{corpus_sentences:,} unlabelled sentences (teacher cache {Path(cache_dir).name})"
    parts = []
    for name, counts in report.get("sources", {}).items():
        kept = counts.get("kept", 0) if isinstance(counts, dict) else 0
        if not kept:
            continue
        licence = counts.get("license") if isinstance(counts, dict) else None
        parts.append(f"{name} {kept:,}" + (f" ({licence})" if licence else ""))
    excluded = sum(
        evaluation_matches(entry) for entry in report.get("evaluation_sets", {}).values() if isinstance(entry, dict)
    )
    total = report.get("total_sentences")
    # The cache may hold labels for part of the corpus only (labelling is resumable); the counts are the corpus's.
    of_corpus = f" of a corpus of {total:,}" if isinstance(total, int) and total != corpus_sentences else ""
    text = f"{corpus_sentences:,} unlabelled English sentences{of_corpus}: " + "; ".join(parts)
    if report.get("evaluation_sets"):
        text += f"; evaluation-set sentences removed by normalised exact match ({excluded:,} matches)"
    return text
