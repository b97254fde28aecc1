"""The per-run report of `psp prepare` (JSON, Markdown, PNG histograms) and the dataset card (`README.md`).

The card's YAML `configs` point `datasets` at the parquet shards, so `load_dataset(folder_or_repo,
streaming=True)` reads them and ignores the tokenizer and report folders.
"""

from __future__ import annotations

import json
from pathlib import Path

from .filters import DropDuplicates, FilterChain, Normalize, OverlapMaximum, ScoreRange
from .shards import SHARD_PATTERN

REPORT_DIR = "report"
TOKENIZER_DIR = "tokenizer"
DATA_DIR = "data"


def step_report(chain: FilterChain) -> list[dict]:
    """The report's entry for each filter step: what it removed (or changed) and its seconds."""
    steps = []
    for step, stats in zip(chain.steps, chain.stats, strict=True):
        entry = {
            "name": stats.name,
            "enabled": stats.enabled,
            "description": stats.description,
            "removed": stats.removed,
            "seconds": round(stats.seconds, 3),
        }
        if isinstance(step, Normalize):
            entry["changed"] = step.changed
        if isinstance(step, DropDuplicates):
            entry["hash_bytes"] = step.seen.nbytes
        if getattr(step, "matched", None) is not None:  # evaluation sentences: matches per evaluation set
            entry["matched_by_set"] = dict(sorted(step.matched.items()))
        steps.append(entry)
    return steps


def filter_histograms(chain: FilterChain) -> dict:
    """The trigram-overlap and score histograms of the pairs that reached those filters, with their cut-offs."""
    result = {}
    overlap = chain.step("overlap")
    if isinstance(overlap, OverlapMaximum):
        marks = [(overlap.maximum, f"max {overlap.maximum}")] if overlap.enabled else []
        result["overlap"] = {
            **overlap.histogram.to_dict(),
            "title": "trigram overlap of the pairs reaching the overlap filter",
            "xlabel": "shared trigrams / trigrams of the shorter side",
            "marks": marks,
        }
    score = chain.step("score")
    if isinstance(score, ScoreRange):
        marks = [(score.low, f"min {score.low}"), (score.high, f"max {score.high}")] if score.enabled else []
        result["score"] = {
            **score.histogram.to_dict(),
            "title": "paraphrase score of the pairs reaching the score filter",
            "xlabel": "score",
            "marks": marks,
        }
    return result


def _format_count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def report_markdown(report: dict) -> str:
    """The run's counts as a Markdown section (used in report.md and in the card)."""
    lines = [
        "| step | setting | pairs removed |",
        "|---|---|---:|",
        f"| input | {len(report['inputs'])} file(s) | {_format_count(report['pairs_in'])} pairs in |",
    ]
    if report["bad_lines"]["count"] or report["options"].get("skip_bad_lines"):
        lines.append(
            f"| bad lines | skipped (not UTF-8, wrong column count, bad score) | "
            f"{_format_count(report['bad_lines']['count'])} lines |"
        )
    for step in report["steps"]:
        if step["name"] == "lowercase":
            changed = step.get("changed", 0)
            setting = step["description"] if step["enabled"] else "off"
            lines.append(f"| lowercase | {setting} | 0 ({changed:,} pairs changed) |")
            continue
        setting = step["description"] if step["enabled"] else "off"
        removed = step["removed"] if step["enabled"] else None
        lines.append(f"| {step['name']} | {setting} | {_format_count(removed)} |")
    lines.append(f"| **output** | {report['num_shards']} parquet shard(s) | **{report['pairs_out']:,} pairs out** |")
    seconds = report["seconds"]
    lines += [
        "",
        f"Filtering and writing took {seconds['filter_and_write']:.1f} s "
        f"({report['pairs_per_second']:,.0f} pairs/s in); tokenizer training {seconds['tokenizer']:.1f} s.",
    ]
    if report["bad_lines"]["examples"]:
        lines += ["", "First skipped lines:", ""] + [f"- `{m}`" for m in report["bad_lines"]["examples"]]
    return "\n".join(lines) + "\n"


