"""The dataset card (`README.md`) of a `psp backtranslate` folder."""

from __future__ import annotations

from pathlib import Path

from ..data.report import size_category
from ..io.writing import atomic_path

# The files are TSV without quoting: `datasets`' csv builder reads them with these settings.
_TSV = {"sep": "\t", "quoting": 3}


def card_text(report: dict, src_lang: str, where: str) -> str:
    """The card: YAML metadata (two configs: `pairs` the filtered pairs, `translations` every line), then text."""
    from huggingface_hub import DatasetCard, DatasetCardData

    filtering = report["filtering"]
    settings = report["translation_settings"]
    metadata = DatasetCardData(
        language=sorted({src_lang, "en"}),
        task_categories=["sentence-similarity"],
        size_categories=[size_category(filtering["pairs_out"])],
        tags=["psp-hf", "paraphrase", "back-translation"],
        configs=[
            {"config_name": "pairs", "default": True, "data_files": [{"split": "train", "path": "pairs.tsv"}], **_TSV},
            {"config_name": "translations", "data_files": [{"split": "train", "path": "translations.tsv"}], **_TSV},
        ],
    )
    rules = "\n".join(
        f"| `{item['rule']}` | {item['outside']:,} | {item['removed']:,} |" for item in filtering["filters"]
    )
    table = (
        "| bound (inclusive) | pairs outside | pairs removed (in this order) |\n|---|---:|---:|\n" + rules + "\n"
        if rules
        else "No bounds were set: every pair is kept.\n"
    )
    body = f"""
# English paraphrase pairs back-translated from {src_lang}–English bitext

Made by `psp backtranslate` with the translation model `{settings["model"]}` (beam size {settings["beam_size"]}):
the {src_lang} side of each line was translated into English and paired with the line's English reference.

```python
from datasets import load_dataset

pairs = load_dataset("{where}", "pairs", split="train")
```

## Files

- `translations.tsv`: `reference`, `translation`, `score` (negative log-probability per token of the
  translation under the translation model) for all {report["translation"]["pairs"]:,} input lines, in input order.
- `pairs.tsv`: the {filtering["pairs_out"]:,} pairs inside every bound: `sentence1` (reference), `sentence2`
  (translation), and the measures: `cost`, `length`, `overlap` (word {filtering["overlap_order"]}-grams),
  `bleu`, and when computed `score` (psp paraphrase score), `lm`, `machine`. Feed it to
  `psp prepare paraphrases pairs.tsv -o DIR` (add `--no-score-filter` when there is no `score` column).

## Filters

{table}
Command: `{report.get("command") or "psp backtranslate"}`. The full report is in `report.json`.
"""
    return str(DatasetCard(f"---\n{metadata.to_yaml()}\n---\n{body}"))


def write_card(out: Path, report: dict, src_lang: str, repo_id: str | None = None) -> Path:
    """Write `out/README.md`; its example loads from `repo_id` when pushing, else from the folder."""
    path = Path(out) / "README.md"
    with atomic_path(path) as tmp:  # a link planted at the name is replaced, never written through
        tmp.write_text(card_text(report, src_lang, repo_id or str(out)), encoding="utf-8")
    return path
