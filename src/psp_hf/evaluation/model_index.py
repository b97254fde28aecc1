"""From evaluation results to a model card's rows and `model-index`: the one mapping of result keys to tasks.

`psp eval` writes this block beside its report, and `psp_hf.hub.card` puts the same rows into the cards it
renders; the card side imports this module, never the other way round.

Results are a mapping of task name to metrics, nested as deep as needed, for example::

    {"sts12-16": {"pearson": 61.2, "spearman": 60.4},
     "stsb": {"test": {"pearson": 65.0}},
     "sts17": {"ar-ar": {"pearson": 55.0}},
     "tatoeba": {"de": {"error_rate": 12.0}}}

Leaves are numbers; the last key above a leaf is the metric, the keys above it name the task (joined with
"/"). Known tasks (SemEval STS, STS Benchmark, SICK, STS17, Tatoeba, SentEval) get their proper dataset names
and Hub dataset ids in the `model-index`; any other task is kept under its own name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .data import tatoeba_code
from .tasks import SENTEVAL_TASKS, STS_YEAR_TASKS

METRIC_NAMES = {
    "pearson": "Pearson (cosine)",
    "spearman": "Spearman (cosine)",
    "error_rate": "error rate",
    "accuracy": "accuracy",
    "f1": "F1",
}


@dataclass(frozen=True)
class CardTask:
    """How a task appears in a card's `model-index`: task type and name, and the dataset it was measured on."""

    task_type: str
    task_name: str
    dataset_name: str
    dataset_type: str
    dataset_config: str | None = None
    dataset_split: str | None = None


_STS = ("sentence-similarity", "Semantic Textual Similarity")
_MINING = ("bitext-mining", "Bitext Mining")
_CLASSIFICATION = ("text-classification", "Text Classification (SentEval)")

_SENTEVAL = {
    "mr": "MR (movie reviews)", "cr": "CR (product reviews)", "subj": "SUBJ (subjectivity)",
    "mpqa": "MPQA (opinion polarity)", "trec": "TREC (question types)", "sst2": "SST-2", "sst5": "SST-5",
    "mrpc": "MRPC (paraphrase detection)", "sick-e": "SICK-E (entailment)",
}  # fmt: skip


def describe_task(path: tuple[str, ...]) -> CardTask:
    """Dataset metadata of a task from its key path (`("sts17", "ar-ar")`, `("stsb", "test")`, ...)."""
    keys = [part.lower().replace("_", "-") for part in path]
    head, rest = keys[0], keys[1:]
    splits = {"test", "dev", "validation", "train", "trial"}
    split = next((key for key in rest if key in splits), None)
    rest = [key for key in rest if key not in splits]
    year = re.fullmatch(r"sts(1[2-6])", head)
    if year:
        name = f"SemEval STS 20{year.group(1)}" + (f" ({'/'.join(rest)})" if rest else "")
        return CardTask(*_STS, name, f"mteb/sts{year.group(1)}-sts", "/".join(rest) or None, split or "test")
    if head in ("sts12-16", "sts-avg", "sts", "sts-2012-2016"):
        return CardTask(*_STS, "SemEval STS 2012-2016 (mean of the years)", "sts12-16", None, split or "test")
    if head in ("stsb", "sts-b", "stsbenchmark", "stsb-test", "stsb-dev"):
        split = split or ("dev" if head.endswith("dev") else "test")
        return CardTask(*_STS, f"STS Benchmark ({split})", "mteb/stsbenchmark-sts", None, split)
    if head in ("sick-r", "sickr", "sick-r-test", "sick"):
        return CardTask(*_STS, "SICK-R", "mteb/sickr-sts", None, split or "test")
    if head.startswith("sts17"):
        pair = "-".join(part for part in [head[len("sts17") :].strip("-"), *rest] if part)
        name = f"STS17 ({pair})" if pair else "STS17"
        return CardTask(*_STS, name, "mteb/sts17-crosslingual-sts", pair or None, "test")
    if head.startswith("tatoeba"):
        language = "-".join(part for part in [head[len("tatoeba") :].strip("-"), *rest] if part)
        code = tatoeba_code(language) if language else ""
        config = f"{code}-eng" if code and not code.endswith("-eng") else code or None
        name = f"Tatoeba ({config})" if config else "Tatoeba"
        return CardTask(*_MINING, name, "mteb/tatoeba-bitext-mining", config, "test")
    if head in _SENTEVAL:
        return CardTask(*_CLASSIFICATION, _SENTEVAL[head], head, None, split)
    return CardTask(*_STS, "/".join(path), "/".join(keys), None, split)


