"""SentEval transfer tasks with logistic regression, following SentEval's validation protocol.

Protocol (Conneau & Kiela 2018, `senteval/tools/validation.py`):
- MR, CR, SUBJ, MPQA: nested cross-validation. The data is split into `kfold` stratified folds; for each
  outer fold the L2 penalty C is chosen by an inner `kfold`-fold CV on the other folds, a model with that C is
  trained on all of them and scored on the held-out fold; the accuracy is the mean over outer folds.
- TREC, MRPC: C chosen by `kfold`-fold CV on the train set, then trained on all of it and scored on test.
- SST-2, SST-5, SICK-E: C chosen on the dev set, scored on test.
- C grids as SentEval's scikit-learn path: 2^-2..2^3 (nested CV and dev split), 2^-1..2^5 (k-fold).
- Pair tasks (MRPC, SICK-E) use the features [u, v, |u - v|, u * v] (SentEval's code uses [|u - v|, u * v]).
- Folds are `StratifiedKFold(shuffle=True, random_state=seed)` with SentEval's seed 1111; ties between C
  values go to the smaller C, after rounding the mean accuracy to 0.01 % as SentEval does.

The classifier is the model scikit-learn's `LogisticRegression(C=C)` fits (lbfgs): it minimises
mean log-loss + ||W||^2 / (2 C n) with an unpenalised intercept (binary: one weight vector; multi-class:
multinomial softmax), stopping when every gradient entry is below 1e-4 (sklearn's default `tol`). The only
difference is speed: all the models one selection step needs (every C x every inner fold, plus the final ones)
are trained together in one L-BFGS run, so each pass over the features serves dozens of models. Nested 10-fold
CV is 610 fits per task; fitted one by one that takes tens of minutes on two cores, together about a minute.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

SENTEVAL_SEED = 1111
NESTED_CV_C = tuple(2.0**t for t in range(-2, 4))
KFOLD_C = tuple(2.0**t for t in range(-1, 6))
SPLIT_C = NESTED_CV_C
GRADIENT_TOLERANCE = 1e-4
MAX_ITERATIONS = 1000


@dataclass
class LogisticFit:
    """Weights of several logistic-regression models trained together."""

    weights: np.ndarray  # (dim, models, classes_out); classes_out is 1 for binary problems
    intercepts: np.ndarray  # (models, classes_out)
    converged: bool
    iterations: int

    def predict(self, features: np.ndarray, model: int) -> np.ndarray:
        """Class predictions of one model."""
        scores = features @ self.weights[:, model, :] + self.intercepts[model]
        if scores.shape[1] == 1:
            return (scores[:, 0] > 0).astype(np.int64)
        return np.argmax(scores, axis=1)


def fit_logistic_regressions(
    features: np.ndarray,
    labels: np.ndarray,
    n_classes: int,
    train_masks: np.ndarray,
    c_values: Sequence[float],
    tol: float = GRADIENT_TOLERANCE,
    max_iterations: int = MAX_ITERATIONS,
) -> LogisticFit:
    """Fit one L2 logistic regression per row of `train_masks` (rows it trains on) and entry of `c_values`.

    Each model j minimises `mean_{i in mask_j} logloss_i + ||W_j||^2 / (2 C_j n_j)`: the objective of
    scikit-learn's `LogisticRegression(C=C_j)`. The models are independent, so one pass over the features
    evaluates all of them, and L-BFGS runs per model (own history, own step length) on top of that.
    """
    features = np.asarray(features, dtype=np.float32)
    labels = np.asarray(labels, dtype=np.int64)
    train_masks = np.asarray(train_masks, dtype=bool)
    c_values = np.asarray(c_values, dtype=np.float64)
    n, dim = features.shape
    n_models = len(train_masks)
    if train_masks.shape != (n_models, n) or c_values.shape != (n_models,):
        raise ValueError("need one train mask of length n and one C per model")
    if labels.shape != (n,) or labels.min() < 0 or labels.max() >= n_classes:
        raise ValueError(f"labels must be n integers in [0, {n_classes})")
    counts = train_masks.sum(axis=1)
    if (counts == 0).any():
        raise ValueError("every model needs at least one training row")
    problem = _LogisticProblem(features, labels, n_classes, train_masks, counts, c_values)
    weights, intercepts, converged, iterations = _lbfgs(problem, tol, max_iterations)
    # Undo the centring: s = (x - mean) W + b = x W + (b - mean W).
    intercepts = intercepts - np.einsum("d,dkm->km", problem.mean, weights)
    return LogisticFit(
        np.ascontiguousarray(weights.transpose(0, 2, 1), dtype=np.float32),
        np.ascontiguousarray(intercepts.T, dtype=np.float32),
        converged,
        iterations,
    )


class _LogisticProblem:
    """Per-model objective values and gradients of many L2 logistic regressions on shared features.

    Parameters are laid out `(dim, outputs, models)` and `(outputs, models)`: the model index varies fastest,
    so the softmax's reductions over classes run over contiguous rows of models (numpy is slow at reducing a
    short trailing axis).
    """

    def __init__(self, features, labels, n_classes, train_masks, counts, c_values):
        n = len(labels)
        self.n_models = len(train_masks)
        self.outputs = 1 if n_classes == 2 else n_classes
        # Centring is an exact reparametrisation (the unpenalised intercept absorbs the mean) that makes the
        # problem much better conditioned.
        self.mean = features.mean(axis=0, dtype=np.float64)
        self.features = features - self.mean.astype(np.float32)
        # Row weights that turn a sum over a model's training rows into its mean.
        self.row_weights = (train_masks / counts[:, None]).T.astype(np.float32)  # (n, models)
        self.l2 = 1.0 / (c_values * counts)  # (models,)
        self.labels = labels
        if self.outputs == 1:
            self.targets = labels.astype(np.float32)[:, None]
        else:
            self.targets = np.zeros((n, self.outputs, 1), dtype=np.float32)
            self.targets[np.arange(n), labels, 0] = 1.0

    def __call__(self, weights: np.ndarray, intercepts: np.ndarray):
        """Objective per model `(models,)` and the gradients, shaped like `weights` and `intercepts`."""
        dim, outputs, n_models = weights.shape
        n = len(self.features)
        scores = self.features @ weights.reshape(dim, -1).astype(np.float32)
        scores += intercepts.reshape(-1).astype(np.float32)
        if outputs == 1:
            # log(1 + e^s) - y s, written so that no exp overflows (np.logaddexp is several times slower).
            exp_minus_abs = np.exp(-np.abs(scores))
            losses = np.maximum(scores, 0.0) + np.log1p(exp_minus_abs) - self.targets * scores
            # sigmoid(s) from the same exponential: 1 / (1 + e^-s) for s >= 0, e^s / (1 + e^s) otherwise.
            probabilities = np.where(scores >= 0, 1.0, exp_minus_abs) / (1.0 + exp_minus_abs)
            residual = (probabilities - self.targets) * self.row_weights
        else:
            scores = scores.reshape(n, outputs, n_models)
            scores -= scores.max(axis=1, keepdims=True)
            exponentials = np.exp(scores)
            totals = exponentials.sum(axis=1, keepdims=True)
            # Cross-entropy: log(sum e^s) - s_label (with the shift cancelling out).
            losses = np.log(totals[:, 0, :]) - scores[np.arange(n), self.labels, :]
            exponentials /= totals
            exponentials -= self.targets
            exponentials *= self.row_weights[:, None, :]
            residual = exponentials.reshape(n, -1)
        values = (losses * self.row_weights).sum(axis=0, dtype=np.float64)
        values += 0.5 * self.l2 * (weights**2).sum(axis=(0, 1))
        weight_gradient = (self.features.T @ residual).astype(np.float64).reshape(dim, outputs, n_models)
        weight_gradient += weights * self.l2
        intercept_gradient = residual.sum(axis=0, dtype=np.float64).reshape(outputs, n_models)
        return values, weight_gradient, intercept_gradient


def _dot(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Per-model inner product of two (weights, intercepts) pairs."""
    return (a[0] * b[0]).sum(axis=(0, 1)) + (a[1] * b[1]).sum(axis=0)


