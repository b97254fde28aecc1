"""bench/pud_dev.py: which languages a model is scored on, and its table row."""

from __future__ import annotations

from bench_scripts import bench_script


def test_a_model_named_after_a_language_is_scored_on_that_language_only():
    bench = bench_script("pud_dev")
    languages = ["ar", "de", "zh"]
    assert bench.model_languages("de", languages) == ["de"]
    assert bench.model_languages("p-sp-multilingual", languages) == languages


def test_the_row_marks_languages_not_scored_and_means_the_others():
    bench = bench_script("pud_dev")
    assert bench.table_row("de", ["ar", "de", "zh"], {"de": 99.8}) == "| de | — | 99.80 | — | 99.80 |"
    row = bench.table_row("m", ["ar", "de"], {"ar": 98.7, "de": 99.8})
    assert row == "| m | 98.70 | 99.80 | 99.25 |"