@dataclass(frozen=True)
class ResultRow:
    """One measured number: which task and metric, its value, and the untrained table's value if known."""

    task: CardTask
    metric: str
    value: float
    baseline: float | None = None


def _leaves(results: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], float]:
    found: dict[tuple[str, ...], float] = {}
    for key, value in results.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping):
            found.update(_leaves(value, path))
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, (int, float)) and math.isfinite(float(value)):
            found[path] = float(value)
        # Strings, lists and the like are descriptions (dataset paths, sizes), not scores.
    return found


def result_rows(
    eval_results: Mapping[str, Any] | None, baseline_results: Mapping[str, Any] | None = None
) -> list[ResultRow]:
    """Flatten nested results into rows; a leaf at the top level counts as the task's `score`."""
    if not eval_results:
        return []
    baseline = _leaves(baseline_results or {})
    rows = []
    for path, value in _leaves(eval_results).items():
        task_path, metric = (path[:-1], path[-1]) if len(path) > 1 else (path, "score")
        rows.append(ResultRow(describe_task(task_path), metric, value, baseline.get(path)))
    return rows


def eval_results_for_card(rows: list[ResultRow]) -> list:
    """`huggingface_hub.EvalResult`s for the card's `model-index`."""
    from huggingface_hub import EvalResult

    return [
        EvalResult(
            task_type=row.task.task_type,
            task_name=row.task.task_name,
            dataset_type=row.task.dataset_type,
            dataset_name=row.task.dataset_name,
            dataset_config=row.task.dataset_config,
            dataset_split=row.task.dataset_split,
            metric_type=row.metric,
            metric_name=METRIC_NAMES.get(row.metric, row.metric),
            metric_value=round(row.value, 6),
        )
        for row in rows
    ]


def card_results(evaluation: Mapping[str, Any]) -> dict:
    """Headline numbers of one `evaluate_model` result, in the nested layout `result_rows` reads."""
    results = evaluation["results"]
    out: dict[str, Any] = {}
    for task in STS_YEAR_TASKS:
        if task in results:
            out[task] = {"pearson": results[task]["pearson_mean"], "spearman": results[task]["all_spearman"]}
    summary = evaluation.get("summary", {}).get("sts12-16")
    if summary and len(summary["years"]) == len(STS_YEAR_TASKS):
        out["sts12-16"] = {"pearson": summary["pearson_mean"], "spearman": summary["all_spearman_mean"]}
    if "stsb" in results:
        out["stsb"] = {split: _pick(results["stsb"][split], "pearson", "spearman") for split in ("dev", "test")}
    if "sickr" in results:
        out["sickr"] = {"test": _pick(results["sickr"]["test"], "pearson", "spearman")}
    if "sts17" in results:
        out["sts17"] = {
            pair: _pick(scores, "pearson", "spearman")
            for pair, scores in results["sts17"].items()
            if isinstance(scores, Mapping)
        }
    if "tatoeba" in results:
        out["tatoeba"] = {
            language: {"error_rate": scores["error_rate"]}
            for language, scores in results["tatoeba"].items()
            if isinstance(scores, Mapping)
        }
    for task in SENTEVAL_TASKS:
        if task in results:
            # The card's task table names SICK-E "sick-e".
            key = "sick-e" if task == "sicke" else task
            out[key] = _pick(results[task], "accuracy", *(("f1",) if task == "mrpc" else ()))
    return _rounded(out)


def _pick(scores: Mapping[str, Any], *keys: str) -> dict:
    return {key: scores[key] for key in keys if key in scores}


def _rounded(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, float):
        return round(value, 2) if math.isfinite(value) else value
    return value


def model_index(evaluation: Mapping[str, Any], model_name: str | None = None) -> list[dict]:
    """The `model-index` block of a model card for one `evaluate_model` result (the card's own rows)."""
    from huggingface_hub.repocard_data import eval_results_to_model_index

    rows = result_rows(card_results(evaluation))
    name = model_name or evaluation["model"]["name"]
    return eval_results_to_model_index(name, eval_results_for_card(rows)) if rows else []


def model_index_yaml(evaluation: Mapping[str, Any], model_name: str | None = None) -> str:
    """The `model-index` block as YAML, ready to paste into a card's front matter."""
    import yaml

    return yaml.safe_dump({"model-index": model_index(evaluation, model_name)}, sort_keys=False, allow_unicode=True)


__all__ = [
    "METRIC_NAMES",
    "CardTask",
    "ResultRow",
    "card_results",
    "describe_task",
    "eval_results_for_card",
    "model_index",
    "model_index_yaml",
    "result_rows",
]