def _lbfgs(problem: _LogisticProblem, tol: float, max_iterations: int, history: int = 10):
    """L-BFGS with an Armijo line search, vectorised over independent models.

    Each model has its own curvature pairs and step length. Every iteration costs exactly one evaluation of
    all models: a model whose trial step fails the Armijo test stays where it is and retries a shorter step
    (the minimum of the interpolating quadratic) at the next iteration, instead of making every other model
    wait for extra evaluations. Returns weights, intercepts, converged, iterations.
    """
    dim, n_models, outputs = len(problem.mean), problem.n_models, problem.outputs
    x = (np.zeros((dim, outputs, n_models)), np.zeros((outputs, n_models)))
    f, *g = problem(*x)
    pairs: list[tuple[tuple, tuple, np.ndarray]] = []  # (s, y, rho); rho = 0 where a model has no pair
    gamma = np.ones(n_models)
    has_curvature = np.zeros(n_models, dtype=bool)
    retry_step = np.zeros(n_models)  # > 0: the step a model retries after a rejected one
    active = np.ones(n_models, dtype=bool)

    def largest(v: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        return np.maximum(np.abs(v[0]).max(axis=(0, 1)), np.abs(v[1]).max(axis=0))

    iterations = 0
    while iterations < max_iterations:
        active &= largest(g) > tol
        if not active.any():
            break
        iterations += 1
        # Two-loop recursion: d = -H g, per model (per-model scalars broadcast over the last axis).
        q = (g[0].copy(), g[1].copy())
        alphas = []
        for s, y, rho in reversed(pairs):
            alpha = rho * _dot(s, q)
            q = (q[0] - alpha * y[0], q[1] - alpha * y[1])
            alphas.append(alpha)
        r = (q[0] * gamma, q[1] * gamma)
        for (s, y, rho), alpha in zip(pairs, reversed(alphas), strict=True):
            beta = rho * _dot(y, r)
            r = (r[0] + (alpha - beta) * s[0], r[1] + (alpha - beta) * s[1])
        d = (-r[0], -r[1])
        slope = _dot(g, d)
        # Not a descent direction (rounding): restart that model from steepest descent.
        reset = slope >= 0
        if reset.any():
            d = (np.where(reset, -g[0], d[0]), np.where(reset, -g[1], d[1]))
            slope = _dot(g, d)
        # A model without curvature information takes a short first step (1 / |g|), as L-BFGS-B does.
        step = np.where(has_curvature & ~reset, 1.0, 1.0 / np.maximum(1.0, np.sqrt(-slope)))
        step = np.where(retry_step > 0, np.minimum(retry_step, step), step)
        step = np.where(active, step, 0.0)
        x_trial = (x[0] + step * d[0], x[1] + step * d[1])
        f_trial, *g_trial = problem(*x_trial)
        # Objective values carry float32 rounding from the scores; a rise smaller than that is not a rise.
        noise = 1e-7 * (1.0 + np.abs(f))
        accepted = (f_trial <= f + 1e-4 * step * slope + noise) & active
        # Rejected: retry from the same point with the minimum of the quadratic through f, the slope at 0
        # and f_trial, kept within [0.1, 0.5] x step; a step that shrinks to nothing means float32 precision
        # is exhausted and the model stops.
        rise = f_trial - f - slope * step
        trial = np.where(rise > 0, -slope * step**2 / (2.0 * np.where(rise > 0, rise, 1.0)), 0.5 * step)
        retry_step = np.where(accepted | ~active, 0.0, np.clip(trial, 0.1 * step, 0.5 * step))
        active &= ~((retry_step > 0) & (retry_step < 1e-12))
        s = (np.where(accepted, x_trial[0] - x[0], 0.0), np.where(accepted, x_trial[1] - x[1], 0.0))
        y = (np.where(accepted, g_trial[0] - g[0], 0.0), np.where(accepted, g_trial[1] - g[1], 0.0))
        curvature = _dot(s, y)
        usable = curvature > 1e-12
        rho = np.where(usable, 1.0 / np.where(usable, curvature, 1.0), 0.0)
        gamma = np.where(usable, curvature / np.maximum(_dot(y, y), 1e-300), gamma)
        has_curvature |= usable
        pairs.append((s, y, rho))
        if len(pairs) > history:
            pairs.pop(0)
        x = (np.where(accepted, x_trial[0], x[0]), np.where(accepted, x_trial[1], x[1]))
        g = [np.where(accepted, g_trial[0], g[0]), np.where(accepted, g_trial[1], g[1])]
        f = np.where(accepted, f_trial, f)
    # Models stopped by float32 rounding count as converged when their gradient is close to the tolerance.
    converged = bool((largest(g) <= 10 * tol).all())
    return x[0], x[1], converged, iterations


def _select(scores: np.ndarray) -> int:
    """Index of the best mean accuracy (rounded to 0.01 % as SentEval does); ties go to the smaller C."""
    return int(np.argmax(np.round(100 * scores, 2)))


def _accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(predictions == labels))


