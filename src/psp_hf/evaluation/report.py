"""What a run writes: the JSON report, Markdown tables laid out like the papers', and the model-index block.

The papers' own rows (from their tables) are printed beside the measured ones; a paper number is never
mixed into a measured row.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import math
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import PSPInputError
from . import data as data_module
from .model_index import card_results, model_index, model_index_yaml
from .task_names import SENTEVAL_TASKS, STS_YEAR_TASKS

REPORT_FORMAT = "psp-eval/1"

# Wieting et al. 2022 (P-SP) and Wieting & Gimpel 2018 (ParaNMT), English STS Pearson x100, mean per year.
_STS_COLUMNS = (*STS_YEAR_TASKS, "avg")
PAPER_STS_ROWS: dict[str, dict[str, float]] = {
    "P-SP (paper, 25.85M ParaNMT pairs)": dict(zip(_STS_COLUMNS, (68.7, 64.7, 78.1, 81.4, 80.0, 74.6), strict=True)),
    "Sentence-BERT (paper)": dict(zip(_STS_COLUMNS, (66.9, 63.2, 74.2, 77.3, 72.8, 70.9), strict=True)),
    "ParaNMT WORD,TRIGRAM 600-d (paper)": dict(zip(_STS_COLUMNS, (67.8, 62.7, 77.4, 80.3, 78.1, 73.3), strict=True)),
    "ParaNMT WORD 300-d (paper)": dict(zip(_STS_COLUMNS, (66.2, 61.8, 76.2, 79.3, 77.5, 72.2), strict=True)),
}
PAPER_STSB_ROWS: dict[str, dict[str, float]] = {"ParaNMT WORD,TRIGRAM 600-d (paper)": {"stsb-test-pearson": 79.9}}
PAPER_STS17_ROWS: dict[str, dict[str, float]] = {
    "P-SP (paper)": {"ar-ar": 76.2, "ar-en": 78.3, "es-es": 85.8, "es-en": 78.4, "tr-en": 79.2}
}
PAPER_TATOEBA_ROWS: dict[str, dict[str, float]] = {
    "P-SP (paper)": {"ar": 8.8, "de": 1.5, "es": 2.4, "fr": 5.4, "ru": 5.6, "tr": 1.4}
}

_YEAR_LABELS = {task: f"20{task[3:]}" for task in STS_YEAR_TASKS}
_SENTEVAL_LABELS = {
    "mr": "MR", "cr": "CR", "subj": "SUBJ", "mpqa": "MPQA", "trec": "TREC", "sst2": "SST-2", "sst5": "SST-5",
    "mrpc": "MRPC", "sicke": "SICK-E",
}  # fmt: skip
_VERSIONED = (
    "psp-hf", "numpy", "scipy", "scikit-learn", "torch", "transformers", "tokenizers", "evaluate", "datasets",
    "huggingface-hub", "sentence-transformers", "model2vec",
)  # fmt: skip


def library_versions() -> dict[str, str | None]:
    """Versions of Python and of the libraries that can change a number."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def build_report(evaluations: Sequence[dict], settings: Mapping[str, Any]) -> dict:
    """The JSON report of a run: versions, settings, data checksums, and every model's numbers."""
    files: set[Path] = set()
    data_dir = None
    for evaluation in evaluations:
        data_dir = Path(evaluation["data_dir"])
        files.update(data_dir / name for name in evaluation["files"])
    checksums = data_module.file_checksums(data_dir, files) if data_dir is not None else {}
    models = []
    for evaluation in evaluations:
        entry = dict(evaluation)
        entry["card_results"] = card_results(evaluation)
        entry["model_index"] = model_index(evaluation)
        models.append(entry)
    return {
        "format": REPORT_FORMAT,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "units": "Pearson/Spearman x100; Tatoeba error rate in %; accuracy in %; timings in seconds",
        "versions": library_versions(),
        "settings": dict(settings),
        "data": {
            "dir": str(data_dir) if data_dir is not None else None,
            "files": checksums,
            # null when nothing could be checked (no MANIFEST.tsv): not a claim that the data differs.
            "all_match_manifest": (
                all(item["matches_manifest"] for item in checksums.values())
                if any(item["matches_manifest"] is not None for item in checksums.values())
                else None
            ),
            # Files whose sha256 differs from MANIFEST.tsv's (files the manifest does not list are not counted).
            "modified_files": sorted(name for name, item in checksums.items() if item["matches_manifest"] is False),
        },
        "models": models,
    }


