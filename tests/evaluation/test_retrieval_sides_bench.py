"""bench/retrieval_sides.py: the fitted map, the Tatoeba error it reports, and the sampled fit text."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from bench_scripts import bench_script


def test_the_least_squares_map_recovers_an_affine_map():
    bench = bench_script("retrieval_sides")
    rng = np.random.default_rng(0)
    source = rng.standard_normal((200, 6))
    rotation, bias = rng.standard_normal((6, 4)), rng.standard_normal(4)
    mapping = bench.least_squares_map(source, source @ rotation + bias)
    new = rng.standard_normal((5, 6))
    assert np.allclose(bench.apply_map(mapping, new), new @ rotation + bias, atol=1e-6)


def test_the_error_is_the_mean_of_both_directions():
    bench = bench_script("retrieval_sides")
    english = np.eye(4, dtype=np.float32)
    assert bench.tatoeba_error(english * 3, english) == 0.0
    # X sentence 0 sits nearer English 1 than English 0: X->en misses it, but English 0 still finds X 0 nearest
    # (and English 1 finds X 1), so one direction scores 3 of 4 and the other 4 of 4.
    other = np.array([[0.6, 0.8, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=np.float32)
    assert bench.tatoeba_error(other, english) == pytest.approx(12.5)


def test_sample_lines_is_seeded_and_skips_blank_lines(tmp_path):
    bench = bench_script("retrieval_sides")
    path = tmp_path / "text.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("".join(f"line {i}\n" for i in range(50)) + "\n  \n")
    first = bench.sample_lines(path, 10, seed=0)
    assert first == bench.sample_lines(path, 10, seed=0)
    assert len(first) == 10 and len(set(first)) == 10 and all(line.startswith("line ") for line in first)
    assert first != bench.sample_lines(path, 10, seed=1)
    assert len(bench.sample_lines(path, 100, seed=0)) == 50
