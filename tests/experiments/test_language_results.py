"""`psp languages`' summary is the output folder's: languages built by earlier commands keep their rows."""

from __future__ import annotations

import json
from pathlib import Path

from psp_hf.experiments.language_results import folder_rows, language_row, write_summary


def _language_folder(out: Path, code: str, tatoeba: float, evaluated: bool = True) -> Path:
    """The step records and eval.json of a finished language, as `psp languages` writes them (tiny numbers)."""
    folder = out / code
    folder.mkdir(parents=True)
    (folder / "done-prepare").write_text(json.dumps({"pairs": 1234, "inputs": ["/tmp/x/wmt-news.tsv"]}))
    (folder / "done-train").write_text(json.dumps({"train_seconds": 120.0}))
    results = {"tatoeba": {code: {"error_rate": tatoeba, "error_rate_margin": tatoeba / 2}}}
    (folder / "eval.json").write_text(json.dumps({"results": results}))
    if evaluated:
        (folder / "done-evaluate").write_text("{}")
    return folder


def test_the_summary_keeps_the_languages_of_earlier_commands(tmp_path):
    out = tmp_path / "out"
    _language_folder(out, "zh", 9.75)
    _language_folder(out, "ar", 25.3)
    _language_folder(out, "ru", 50.0, evaluated=False)  # still training: no row until it is evaluated
    (out / "english").mkdir()  # the English student's folder is no language
    this_run = [language_row("tr", _language_folder(out, "tr", 7.95))]
    rows = folder_rows(out, this_run)
    assert [row["language"] for row in rows] == ["ar", "tr", "zh"]  # LANGUAGES' order, this run's row included
    assert rows[1] is this_run[0] and rows[0]["tatoeba_error"] == 25.3
    text = write_summary(out, rows)
    assert "| p-sp-ar |" in text and "| p-sp-zh |" in text and "p-sp-ru" not in text
    assert [row["language"] for row in json.loads((out / "summary.json").read_text())] == ["ar", "tr", "zh"]