def plot_histogram(histogram: dict, path: Path, title: str, xlabel: str, marks: list[tuple[float, str]]) -> None:
    """A bar chart of a streamed histogram with the filter thresholds as dashed lines (PNG)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # Figure + Agg canvas directly: no pyplot, so the caller's matplotlib backend is left alone.
    edges, counts = histogram["edges"], histogram["counts"]
    figure = Figure(figsize=(6.4, 3.6), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    widths = [b - a for a, b in zip(edges[:-1], edges[1:], strict=True)]
    axes.bar(edges[:-1], counts, width=widths, align="edge", color="#4c72b0", edgecolor="white", linewidth=0.3)
    for value, label in marks:
        axes.axvline(value, color="#c44e52", linestyle="--", linewidth=1.2, label=label)
    if marks:
        axes.legend(loc="upper right", fontsize=8)
    axes.set_title(title, fontsize=10)
    axes.set_xlabel(xlabel)
    axes.set_ylabel("pairs")
    figure.tight_layout()
    figure.savefig(path)


def write_report(report: dict, folder: Path) -> list[Path]:
    """Write `report.json`, `report.md` and the histogram PNGs into `folder`; returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, spec in report.get("histograms", {}).items():
        if not sum(spec["counts"]):
            continue
        path = folder / f"{name}_histogram.png"
        marks = [(value, label) for value, label in spec.get("marks", [])]
        plot_histogram(spec, path, spec["title"], spec["xlabel"], marks)
        report.setdefault("plots", {})[name] = f"{REPORT_DIR}/{path.name}"
        written.append(path)
    (folder / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    title = f"# psp prepare {report['kind']}: report\n\n"
    (folder / "report.md").write_text(title + report_markdown(report), encoding="utf-8")
    return [folder / "report.json", folder / "report.md", *written]


def size_category(rows: int) -> str:
    """The Hub's `size_categories` bucket for a dataset of `rows` rows."""
    for limit, name in [
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
        (10_000_000, "1M<n<10M"),
        (100_000_000, "10M<n<100M"),
    ]:
        if rows < limit:
            return name
    return "100M<n<1B"


def dataset_card(report: dict) -> str:
    """`README.md` of a prepared dataset (`huggingface_hub.DatasetCard`): YAML metadata with `configs`, then what
    is in it and how it was made."""
    kind = report["kind"]
    columns = report["columns"]
    languages = sorted(set(report["languages"]))
    from huggingface_hub import DatasetCard, DatasetCardData

    metadata = DatasetCardData(
        language=languages,
        task_categories=["sentence-similarity"],
        size_categories=[size_category(report["pairs_out"])],
        tags=["psp-hf", "paraphrase" if kind == "paraphrases" else "bitext"],
        configs=[{"config_name": "default", "data_files": [{"split": "train", "path": f"{DATA_DIR}/{SHARD_PATTERN}"}]}],
    )
    if kind == "paraphrases":
        what = "English paraphrase pairs" if languages == ["en"] else f"paraphrase pairs ({', '.join(languages)})"
        column_text = (
            "- `sentence1`, `sentence2`: the pair (lowercased when lowercasing was on)\n"
            + ("- `score`: paraphrase score (input column or psp-model cosine)\n" if "score" in columns else "")
            + "- `overlap`: shared word trigrams ÷ trigrams of the shorter side\n"
        )
    else:
        lang = report["lang"]
        what = f"{lang}–English bitext"
        column_text = f"- `{lang}`: the {lang} sentence\n- `en`: its English translation\n"
    tokenizer = ""
    if report.get("tokenizer"):
        tok = report["tokenizer"]
        tokenizer = (
            f"\n## Tokenizer\n\n`{TOKENIZER_DIR}/` holds the sentencepiece unigram vocabulary trained on this data "
            f"({tok['pieces']:,} pieces, lowercase={tok['lowercase']}"
            + (", shared by both languages" if kind == "bitext" else "")
            + "): `tokenizer.json` (fast tokenizer), `tokenizer_config.json`, `sentencepiece.model`. "
            "psp training picks it up from here.\n"
        )
    plots = "".join(f"\n![{name}]({path})\n" for name, path in report.get("plots", {}).items())
    body = f"""
# {what} prepared with psp-hf

Made by `psp prepare {kind}` (psp-hf {report["psp_hf_version"]}): {report["pairs_out"]:,} pairs in
{report["num_shards"]} parquet shard(s) under `{DATA_DIR}/`{
        ", in random order" if report["options"].get("shuffle") else ""
    }.

```python
from datasets import load_dataset

pairs = load_dataset("{report.get("repo_id") or report.get("out") or "<this folder>"}", split="train", streaming=True)
```

## Columns

{column_text}
## How it was made

Command: `{report["command"]}`

{report_markdown(report)}{plots}{tokenizer}
Inputs: {", ".join(f"`{Path(item['path']).name}` ({item['pairs']:,} pairs)" for item in report["inputs"])}.
The full report is in `{REPORT_DIR}/report.json`.
"""
    return str(DatasetCard(f"---\n{metadata.to_yaml()}\n---\n{body}"))
