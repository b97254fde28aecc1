"""The back-translation paper's filters: a measure per (reference, translation) pair, bounds, and counts.

Measures (the column names of the filtered output):

* `length`: tokens of the translation (words; characters for languages written without spaces);
* `cost`: the translation's negative log-probability per token under the translation model;
* `lm`: negative log-probability per token of the translation under a causal language model;
* `machine`: how machine-like the translation looks: the probability, from a classifier trained on the pairs
  themselves (references = human, translations = machine), that the translation is a translation;
* `overlap`: shared word n-grams ÷ n-grams of the side with fewer (`psp_hf.data.filters.ngram_overlap`, the
  same function as `psp prepare`'s trigram overlap);
* `bleu`: smoothed sentence BLEU (sacrebleu, 0–100) of the translation against the reference;
* `score`: the paraphrase score, the cosine of the two sides' embeddings under a psp model.

Every bound is inclusive: a pair is kept when `low <= value <= high`; a missing bound is open. A pair whose
measure is NaN is outside every bound on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..data.filters import length_unit_for, ngram_overlap, normalize_whitespace, token_count

# The order filters are counted in: cheap and model-free first, as the paper's analysis lists them.
MEASURES = ("length", "cost", "overlap", "bleu", "lm", "machine", "score")


@dataclass
class Bound:
    """Inclusive bounds on one measure; None is open."""

    measure: str
    low: float | None = None
    high: float | None = None

    def __post_init__(self) -> None:
        if self.measure not in MEASURES:
            raise ValueError(f"unknown measure {self.measure!r}; expected one of {', '.join(MEASURES)}")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"{self.measure}: the range is empty: {self.low} > {self.high}")

    def keep(self, values: np.ndarray) -> np.ndarray:
        """True where the value lies within the bounds (inclusive); NaN is never kept."""
        values = np.asarray(values, dtype=np.float64)
        keep = ~np.isnan(values)
        if self.low is not None:
            keep &= values >= self.low
        if self.high is not None:
            keep &= values <= self.high
        return keep

    def describe(self) -> str:
        """`low <= measure <= high` with the open ends left out."""
        low = "" if self.low is None else f"{self.low:g} <= "
        high = "" if self.high is None else f" <= {self.high:g}"
        return f"{low}{self.measure}{high}"


def translation_lengths(translations: Sequence[str], language: str = "en") -> np.ndarray:
    """Token count of each translation (words, or characters for zh, ja, th, ...)."""
    unit = length_unit_for(language)
    return np.array([token_count(normalize_whitespace(t), unit) for t in translations], dtype=np.float64)


def overlaps(references: Sequence[str], translations: Sequence[str], n: int = 3) -> np.ndarray:
    """`ngram_overlap` of each pair."""
    return np.array([ngram_overlap(r, t, n) for r, t in zip(references, translations, strict=True)], dtype=np.float64)


def sentence_bleus(references: Sequence[str], translations: Sequence[str]) -> np.ndarray:
    """Smoothed sentence BLEU (sacrebleu's exponential smoothing, effective order; 0–100) per pair."""
    try:
        from sacrebleu.metrics import BLEU
    except ImportError as error:  # pragma: no cover - depends on the installed extras
        raise ImportError("sentence BLEU needs sacrebleu: pip install 'psp-hf[backtranslation]'") from error
    bleu = BLEU(smooth_method="exp", effective_order=True)
    return np.array(
        [bleu.sentence_score(t, [r]).score for r, t in zip(references, translations, strict=True)], dtype=np.float64
    )


def language_model_nll(
    texts: Sequence[str], model: str, batch_size: int = 32, device: str | None = None, progress: bool = False
) -> np.ndarray:
    """Negative log-probability per token of each text under a transformers causal LM (folder or Hub id).

    The tokenizer's BOS token (when it has one) is put in front, so the first token is predicted too. An
    empty text has no tokens: NaN.
    """
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    tokenizer = AutoTokenizer.from_pretrained(model)
    lm = AutoModelForCausalLM.from_pretrained(model).to(torch_device).eval()
    bos = tokenizer.bos_token_id
    encoded = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    sequences = [([bos] if bos is not None else []) + ids for ids in encoded]
    result = np.full(len(texts), np.nan)
    order = np.argsort([-len(s) for s in sequences], kind="stable")
    for start in tqdm(range(0, len(order), batch_size), desc="language model", disable=not progress):
        batch = order[start : start + batch_size]
        width = max(len(sequences[i]) for i in batch)
        if width < 2:
            continue
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, index in enumerate(batch):
            ids[row, : len(sequences[index])] = torch.tensor(sequences[index])
            mask[row, : len(sequences[index])] = 1
        ids, mask = ids.to(torch_device), mask.to(torch_device)
        with torch.inference_mode():
            logits = lm(input_ids=ids, attention_mask=mask).logits.float()
        nll = -torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        target = mask[:, 1:].float()
        counts = target.sum(dim=1)
        values = ((nll * target).sum(dim=1) / counts.clamp(min=1)).cpu().numpy()
        values[counts.cpu().numpy() == 0] = np.nan
        result[batch] = values
    return result


def machine_scores(references: Sequence[str], translations: Sequence[str], seed: int = 0) -> np.ndarray:
    """P(machine translation) for each translation, from a reference-vs-translation classifier.

    Logistic regression on hashed character 1–4-grams, cross-fitted on two halves of the pairs: each
    translation is scored by the classifier trained on the other half, so it is never judged by a model that
    saw it. Needs at least 4 pairs.
    """
    from sklearn.feature_extraction.text import HashingVectorizer
    from sklearn.linear_model import LogisticRegression

    n = len(translations)
    if n < 4:
        raise ValueError(f"the reference-vs-translation classifier needs at least 4 pairs, got {n}")
    vectorizer = HashingVectorizer(analyzer="char_wb", ngram_range=(1, 4), n_features=2**18, alternate_sign=False)
    fold = np.random.default_rng(seed).permutation(n) % 2
    result = np.empty(n, dtype=np.float64)
    for held_out in (0, 1):
        train = np.flatnonzero(fold != held_out)
        texts = [references[i] for i in train] + [translations[i] for i in train]
        labels = np.r_[np.zeros(len(train)), np.ones(len(train))]
        classifier = LogisticRegression(solver="liblinear", max_iter=1000, random_state=seed)
        classifier.fit(vectorizer.transform(texts), labels)
        test = np.flatnonzero(fold == held_out)
        result[test] = classifier.predict_proba(vectorizer.transform([translations[i] for i in test]))[:, 1]
    return result


def paraphrase_scores(
    references: Sequence[str], translations: Sequence[str], model: str, batch_size: int = 256
) -> np.ndarray:
    """Cosine of the psp model's embeddings of each pair (the paraphrase score of `psp prepare`)."""
    from ..encoder import load
    from ..inference.similarity import cosine_pairs

    encoder = load(model)
    first = encoder.encode(list(references), batch_size=batch_size)
    second = encoder.encode(list(translations), batch_size=batch_size)
    return np.asarray(cosine_pairs(first, second), dtype=np.float64)


@dataclass
class FilterResult:
    """The measures of every pair, which pairs are kept, and per-bound counts."""

    measures: dict[str, np.ndarray]
    keep: np.ndarray
    counts: list[dict]

    def report(self) -> dict:
        """Counts for the JSON report: pairs in/out and, per bound, pairs outside it and pairs it removed."""
        return {"pairs_in": int(len(self.keep)), "pairs_out": int(self.keep.sum()), "filters": self.counts}


def apply_bounds(measures: dict[str, np.ndarray], bounds: Sequence[Bound]) -> FilterResult:
    """Keep the pairs inside every bound. Counts per bound: `outside` (of all pairs) and `removed` (of the pairs
    every earlier bound kept, in `MEASURES` order), so pairs in = sum of `removed` + pairs out."""
    n = len(next(iter(measures.values()))) if measures else 0
    keep = np.ones(n, dtype=bool)
    counts = []
    for bound in sorted(bounds, key=lambda b: MEASURES.index(b.measure)):
        if bound.measure not in measures:
            raise ValueError(f"a bound on {bound.measure!r}, but that measure was not computed")
        inside = bound.keep(measures[bound.measure])
        removed = int(np.count_nonzero(keep & ~inside))
        keep &= inside
        counts.append(
            {
                "measure": bound.measure,
                "low": bound.low,
                "high": bound.high,
                "rule": bound.describe(),
                "outside": int(np.count_nonzero(~inside)),
                "removed": removed,
            }
        )
    return FilterResult(measures=measures, keep=keep, counts=counts)


def summary(values: np.ndarray) -> dict:
    """Mean and quartiles of a measure (NaN ignored), for the report."""
    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    if not len(values):
        return {"count": 0}
    q = np.quantile(values, [0.0, 0.25, 0.5, 0.75, 1.0])
    rounded = [round(float(v), 4) for v in q]
    mean = float(values.mean())
    return {"count": int(len(values)), "mean": round(mean, 4) if math.isfinite(mean) else None, "quantiles": rounded}