ProgressHook = Callable[[], None]


def _tick(progress: ProgressHook | None) -> None:
    if progress is not None:
        progress()


def nested_cv_accuracy(
    features: np.ndarray,
    labels: np.ndarray,
    n_classes: int,
    kfold: int = 10,
    seed: int = SENTEVAL_SEED,
    c_values: Sequence[float] = NESTED_CV_C,
    progress: ProgressHook | None = None,
) -> dict:
    """MR/CR/SUBJ/MPQA protocol: outer k-fold test accuracy with C chosen by inner k-fold CV."""
    from sklearn.model_selection import StratifiedKFold

    outer = StratifiedKFold(n_splits=kfold, shuffle=True, random_state=seed)
    dev_scores, test_scores, chosen, converged = [], [], [], True
    for train_rows, test_rows in outer.split(features, labels):
        x_train, y_train = features[train_rows], labels[train_rows]
        inner = list(StratifiedKFold(n_splits=kfold, shuffle=True, random_state=seed).split(x_train, y_train))
        # Models: for each C, one per inner fold and one on the whole outer-train part.
        masks, cs = [], []
        for c in c_values:
            for inner_train, _ in inner:
                mask = np.zeros(len(train_rows), dtype=bool)
                mask[inner_train] = True
                masks.append(mask)
                cs.append(c)
            masks.append(np.ones(len(train_rows), dtype=bool))
            cs.append(c)
        fit = fit_logistic_regressions(x_train, y_train, n_classes, np.stack(masks), cs)
        converged &= fit.converged
        per_model = len(inner) + 1
        mean_inner = np.array(
            [
                np.mean(
                    [
                        _accuracy(fit.predict(x_train[held_out], ci * per_model + f), y_train[held_out])
                        for f, (_, held_out) in enumerate(inner)
                    ]
                )
                for ci in range(len(c_values))
            ]
        )
        best = _select(mean_inner)
        final = best * per_model + len(inner)
        dev_scores.append(float(mean_inner[best]))
        test_scores.append(_accuracy(fit.predict(features[test_rows], final), labels[test_rows]))
        chosen.append(float(c_values[best]))
        _tick(progress)
    return {
        "accuracy": 100 * float(np.mean(test_scores)),
        "dev_accuracy": 100 * float(np.mean(dev_scores)),
        "fold_accuracies": [100 * score for score in test_scores],
        "c_chosen": chosen,
        "n": int(len(labels)),
        "converged": bool(converged),
    }


