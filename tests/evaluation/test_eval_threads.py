"""Evaluation from several threads at once (models scored side by side) gives each thread its own results."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.stats import pearsonr

from psp_hf.evaluation.sts import correlation


def test_correlation_in_parallel_threads_matches_scipy():
    rng = np.random.default_rng(0)
    cases = [(rng.normal(size=400), rng.normal(size=400)) for _ in range(6)]
    cases = [(a, a * (k + 1) * 0.1 + b) for k, (a, b) in enumerate(cases)]  # a different correlation per case

    def score(case):
        predictions, gold = case
        return [correlation(predictions, gold)["pearson"] for _ in range(20)]

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(score, cases))
    for (predictions, gold), values in zip(cases, results, strict=True):
        expected = 100 * pearsonr(predictions, gold)[0]
        assert np.allclose(values, expected, atol=1e-6), (values[:3], expected)
