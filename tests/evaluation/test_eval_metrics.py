"""The evaluate metric modules (STS correlation, bitext mining), loaded by path, on hand-computed cases."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import psp_hf.evaluation.metrics as metrics_package

METRICS_DIR = Path(metrics_package.__file__).resolve().parent


@pytest.fixture(scope="module")
def sts_metric():
    import evaluate

    return evaluate.load(str(METRICS_DIR / "sts_correlation.py"), keep_in_memory=True)


@pytest.fixture(scope="module")
def bitext_metric():
    import evaluate

    return evaluate.load(str(METRICS_DIR / "bitext_mining.py"), keep_in_memory=True)


def test_perfect_and_reversed_order(sts_metric):
    up = sts_metric.compute(predictions=[0.1, 0.5, 0.9], references=[1.0, 2.5, 4.0])
    assert up == {"pearson": pytest.approx(1.0), "spearman": pytest.approx(1.0), "n": 3}
    down = sts_metric.compute(predictions=[3.0, 2.0, 1.0], references=[1.0, 2.0, 3.0])
    assert down["pearson"] == pytest.approx(-1.0) and down["spearman"] == pytest.approx(-1.0)


def test_hand_computed_pearson_and_spearman(sts_metric):
    # Deviations (-1.5, -0.5, 0.5, 1.5) and (-1.5, 0.5, -0.5, 1.5): covariance 4, variances 5 and 5 -> r = 0.8.
    scores = sts_metric.compute(predictions=[1, 2, 3, 4], references=[1, 3, 2, 4])
    assert scores["pearson"] == pytest.approx(0.8)
    assert scores["spearman"] == pytest.approx(0.8)
    # x = (1, 2, 3), y = (2, 4, 7): covariance 5, variances 2 and 114/9 -> r = 5 / sqrt(228/9).
    scores = sts_metric.compute(predictions=[1, 2, 3], references=[2, 4, 7])
    assert scores["pearson"] == pytest.approx(5 / math.sqrt(228 / 9))
    assert scores["spearman"] == pytest.approx(1.0)  # monotone, so the ranks agree exactly


def test_spearman_averages_tied_ranks(sts_metric):
    from psp_hf.evaluation.metrics.sts_correlation import average_ranks

    assert average_ranks(np.array([10.0, 20.0, 20.0, 5.0])).tolist() == [2.0, 3.5, 3.5, 1.0]
    assert average_ranks(np.array([7.0, 7.0, 7.0])).tolist() == [2.0, 2.0, 2.0]
    # Ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4): covariance 4.5, variances 4.5 and 5 -> 3 / sqrt(10).
    scores = sts_metric.compute(predictions=[1, 2, 2, 3], references=[1, 2, 3, 4])
    assert scores["spearman"] == pytest.approx(3 / math.sqrt(10))
    assert scores["pearson"] == pytest.approx(3 / math.sqrt(10))  # the values are their own ranks here


def test_constant_input_gives_nan(sts_metric):
    scores = sts_metric.compute(predictions=[0.5, 0.5, 0.5], references=[1.0, 2.0, 3.0])
    assert math.isnan(scores["pearson"]) and math.isnan(scores["spearman"])


def test_bitext_perfect_retrieval(bitext_metric):
    rows = np.eye(4, dtype=np.float32) * np.array([[1.0], [2.0], [0.5], [3.0]], dtype=np.float32)
    scores = bitext_metric.compute(source_embeddings=rows, target_embeddings=rows * 7)
    assert scores == {
        "error_rate": 0.0,
        "error_rate_source_to_target": 0.0,
        "error_rate_target_to_source": 0.0,
        "n": 4,
    }


def test_bitext_hand_computed_errors_in_each_direction(bitext_metric):
    source = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    target = [[1.0, 0.1], [1.0, 0.0], [0.0, 1.0]]
    # Cosines (rows: source, columns: target):
    #   s0: 0.995 1.000 0.000 -> t1 (gold t0: error)
    #   s1: 0.100 0.000 1.000 -> t2 (gold t1: error)
    #   s2: 0.774 0.707 0.707 -> t0 (gold t2: error)          source -> target: 3/3 wrong
    # Columns: t0 -> s0 (right), t1 -> s0 (gold s1: error), t2 -> s1 (gold s2: error): 2/3 wrong
    scores = bitext_metric.compute(source_embeddings=source, target_embeddings=target)
    assert scores["error_rate_source_to_target"] == pytest.approx(1.0)
    assert scores["error_rate_target_to_source"] == pytest.approx(2 / 3)
    assert scores["error_rate"] == pytest.approx(5 / 6)


def test_bitext_ties_go_to_the_first_row_and_zero_rows_are_harmless(bitext_metric):
    # Target rows 0 and 1 are identical: both source rows retrieve row 0, so source row 1 is an error.
    source = [[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]]
    target = [[2.0, 0.0], [2.0, 0.0], [0.0, 0.0]]
    scores = bitext_metric.compute(source_embeddings=source, target_embeddings=target)
    # The zero rows have cosine 0 with everything: row 2 retrieves index 0 by the first-maximum rule (error).
    assert scores["error_rate_source_to_target"] == pytest.approx(2 / 3)
    assert scores["error_rate_target_to_source"] == pytest.approx(2 / 3)


def test_bitext_rejects_mismatched_shapes():
    from psp_hf.evaluation.metrics.bitext_mining import nearest_neighbour_errors

    with pytest.raises(ValueError, match="same shape"):
        nearest_neighbour_errors(np.zeros((3, 2)), np.zeros((2, 2)))
