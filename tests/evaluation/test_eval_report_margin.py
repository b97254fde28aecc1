"""`psp eval` Markdown: Tatoeba margin error rates get their own rows beside the cosine ones."""

from __future__ import annotations

from psp_hf.evaluation.report import markdown_report


def tatoeba_model(name: str, margin: bool) -> dict:
    scores = {"de": {"error_rate": 12.5}, "fr": {"error_rate": 20.0}, "error_rate_mean": 16.25}
    if margin:
        scores["de"].update(error_rate_margin=7.5, margin_k=4)
        scores["fr"].update(error_rate_margin=10.25, margin_k=4)
    return {"model": {"name": name}, "results": {"tatoeba": scores}, "timings": {}}


def test_tatoeba_table_has_margin_rows_only_for_models_run_with_margin():
    markdown = markdown_report({"models": [tatoeba_model("with", True), tatoeba_model("plain", False)]})
    assert "(margin rows: ratio margin over k neighbours)" in markdown
    assert "| **with** | 12.5 | 20.0 | 16.2 |" in markdown
    assert "| **with** margin k=4 | 7.5 | 10.2 | 8.9 |" in markdown
    assert "| **plain** | 12.5 | 20.0 | 16.2 |" in markdown
    assert "**plain** margin" not in markdown
    # The margin row follows the cosine rows, inside the same table.
    table = markdown.split("### Tatoeba")[1].split("\n\n")[1].splitlines()
    assert table[-1].startswith("| **with** margin k=4 |")


def test_tatoeba_table_without_margin_keeps_its_title():
    markdown = markdown_report({"models": [tatoeba_model("plain", False)]})
    assert "### Tatoeba — error rate %, nearest cosine neighbour, mean of both directions\n" in markdown
    assert "margin" not in markdown