def kfold_then_test(
    train_features: np.ndarray,
    train_labels: np.ndarray,
    test_features: np.ndarray,
    test_labels: np.ndarray,
    n_classes: int,
    kfold: int = 10,
    seed: int = SENTEVAL_SEED,
    c_values: Sequence[float] = KFOLD_C,
    progress: ProgressHook | None = None,
) -> tuple[dict, np.ndarray]:
    """TREC/MRPC protocol: C by k-fold CV on train, then train on all of it; returns results and test predictions."""
    from sklearn.model_selection import StratifiedKFold

    folds = list(StratifiedKFold(n_splits=kfold, shuffle=True, random_state=seed).split(train_features, train_labels))
    masks, cs = [], []
    for c in c_values:
        for fold_train, _ in folds:
            mask = np.zeros(len(train_labels), dtype=bool)
            mask[fold_train] = True
            masks.append(mask)
            cs.append(c)
        masks.append(np.ones(len(train_labels), dtype=bool))
        cs.append(c)
    fit = fit_logistic_regressions(train_features, train_labels, n_classes, np.stack(masks), cs)
    per_model = len(folds) + 1
    mean_cv = np.array(
        [
            np.mean(
                [
                    _accuracy(fit.predict(train_features[held_out], ci * per_model + f), train_labels[held_out])
                    for f, (_, held_out) in enumerate(folds)
                ]
            )
            for ci in range(len(c_values))
        ]
    )
    best = _select(mean_cv)
    predictions = fit.predict(test_features, best * per_model + len(folds))
    _tick(progress)
    return (
        {
            "accuracy": 100 * _accuracy(predictions, test_labels),
            "dev_accuracy": 100 * float(mean_cv[best]),
            "c_chosen": float(c_values[best]),
            "n_train": int(len(train_labels)),
            "n_test": int(len(test_labels)),
            "converged": fit.converged,
        },
        predictions,
    )


