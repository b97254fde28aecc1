"""STS correlation: Pearson and Spearman between predicted similarities and gold scores.

An `evaluate` metric module; load it by path so it works offline:

>>> import evaluate
>>> metric = evaluate.load("src/psp_hf/evaluation/metrics/sts_correlation.py")
>>> metric.compute(predictions=[0.1, 0.5, 0.9], references=[1.0, 2.5, 4.0])
{'pearson': 1.0, 'spearman': 1.0, 'n': 3}

The file is self-contained (numpy only) so it can also be published as a metric Space.
"""

from __future__ import annotations

import datasets
import evaluate
import numpy as np

_DESCRIPTION = """\
Pearson's r and Spearman's rho between the similarities a model assigns to sentence pairs (usually the cosine of
their embeddings) and the gold similarity scores. This is the metric of the SemEval STS tasks 2012-2017, the STS
Benchmark and SICK-R. Spearman's rho is Pearson's r of the ranks; tied values share the average of their ranks.
A correlation with a constant input is undefined and returned as NaN.
"""

_KWARGS_DESCRIPTION = """\
Args:
    predictions (`list` of `float`): the model's similarity for each pair.
    references (`list` of `float`): the gold score of each pair, in the same order.
Returns:
    pearson (`float`): Pearson's r in [-1, 1].
    spearman (`float`): Spearman's rho in [-1, 1].
    n (`int`): number of pairs.
"""

_CITATION = """\
@inproceedings{agirre-etal-2012-semeval,
  title = {{S}em{E}val-2012 Task 6: A Pilot on Semantic Textual Similarity},
  author = {Agirre, Eneko and Cer, Daniel and Diab, Mona and Gonzalez-Agirre, Aitor},
  booktitle = {*SEM 2012},
  year = {2012},
}
"""


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r of two equally long vectors, computed in float64; NaN if either is constant."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"pearson needs two 1-d arrays of equal length, got shapes {x.shape} and {y.shape}")
    if len(x) < 2:
        return float("nan")
    dx = x - x.mean()
    dy = y - y.mean()
    denominator = np.sqrt(np.dot(dx, dx) * np.dot(dy, dy))
    if denominator == 0.0:
        return float("nan")
    # Rounding can push |r| a hair above 1 for (anti)collinear inputs.
    return float(np.clip(np.dot(dx, dy) / denominator, -1.0, 1.0))


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n of `values`; equal values share the mean of the ranks they span (scipy's 'average')."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    # Start index of each run of equal values in sorted order.
    run_starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    run_ends = np.r_[run_starts[1:], len(values)]
    # Positions start..end-1 have ranks start+1..end, whose mean is (start + 1 + end) / 2.
    run_ranks = (run_starts + 1 + run_ends) / 2.0
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.repeat(run_ranks, run_ends - run_starts)
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho: Pearson's r of the average ranks."""
    return pearson(average_ranks(x), average_ranks(y))


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class StsCorrelation(evaluate.Metric):
    """Pearson and Spearman correlation of predicted similarities with gold STS scores."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("float64"), "references": datasets.Value("float64")}
            ),
            reference_urls=["https://aclanthology.org/S12-1051/"],
        )

    def _compute(self, predictions, references) -> dict:
        predictions = np.asarray(predictions, dtype=np.float64)
        references = np.asarray(references, dtype=np.float64)
        return {
            "pearson": pearson(predictions, references),
            "spearman": spearman(predictions, references),
            "n": int(len(predictions)),
        }