# ----------------------------------------------------------------------------------------------- Markdown
def _number(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _mean_or_none(values: Sequence[float | None]) -> float | None:
    return sum(values) / len(values) if values and all(v is not None for v in values) else None  # type: ignore[misc]


def markdown_report(report: Mapping[str, Any]) -> str:
    """Markdown tables laid out like the papers' tables, the papers' rows first, then one row per model."""
    models = report["models"]
    lines: list[str] = []

    years = [task for task in STS_YEAR_TASKS if any(task in m["results"] for m in models)]
    if years:
        header = ["model", *(_YEAR_LABELS[task] for task in years), "avg"]
        rows = [
            [name, *(_number(paper.get(task)) for task in years), _number(paper["avg"] if len(years) == 5 else None)]
            for name, paper in PAPER_STS_ROWS.items()
        ]
        for model in models:
            values = [model["results"].get(task, {}).get("pearson_mean") for task in years]
            rows.append([f"**{model['model']['name']}**", *map(_number, values), _number(_mean_or_none(values))])
        lines += ["### English STS 2012–2016 — Pearson ×100, mean of each year's datasets (papers' protocol)", ""]
        lines += _table(header, rows) + [""]
        rows = []
        for model in models:
            values = [model["results"].get(task, {}).get("all_spearman") for task in years]
            rows.append([f"**{model['model']['name']}**", *map(_number, values), _number(_mean_or_none(values))])
        lines += ["Spearman ×100 on each year's pairs together (Reimers & Gurevych's protocol):", ""]
        lines += _table(header, rows) + [""]
        lines += _sts_dataset_table(models, years)

    if any("stsb" in m["results"] or "sickr" in m["results"] for m in models):
        header = ["model", "STS-B dev P", "STS-B dev S", "STS-B test P", "STS-B test S"]
        header += ["SICK-R test P", "SICK-R test S"]
        rows = [
            [name, "—", "—", _number(paper.get("stsb-test-pearson")), "—", "—", "—"]
            for name, paper in PAPER_STSB_ROWS.items()
        ]
        for model in models:
            results = model["results"]
            cells = []
            for task, split in (("stsb", "dev"), ("stsb", "test"), ("sickr", "test")):
                scores = results.get(task, {}).get(split, {})
                cells += [_number(scores.get("pearson")), _number(scores.get("spearman"))]
            rows.append([f"**{model['model']['name']}**", *cells])
        lines += ["### STS Benchmark and SICK-R — cosine, Pearson (P) / Spearman (S) ×100", ""]
        lines += _table(header, rows) + [""]

    if any("sts17" in m["results"] for m in models):
        pairs = _ordered_keys(m["results"].get("sts17", {}) for m in models)
        rows = [[name, *(_number(paper.get(pair)) for pair in pairs)] for name, paper in PAPER_STS17_ROWS.items()]
        for model in models:
            scores = model["results"].get("sts17", {})
            rows.append([f"**{model['model']['name']}**", *(_number(scores.get(p, {}).get("pearson")) for p in pairs)])
        lines += ["### STS17 — Pearson ×100 (cosine)", ""]
        lines += _table(["model", *pairs], rows) + [""]

    if any("tatoeba" in m["results"] for m in models):
        languages = _ordered_keys(m["results"].get("tatoeba", {}) for m in models)
        rows = []
        for name, paper in PAPER_TATOEBA_ROWS.items():
            values = [paper.get(language) for language in languages]
            rows.append([name, *map(_number, values), _number(_mean_or_none(values))])
        for model in models:
            scores = model["results"].get("tatoeba", {})
            values = [scores.get(language, {}).get("error_rate") for language in languages]
            rows.append([f"**{model['model']['name']}**", *map(_number, values), _number(_mean_or_none(values))])
        margin_rows = _tatoeba_margin_rows(models, languages)
        title = "### Tatoeba — error rate %, nearest cosine neighbour, mean of both directions"
        lines += [title + (" (margin rows: ratio margin over k neighbours)" if margin_rows else ""), ""]
        lines += _table(["model", *languages, "avg"], rows + margin_rows) + [""]
        paper_languages = [language for language in PAPER_TATOEBA_ROWS["P-SP (paper)"] if language in languages]
        if paper_languages:
            own = [PAPER_TATOEBA_ROWS["P-SP (paper)"][language] for language in paper_languages]
            lines += [
                f"The P-SP paper reports no zh; its mean over {', '.join(paper_languages)} is "
                f"{sum(own) / len(own):.1f} (LASER: 4.0 over ar, de, es, fr, ru, tr).",
                "",
            ]

    transfer = [task for task in SENTEVAL_TASKS if any(task in m["results"] for m in models)]
    if transfer:
        labels = [_SENTEVAL_LABELS[task] + (" acc/F1" if task == "mrpc" else "") for task in transfer]
        header = ["model", *labels, "avg"]
        rows = []
        for model in models:
            results = model["results"]
            cells, values = [], []
            for task in transfer:
                scores = results.get(task)
                values.append(scores["accuracy"] if scores else None)
                cell = _number(values[-1])
                if task == "mrpc" and scores:
                    cell += f"/{_number(scores.get('f1'))}"
                cells.append(cell)
            rows.append([f"**{model['model']['name']}**", *cells, _number(_mean_or_none(values))])
        settings = report.get("settings", {})
        lines += [
            "### SentEval transfer — test accuracy %, logistic regression on frozen embeddings",
            "",
        ]
        lines += _table(header, rows) + [""]
        lines += [
            f"MR/CR/SUBJ/MPQA: nested {settings.get('senteval_kfold', 10)}-fold CV; TREC/MRPC: C by "
            f"{settings.get('senteval_kfold', 10)}-fold CV on train; SST/SICK-E: C on dev. Pair features "
            "[u, v, |u−v|, u·v]. The P-SP papers report no SentEval numbers.",
            "",
        ]

    lines += _timing_table(models)
    data = report.get("data", {})
    files = data.get("files", {})
    if files:
        matched = sum(1 for item in files.values() if item["matches_manifest"])
        lines += [f"Data: {data.get('dir')} — {matched}/{len(files)} files read match MANIFEST.tsv checksums.", ""]
        if data.get("modified_files"):
            lines += [f"**Modified data** (sha256 differs from MANIFEST.tsv): {', '.join(data['modified_files'])}.", ""]
    hub = next((model["hub"] for model in models if model.get("hub")), None)
    if hub:
        read = ", ".join(f"{name}@{revision[:12]}" for name, revision in sorted(hub["datasets"].items()))
        lines += [f"Sets read from Hub copies: {read}.", ""]
        lines += [f"Protocol, {task}: {text}." for task, text in hub.get("protocols", {}).items()]
    return "\n".join(lines).rstrip() + "\n"


def _tatoeba_margin_rows(models: Sequence[Mapping], languages: Sequence[str]) -> list[list[str]]:
    """One row per model run with `--tatoeba-margin-k`: its error rates by ratio-margin retrieval."""
    rows = []
    for model in models:
        scores = model["results"].get("tatoeba", {})
        per_language = [scores.get(language, {}) for language in languages]
        if not any("error_rate_margin" in item for item in per_language):
            continue
        values = [item.get("error_rate_margin") for item in per_language]
        k = next(item["margin_k"] for item in per_language if "margin_k" in item)
        rows.append(
            [f"**{model['model']['name']}** margin k={k}", *map(_number, values), _number(_mean_or_none(values))]
        )
    return rows


def _sts_dataset_table(models: Sequence[Mapping], years: Sequence[str]) -> list[str]:
    """Per sub-dataset Pearson (one column per model), as in the STS overview tables."""
    rows = []
    for task in years:
        names = _ordered_keys(m["results"].get(task, {}).get("datasets", {}) for m in models)
        for name in names:
            cells = [
                _number(m["results"].get(task, {}).get("datasets", {}).get(name, {}).get("pearson")) for m in models
            ]
            rows.append([_YEAR_LABELS[task], name, *cells])
    if not rows:
        return []
    header = ["year", "dataset", *(f"**{m['model']['name']}**" for m in models)]
    return ["<details><summary>Pearson ×100 per STS dataset</summary>", "", *_table(header, rows), "", "</details>", ""]


def _ordered_keys(mappings: Any) -> list[str]:
    keys: list[str] = []
    for mapping in mappings:
        for key, value in mapping.items():
            if isinstance(value, Mapping) and key not in keys:
                keys.append(key)
    return keys


def _timing_table(models: Sequence[Mapping]) -> list[str]:
    groups = {
        "STS12–16, STS-B, SICK-R": (*STS_YEAR_TASKS, "stsb", "sickr"),
        "STS17 + Tatoeba": ("sts17", "tatoeba"),
        "SentEval": SENTEVAL_TASKS,
    }
    present = [g for g, tasks in groups.items() if any(t in m["timings"] for m in models for t in tasks)]
    if not present:
        return []
    rows = []
    for model in models:
        timings = model["timings"]
        cells = [_number(sum(timings.get(t, 0.0) for t in groups[g]), 1) for g in present]
        rows.append([f"**{model['model']['name']}**", *cells, _number(sum(timings.values()), 1)])
    return ["Wall time (s) per task group, this machine:", "", *_table(["model", *present, "total"], rows), ""]


# ----------------------------------------------------------------------------------------------- files
def write_outputs(report: Mapping[str, Any], output: str | os.PathLike) -> list[Path]:
    """Write `<output>` (JSON), `<output>.md`-style Markdown and `<stem>.model-index.yaml`, each atomically."""
    from ..io.writing import atomic_path

    output = Path(output)
    if output.suffix.lower() in (".md", ".yaml", ".yml"):
        raise PSPInputError(f"--output {output}: give the JSON path (e.g. results.json); the .md is written beside it")
    markdown_path = output.with_suffix(".md")
    index_path = output.with_name(output.stem + ".model-index.yaml")
    contents = {
        output: report_json(report),
        markdown_path: markdown_report(report),
        index_path: "".join(
            (f"# {model['model']['name']}\n" if len(report["models"]) > 1 else "") + model_index_yaml(model)
            for model in report["models"]
        ),
    }
    for path, text in contents.items():
        with atomic_path(path) as tmp:
            tmp.write_text(text, encoding="utf-8")
    return list(contents)


def report_json(report: Mapping[str, Any]) -> str:
    """The report as strict JSON text (NaN as null)."""
    return json.dumps(_finite(report), indent=2, ensure_ascii=False, default=_json_default) + "\n"


def _finite(value: Any) -> Any:
    """NaN and infinities (an undefined correlation) as null, so the file is strict JSON."""
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _json_default(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
