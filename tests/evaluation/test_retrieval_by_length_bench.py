"""bench/retrieval_by_length.py: which pairs count as errors, the length buckets, and PUD's file checks."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from bench_scripts import bench_script


def bench():
    return bench_script("retrieval_by_length")


class TableModel:
    """Encodes each sentence as the row the test gave it."""

    def __init__(self, rows: dict[str, list[float]]):
        self.rows = rows

    def encode(self, sentences, batch_size=32, normalize_embeddings=True):
        vectors = np.array([self.rows[s] for s in sentences], dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_a_pair_is_an_error_when_either_direction_misses():
    model = TableModel(
        {
            "x0": [1, 0, 0], "e0": [1, 0, 0],          # both directions right
            "x1": [0, 1, 0], "e1": [0, 0.6, 0.8],      # x1 -> e1, but e1 -> x2 (one direction misses)
            "x2": [0, 0.5, 0.87], "e2": [1, 0.1, 0],   # x2 -> e1 and e2 -> x0: both miss
        }
    )  # fmt: skip
    errors = bench()._errors(model, ["x0", "x1", "x2"], ["e0", "e1", "e2"], batch_size=2)
    assert errors.tolist() == [False, True, True]


def test_buckets_cover_every_sentence_once_and_skip_empty_ones():
    words = np.array([1, 4, 5, 6, 7, 30])
    buckets = list(bench()._buckets(words))
    assert [(low, high) for low, high, _ in buckets] == [(1, 4), (5, 6), (7, 9), (21, None)]
    assert sum(mask.sum() for _, _, mask in buckets) == len(words)
    assert np.all(sum(mask.astype(int) for _, _, mask in buckets) == 1)


def test_pud_reader_skips_the_header_and_names_a_bad_line(tmp_path):
    folder = tmp_path / "bitext" / "ud-pud"
    folder.mkdir(parents=True)
    with gzip.open(folder / "tr-en.tsv.gz", "wt", encoding="utf-8") as handle:
        handle.write("tr\ten\nbir\tone\niki\ttwo\n")
    assert bench().read_pud(tmp_path, "tr") == (["bir", "iki"], ["one", "two"])
    with gzip.open(folder / "tr-en.tsv.gz", "wt", encoding="utf-8") as handle:
        handle.write("tr\ten\nbir\tone\nno tab here\n")
    with pytest.raises(SystemExit, match=r"tr-en\.tsv\.gz:3: "):
        bench().read_pud(tmp_path, "tr")
