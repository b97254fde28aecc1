"""SentEval classifiers: the batched solver reaches scikit-learn's LogisticRegression optimum; the protocols."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from psp_hf.evaluation import senteval


def _blobs(n: int, dim: int, classes: int, seed: int, spread: float = 1.5, offset: float = 3.0):
    """Overlapping Gaussian classes shifted away from the origin (an uncentred feature mean, as real
    embeddings have)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    features = rng.normal(size=(n, dim)) + offset
    features[np.arange(n), labels % dim] += spread
    return features.astype(np.float32), labels


@pytest.mark.parametrize("classes", [2, 4])
def test_batched_fit_matches_sklearn(classes):
    from sklearn.linear_model import LogisticRegression

    features, labels = _blobs(400, 12, classes, seed=classes)
    masks = np.stack([np.arange(400) % 3 != 0, np.ones(400, dtype=bool), np.arange(400) < 250])
    c_values = [0.25, 4.0, 1.0]
    fit = senteval.fit_logistic_regressions(features, labels, classes, masks, c_values, tol=1e-6)
    assert fit.converged
    for model, (mask, c) in enumerate(zip(masks, c_values, strict=True)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = LogisticRegression(C=c, tol=1e-7, max_iter=5_000).fit(
                features[mask].astype(float), labels[mask]
            )
        coefficients = reference.coef_.T  # (dim, 1) binary, (dim, classes) multinomial
        scale = np.abs(coefficients).max()
        assert np.abs(fit.weights[:, model, :] - coefficients).max() < 1e-3 * scale
        assert np.abs(fit.intercepts[model] - reference.intercept_).max() < 1e-3 * max(1.0, scale)
        assert (fit.predict(features, model) == reference.predict(features)).mean() > 0.99


def test_fit_rejects_bad_inputs():
    features, labels = _blobs(20, 3, 2, seed=0)
    with pytest.raises(ValueError, match="one C per model"):
        senteval.fit_logistic_regressions(features, labels, 2, np.ones((2, 20), bool), [1.0])
    with pytest.raises(ValueError, match="at least one training row"):
        senteval.fit_logistic_regressions(features, labels, 2, np.zeros((1, 20), bool), [1.0])
    with pytest.raises(ValueError, match="labels must be"):
        senteval.fit_logistic_regressions(features, labels + 5, 2, np.ones((1, 20), bool), [1.0])


def test_nested_cv_separable_and_chance_data():
    features, labels = _blobs(300, 6, 2, seed=1, spread=8.0)
    result = senteval.nested_cv_accuracy(features, labels, 2, kfold=3)
    assert result["accuracy"] == pytest.approx(100.0)
    assert len(result["fold_accuracies"]) == 3 and all(c in senteval.NESTED_CV_C for c in result["c_chosen"])
    # Labels unrelated to the features: accuracy near chance, far from separable.
    rng = np.random.default_rng(2)
    noise = senteval.nested_cv_accuracy(
        rng.normal(size=(300, 6)).astype(np.float32), rng.integers(0, 2, 300), 2, kfold=3
    )
    assert 30 < noise["accuracy"] < 70


def test_kfold_and_dev_protocols_pick_c_and_score_test():
    features, labels = _blobs(360, 8, 3, seed=3, spread=2.0)
    train, test = slice(0, 240), slice(240, 360)
    result, predictions = senteval.kfold_then_test(
        features[train], labels[train], features[test], labels[test], 3, kfold=3
    )
    assert result["c_chosen"] in senteval.KFOLD_C and predictions.shape == (120,)
    assert result["accuracy"] == pytest.approx(100 * float(np.mean(predictions == labels[test])))
    assert result["accuracy"] > 60  # three classes, clearly separated on average
    split = senteval.dev_then_test(
        (features[:200], labels[:200]), (features[200:280], labels[200:280]), (features[280:], labels[280:]), 3
    )
    assert split["c_chosen"] in senteval.SPLIT_C and split["n_test"] == 80 and split["accuracy"] > 60


def test_selection_ties_go_to_the_smaller_c():
    # 0.712341 and 0.712349 round to the same 71.23 %, so the first (smaller C) wins, as in SentEval.
    assert senteval._select(np.array([0.5, 0.712341, 0.712349])) == 1


def test_pair_features_and_f1():
    u = np.array([[1.0, -2.0]], dtype=np.float32)
    v = np.array([[3.0, 1.0]], dtype=np.float32)
    assert senteval.pair_features(u, v).tolist() == [[1.0, -2.0, 3.0, 1.0, 2.0, 3.0, 3.0, -2.0]]
    predictions, labels = np.array([1, 1, 0, 0, 1]), np.array([1, 0, 0, 1, 1])
    # TP 2, FP 1, FN 1: precision 2/3, recall 2/3 -> F1 2/3.
    assert senteval.binary_f1(predictions, labels) == pytest.approx(2 / 3)
    assert senteval.binary_f1(np.zeros(3, int), np.ones(3, int)) == 0.0
