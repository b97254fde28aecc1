"""From evaluation results to a model card's rows and `model-index`: the one mapping of result keys to tasks.

`psp eval` writes this block beside its report, and `psp_hf.hub.card` puts the same rows into the cards it
renders; the card side imports this module, never the other way round.

Results are a mapping of task name to metrics, nested as deep as needed, for example::

    {"sts12-16": {"pearson": 61.2, "spearman": 60.4},
     "stsb": {"test": {"pearson": 65.0}},
     "sts17": {"ar-ar": {"pearson": 55.0}},
     "tatoeba": {"de": {"error_rate": 12.0}}}

Leaves are numbers; the last key above a leaf is the metric, the keys above it name the task (joined with
"/"). Known tasks (SemEval STS, STS Benchmark, SICK, STS17, Tatoeba, SentEval) get their proper dataset names,
and in the `model-index` the Hub dataset id, config and split that link the result to the set on the Hub
(`mteb/sts12-sts`, `mteb/sts17-crosslingual-sts` with config `en-ar`, `mteb/tatoeba-bitext-mining` with config
`deu-eng`, ...) and the metric types the Hub's leaderboards use (`cos_sim_pearson`, `cos_sim_spearman`,
`accuracy`, `f1`). A row whose set has no Hub dataset (the STS12-16 mean, a year's single sub-dataset, MPQA,
STS17's es-en-wmt track) is shown in the card's table but left out of the `model-index`. Any other task is
kept under its own name, and linked only when that name is a Hub dataset id (`owner/name`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .data import STS17_HUB_CONFIGS, tatoeba_code
from .task_names import SENTEVAL_TASKS, STS_YEAR_TASKS

METRIC_NAMES = {
    "pearson": "Pearson (cosine)",
    "spearman": "Spearman (cosine)",
    "pearson_mean": "Pearson (cosine), mean over the year's datasets",
    "error_rate": "error rate",
    "accuracy": "accuracy",
    "f1": "F1",
}
# Metric types in the model-index, as the Hub's leaderboards and MTEB's cards spell them. The year's
# mean-of-datasets Pearson (the papers' number) is not MTEB's pooled `cos_sim_pearson`, so it has its own type.
METRIC_TYPES = {
    "pearson": "cos_sim_pearson",
    "spearman": "cos_sim_spearman",
    "pearson_mean": "cos_sim_pearson_mean_of_datasets",
    "error_rate": "error_rate",
    "accuracy": "accuracy",
    "f1": "f1",
}


@dataclass(frozen=True)
class CardTask:
    """How a task appears in a card: task type and name, and the dataset it was measured on.

    `dataset_type` is the Hub dataset id the `model-index` links to, or None where no Hub dataset holds the set
    (the row is then in the card's table only, never in the `model-index`).
    """

    task_type: str
    task_name: str
    dataset_name: str
    dataset_type: str | None
    dataset_config: str | None = None
    dataset_split: str | None = None


_STS = ("sentence-similarity", "Semantic Textual Similarity")
_MINING = ("bitext-mining", "Bitext Mining")
_CLASSIFICATION = ("text-classification", "Text Classification (SentEval)")

# SemEval STS 2012-2016, STS Benchmark, SICK-R, STS17 and Tatoeba: the MTEB copies on the Hub hold the same test
# sets as the files the harness reads. No `revision` is written for scores from the original files; scores read
# from the copies themselves (`psp eval --from-hub`) name the revision read.
# STS17 tracks -> the configs of mteb/sts17-crosslingual-sts: `data.STS17_HUB_CONFIGS`.
_STS17_CONFIGS = STS17_HUB_CONFIGS

# SentEval's sets: (name in the card, Hub dataset id or None, config, split). Only SICK (the former canonical
# `sick`, now RobZamp/sick), TREC (CogComp/trec), MRPC (GLUE) and MR (rotten_tomatoes: Pang & Lee's sentence
# polarity v1.0, which is SentEval's MR) have canonical Hub datasets. CR, SUBJ, SST-2 and SST-5 have none:
# the ids below are SetFit's copies, the most used ones (SetFit/sst2 and SetFit/sst5 are the sentence-level
# SST splits that SentEval uses; GLUE's sst2 is not: its train set is phrases and its test labels are hidden).
# MPQA has no Hub copy in common use, so it stays out of the model-index. MR, CR, SUBJ and MPQA are scored by
# cross-validation over the whole set, so they name no split.
_SENTEVAL: dict[str, tuple[str, str | None, str | None, str | None]] = {
    "mr": ("MR (movie reviews)", "cornell-movie-review-data/rotten_tomatoes", None, None),
    "cr": ("CR (product reviews)", "SetFit/SentEval-CR", None, None),
    "subj": ("SUBJ (subjectivity)", "SetFit/subj", None, None),
    "mpqa": ("MPQA (opinion polarity)", None, None, None),
    "trec": ("TREC (question types)", "CogComp/trec", None, "test"),
    "sst2": ("SST-2", "SetFit/sst2", None, "test"),
    "sst5": ("SST-5", "SetFit/sst5", None, "test"),
    "mrpc": ("MRPC (paraphrase detection)", "nyu-mll/glue", "mrpc", "test"),
    "sick-e": ("SICK-E (entailment)", "RobZamp/sick", None, "test"),
}
_HUB_SPLITS = {"dev": "validation"}  # the Hub copies call the dev split `validation`


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
        # A sub-dataset of a year (e.g. sts12/MSRpar) is not a config of the Hub copy, which pools the year.
        dataset = None if rest else f"mteb/sts{year.group(1)}-sts"
        return CardTask(*_STS, name, dataset, None, split or "test")
    if head in ("sts12-16", "sts-avg", "sts", "sts-2012-2016"):
        # A mean over five datasets is no dataset of its own: table only.
        return CardTask(*_STS, "SemEval STS 2012-2016 (mean of the years)", None, None, split or "test")
    if head in ("stsb", "sts-b", "stsbenchmark", "stsb-test", "stsb-dev"):
        split = split or ("dev" if head.endswith("dev") else "test")
        return CardTask(*_STS, f"STS Benchmark ({split})", "mteb/stsbenchmark-sts", None, _HUB_SPLITS.get(split, split))
    if head in ("sick-r", "sickr", "sick-r-test", "sick"):
        return CardTask(*_STS, "SICK-R", "mteb/sickr-sts", None, split or "test")
    if head.startswith("sts17"):
        pair = "-".join(part for part in [head[len("sts17") :].strip("-"), *rest] if part)
        name = f"STS17 ({pair})" if pair else "STS17"
        config = _STS17_CONFIGS.get(pair)
        return CardTask(*_STS, name, "mteb/sts17-crosslingual-sts" if config else None, config, "test")
    if head.startswith("tatoeba"):
        language = "-".join(part for part in [head[len("tatoeba") :].strip("-"), *rest] if part)
        code = tatoeba_code(language) if language else ""
        config = f"{code}-eng" if code and not code.endswith("-eng") else code or None
        name = f"Tatoeba ({config})" if config else "Tatoeba"
        return CardTask(*_MINING, name, "mteb/tatoeba-bitext-mining" if config else None, config, "test")
    senteval_key = "sick-e" if head in ("sicke", "sick-e") else head
    if senteval_key in _SENTEVAL:
        name, dataset, config, hub_split = _SENTEVAL[senteval_key]
        return CardTask(*_CLASSIFICATION, name, dataset, config, hub_split)
    # Any other task: linked only when its key is itself a Hub dataset id (`owner/name`).
    key = "/".join(path)
    dataset = key if re.fullmatch(r"[\w.-]+/[\w.-]+", key) else None
    return CardTask(*_STS, key, dataset, None, split)


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
    """`huggingface_hub.EvalResult`s for the card's `model-index`: the rows measured on a Hub dataset."""
    from huggingface_hub import EvalResult

    return [
        EvalResult(
            task_type=row.task.task_type,
            task_name=row.task.task_name,
            dataset_type=row.task.dataset_type,
            dataset_name=row.task.dataset_name,
            dataset_config=row.task.dataset_config,
            dataset_split=row.task.dataset_split,
            metric_type=METRIC_TYPES.get(row.metric, row.metric),
            metric_name=METRIC_NAMES.get(row.metric, row.metric),
            metric_value=round(row.value, 6),
        )
        for row in rows
        if row.task.dataset_type is not None
    ]


def card_results(evaluation: Mapping[str, Any]) -> dict:
    """Headline numbers of one `evaluate_model` result, in the nested layout `result_rows` reads."""
    results = evaluation["results"]
    out: dict[str, Any] = {}
    for task in STS_YEAR_TASKS:
        if task in results:
            year = results[task]
            out[task] = {
                "pearson_mean": year["pearson_mean"],
                "pearson": year["all_pearson"],
                "spearman": year["all_spearman"],
            }
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
    results = eval_results_for_card(rows)
    # Scores read from Hub copies (`psp eval --from-hub`) name the revision they were measured on.
    revisions = evaluation.get("hub", {}).get("datasets", {})
    for result in results:
        result.dataset_revision = revisions.get(result.dataset_type)
    return eval_results_to_model_index(name, results) if results else []


def model_index_yaml(evaluation: Mapping[str, Any], model_name: str | None = None) -> str:
    """The `model-index` block as YAML, ready to paste into a card's front matter."""
    import yaml

    return yaml.safe_dump({"model-index": model_index(evaluation, model_name)}, sort_keys=False, allow_unicode=True)


__all__ = [
    "METRIC_NAMES",
    "METRIC_TYPES",
    "CardTask",
    "ResultRow",
    "card_results",
    "describe_task",
    "eval_results_for_card",
    "model_index",
    "model_index_yaml",
    "result_rows",
]
