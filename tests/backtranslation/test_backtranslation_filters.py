"""The back-translation filters on hand-built pairs: measures, inclusive bounds, counts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from psp_hf.backtranslation import filters as bt_filters
from psp_hf.backtranslation.filters import Bound, apply_bounds
from psp_hf.data import filters as data_filters
from psp_hf.data.filters import ngram_overlap, trigram_overlap


def test_ngram_overlap_counts_shared_ngrams_over_the_side_with_fewer():
    assert ngram_overlap("a b c d", "a b x d", 1) == pytest.approx(3 / 4)
    assert ngram_overlap("a b c d", "a b x d", 2) == pytest.approx(1 / 3)  # only "a b" of 3 bigrams
    assert ngram_overlap("a b x d", "a b c d", 2) == pytest.approx(1 / 3)  # symmetric
    assert ngram_overlap("a b a", "a b", 1) == 1.0  # the shorter side is "a b": both unigrams present
    assert ngram_overlap("a a a", "a b c d e", 1) == 1.0  # per occurrence of the shorter side's n-grams
    assert ngram_overlap("The Dog.", "the dog .", 3) == 1.0  # lowercased, punctuation is a token
    assert ngram_overlap("a b", "a b c", 3) == 0.0  # a side without trigrams
    assert ngram_overlap("a b c d e", "a b c d e", 5) == 1.0
    with pytest.raises(ValueError, match="at least 1"):
        ngram_overlap("a", "a", 0)


def test_trigram_overlap_is_ngram_overlap_of_order_three():
    pairs = [
        ("a man plays the guitar", "a man plays a violin"),
        ("x y z x y z", "x y z w v u t"),
        ("two words", "two words and more"),
        ("The cat sat on the mat", "the CAT sat on the mat"),
    ]
    for first, second in pairs:
        assert trigram_overlap(first, second) == ngram_overlap(first, second, 3)
    # The back-translation filter uses psp prepare's function itself, not a copy.
    assert bt_filters.ngram_overlap is data_filters.ngram_overlap
    assert bt_filters.overlaps(["a b c d"], ["a b c e f"], 3).tolist() == [0.5]


def test_translation_length_in_words_or_characters():
    assert bt_filters.translation_lengths(["a dog runs .", "  two   words ", ""]).tolist() == [4, 2, 0]
    assert bt_filters.translation_lengths(["我 爱你"], language="zh").tolist() == [3]


def test_sentence_bleu_known_values():
    references = ["the cat sat on the mat"] * 3 + ["the cat sat under a mat", "the cat sat on the mat"]
    translations = ["the cat sat on the mat", "the cat", "the cat sat on a mat", "the cat sat on a mat", "a b c"]
    bleu = bt_filters.sentence_bleus(references, translations)
    assert bleu[0] == pytest.approx(100.0)
    # Effective order: only 1- and 2-grams exist, both all correct; brevity penalty exp(1 - 6/2).
    assert bleu[1] == pytest.approx(100 * math.exp(-2))
    # Precisions 5/6, 3/5, 2/4, 1/3; equal lengths, no brevity penalty.
    assert bleu[2] == pytest.approx(100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25)
    # No correct 4-gram: exponential smoothing uses 1 / (2 * 3) in its place.
    assert bleu[3] == pytest.approx(100 * (5 / 6 * 3 / 5 * 1 / 4 * 1 / 6) ** 0.25)
    assert bleu[4] == 0.0


def test_bounds_are_inclusive_and_nan_is_never_kept():
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0, np.nan])
    assert Bound("length", 2, 4).keep(values).tolist() == [False, True, True, True, False, False]
    assert Bound("length", low=4).keep(values).tolist() == [False, False, False, True, True, False]
    assert Bound("cost", high=1).keep(values).tolist() == [True, False, False, False, False, False]
    assert Bound("bleu", 3, 3).keep(values).tolist() == [False, False, True, False, False, False]
    assert Bound("cost", 1, 2).describe() == "1 <= cost <= 2" and Bound("lm", high=6).describe() == "lm <= 6"
    with pytest.raises(ValueError, match="range is empty"):
        Bound("cost", 2, 1)
    with pytest.raises(ValueError, match="unknown measure"):
        Bound("perplexity", 1, 2)


def test_apply_bounds_counts_outside_and_removed_in_measure_order():
    measures = {
        "length": np.array([3, 10, 5, 1, 7], dtype=float),
        "cost": np.array([0.5, 0.4, 2.0, 3.0, 0.9]),
        "overlap": np.array([0.1, 0.9, 0.2, 0.0, 0.5]),
    }
    # Given out of order: counted in MEASURES order (length, cost, overlap).
    result = apply_bounds(measures, [Bound("overlap", high=0.5), Bound("cost", high=1.0), Bound("length", 2, 8)])
    assert result.keep.tolist() == [True, False, False, False, True]
    counts = {item["measure"]: item for item in result.counts}
    assert [item["measure"] for item in result.counts] == ["length", "cost", "overlap"]
    assert (counts["length"]["outside"], counts["length"]["removed"]) == (2, 2)  # pairs 1 and 3
    assert (counts["cost"]["outside"], counts["cost"]["removed"]) == (2, 1)  # 2 and 3; 3 already gone
    assert (counts["overlap"]["outside"], counts["overlap"]["removed"]) == (1, 0)  # 1, already gone
    report = result.report()
    assert report["pairs_in"] == 5 and report["pairs_out"] == 2
    assert report["pairs_in"] == sum(item["removed"] for item in report["filters"]) + report["pairs_out"]
    assert apply_bounds(measures, []).keep.all()
    with pytest.raises(ValueError, match="not computed"):
        apply_bounds(measures, [Bound("lm", high=3)])


def test_classifier_finds_the_machine_like_translations():
    rng = np.random.default_rng(0)
    words = ["river", "stone", "light", "morning", "garden", "window", "letter", "music", "village", "winter"]
    references = [" ".join(rng.choice(words, 6)) for _ in range(60)]
    # Half the translations carry a marker no reference has: the classifier must find them machine-like.
    translations = [" ".join(rng.choice(words, 6)) + (" qzx qzx" if i % 2 else "") for i, _ in enumerate(references)]
    scores = bt_filters.machine_scores(references, translations)
    assert scores.shape == (60,) and np.all((scores >= 0) & (scores <= 1))
    marked, plain = scores[1::2], scores[0::2]
    # Ranking quality (AUC): the marked translations score above the plain ones in almost every comparison.
    assert np.mean(marked[:, None] > plain[None, :]) > 0.95
    assert np.array_equal(scores, bt_filters.machine_scores(references, translations))  # seeded folds
    with pytest.raises(ValueError, match="at least 4 pairs"):
        bt_filters.machine_scores(["a", "b"], ["c", "d"])


def test_paraphrase_score_is_the_psp_cosine(tmp_path):
    from psp_hf import PSPEncoder
    from psp_hf.inference.similarity import cosine_pairs
    from psp_hf.tokenization.pieces import train_tokenizer

    corpus = ["a man plays a guitar", "a woman slices an onion", "two dogs run in a field"] * 20
    tokenizer = train_tokenizer(corpus, vocab_size=40, output_dir=tmp_path / "tok")
    encoder = PSPEncoder.from_tokenizer(tokenizer, hidden_size=8, seed=1)
    encoder.save_pretrained(tmp_path / "psp")
    first, second = ["a man plays a guitar", "two dogs"], ["a man plays a guitar", "a woman slices an onion"]
    scores = bt_filters.paraphrase_scores(first, second, str(tmp_path / "psp"))
    assert scores[0] == pytest.approx(1.0, abs=1e-5)
    expected = cosine_pairs(encoder.encode(first), encoder.encode(second))
    np.testing.assert_allclose(scores, expected, rtol=1e-5)


def test_summary_ignores_nan():
    assert bt_filters.summary(np.array([1.0, np.nan, 3.0]))["mean"] == 2.0
    assert bt_filters.summary(np.array([np.nan])) == {"count": 0}