def dev_then_test(
    train: tuple[np.ndarray, np.ndarray],
    dev: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    n_classes: int,
    c_values: Sequence[float] = SPLIT_C,
    progress: ProgressHook | None = None,
) -> dict:
    """SST/SICK-E protocol: one model per C on train, C chosen on dev, that model scored on test."""
    (x_train, y_train), (x_dev, y_dev), (x_test, y_test) = train, dev, test
    masks = np.ones((len(c_values), len(y_train)), dtype=bool)
    fit = fit_logistic_regressions(x_train, y_train, n_classes, masks, c_values)
    dev_scores = np.array([_accuracy(fit.predict(x_dev, j), y_dev) for j in range(len(c_values))])
    best = _select(dev_scores)
    _tick(progress)
    return {
        "accuracy": 100 * _accuracy(fit.predict(x_test, best), y_test),
        "dev_accuracy": 100 * float(dev_scores[best]),
        "c_chosen": float(c_values[best]),
        "n_train": int(len(y_train)),
        "n_dev": int(len(y_dev)),
        "n_test": int(len(y_test)),
        "converged": fit.converged,
    }


def pair_features(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """[u, v, |u - v|, u * v] for sentence-pair tasks."""
    left = np.asarray(left, dtype=np.float32)
    right = np.asarray(right, dtype=np.float32)
    return np.concatenate([left, right, np.abs(left - right), left * right], axis=1)


def binary_f1(predictions: np.ndarray, labels: np.ndarray) -> float:
    """F1 of the positive class (1), as SentEval reports for MRPC; 0 when there are no true positives."""
    true_positive = int(np.sum((predictions == 1) & (labels == 1)))
    if true_positive == 0:
        return 0.0
    precision = true_positive / int(np.sum(predictions == 1))
    recall = true_positive / int(np.sum(labels == 1))
    return 2 * precision * recall / (precision + recall)
