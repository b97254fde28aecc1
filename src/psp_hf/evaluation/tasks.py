"""The evaluation tasks and the harness that runs them: `evaluate_model` (STS scoring itself: `sts.py`).

Every score is x100, as in the papers' tables: Pearson/Spearman x100, Tatoeba error rate in %, accuracy in %.
STS similarities are the cosine of the two embeddings (unsupervised, no training on STS data).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..data_folder import existing_data_dir
from ..errors import PSPInputError
from ..inference.ratio_margin import margin_retrieval_errors
from . import data as data_module
from . import senteval
from .adapters import EncoderAdapter
from .sts import DEV_SPLITS, correlation, embed_sentences, load_metric, pair_cosines, sts_dev_score
from .task_names import (
    ALL_TASKS,
    DEFAULT_TASKS,
    DEV_TASKS,
    FAST_TASKS,
    SENTEVAL_TASKS,
    STS_TASKS,
    STS_YEAR_TASKS,
    TASK_GROUPS,
    resolve_tasks,
)
from .wrapping import wrap_encoder


@dataclass
class _Run:
    """What every task needs: the encoder, where the data is, and the run's options."""

    encoder: EncoderAdapter
    data_dir: Path
    batch_size: int | None = None
    progress: bool = False
    tatoeba_languages: Sequence[str] = data_module.TATOEBA_DEFAULT_LANGUAGES
    sts17_pairs: Sequence[str] = data_module.STS17_DEFAULT_PAIRS
    senteval_kfold: int = 10
    seed: int = senteval.SENTEVAL_SEED
    tatoeba_margin_k: int = 0  # > 0: Tatoeba also retrieves by ratio margin over this many neighbours
    files: set[Path] = field(default_factory=set)
    task: str = ""

    def use(self, item: Any) -> Any:
        """Record the files a data object came from (for the checksums in the report)."""
        self.files.update(item.paths)
        return item

    def embed(self, sentences: Sequence[str], description: str) -> np.ndarray:
        """Embeddings of `sentences` (see `sts.embed_sentences`); every task makes one call with all its sentences,
        which is when the encoder is told the task (SentEval's `prepare`)."""
        settings = {"task_path": str(self.data_dir), "kfold": self.senteval_kfold, "seed": self.seed}
        self.encoder.start_task(self.task, sentences, settings)
        return embed_sentences(self.encoder, sentences, self.batch_size, self.progress, description)

    def classify_bar(self, task: str, total: int):
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=f"{task}: classify", disable=not self.progress, leave=False, file=sys.stderr)


# ---------------------------------------------------------------------------------------------- STS tasks
def _score_pair_sets(run: _Run, pair_sets: Sequence[data_module.PairSet], task: str) -> list[np.ndarray]:
    return pair_cosines(run.embed, pair_sets, f"{task}: encode")


def _run_sts_year(run: _Run, task: str) -> dict:
    pair_sets = [run.use(pairs) for pairs in data_module.read_sts_year(run.data_dir, task)]
    similarities = _score_pair_sets(run, pair_sets, task)
    per_dataset = {pairs.name: correlation(sim, pairs.gold) for pairs, sim in zip(pair_sets, similarities, strict=True)}
    everything = correlation(np.concatenate(similarities), np.concatenate([p.gold for p in pair_sets]))
    sizes = np.array([scores["n"] for scores in per_dataset.values()], dtype=np.float64)
    pearsons = np.array([scores["pearson"] for scores in per_dataset.values()])
    spearmans = np.array([scores["spearman"] for scores in per_dataset.values()])
    return {
        "datasets": per_dataset,
        # The papers' number: the unweighted mean of the sub-datasets' Pearson.
        "pearson_mean": float(pearsons.mean()),
        "spearman_mean": float(spearmans.mean()),
        "pearson_wmean": float(pearsons @ sizes / sizes.sum()),
        # Reimers & Gurevych's number: one correlation over the year's pairs put together.
        "all_spearman": everything["spearman"],
        "all_pearson": everything["pearson"],
        "n": everything["n"],
    }


def _run_stsb(run: _Run, task: str) -> dict:
    splits = [run.use(data_module.read_stsb(run.data_dir, split)) for split in ("dev", "test")]
    similarities = _score_pair_sets(run, splits, task)
    return {
        split: correlation(sim, pairs.gold)
        for split, pairs, sim in zip(("dev", "test"), splits, similarities, strict=True)
    }


def _run_sickr(run: _Run, task: str) -> dict:
    test = run.use(data_module.read_sick_relatedness(run.data_dir, "test"))
    (similarity,) = _score_pair_sets(run, [test], task)
    return {"test": correlation(similarity, test.gold)}


def _run_sts17(run: _Run, task: str) -> dict:
    pair_sets = [run.use(data_module.read_sts17(run.data_dir, pair)) for pair in run.sts17_pairs]
    similarities = _score_pair_sets(run, pair_sets, task)
    out: dict[str, Any] = {
        pairs.name: correlation(sim, pairs.gold) for pairs, sim in zip(pair_sets, similarities, strict=True)
    }
    out["pearson_mean"] = float(np.mean([out[pairs.name]["pearson"] for pairs in pair_sets]))
    return out


def _run_tatoeba(run: _Run, task: str) -> dict:
    languages = list(run.tatoeba_languages)
    if [language.lower() for language in languages] == ["all"]:
        languages = data_module.tatoeba_languages(run.data_dir)
        if not languages:
            raise PSPInputError(f"tatoeba: no test sets in {run.data_dir / 'tatoeba' / 'v1'}")
    bitexts = [run.use(data_module.read_tatoeba(run.data_dir, language)) for language in languages]
    sentences = [s for bitext in bitexts for s in (*bitext.other, *bitext.english)]
    embeddings = run.embed(sentences, f"{task}: encode")
    metric = load_metric("bitext_mining")
    out: dict[str, Any] = {}
    at = 0
    for bitext in bitexts:
        n = len(bitext)
        # Plain lists reach the metric's Arrow table about twice as fast as numpy rows.
        source, target = embeddings[at : at + n], embeddings[at + n : at + 2 * n]
        scores = metric.compute(source_embeddings=source.tolist(), target_embeddings=target.tolist())
        at += 2 * n
        out[bitext.language] = {
            "iso639_3": data_module.tatoeba_code(bitext.language),
            "error_rate": 100 * scores["error_rate"],
            "error_rate_xx_to_en": 100 * scores["error_rate_source_to_target"],
            "error_rate_en_to_xx": 100 * scores["error_rate_target_to_source"],
            "n": scores["n"],
        }
        if run.tatoeba_margin_k:
            xx_to_en, en_to_xx = margin_retrieval_errors(source, target, run.tatoeba_margin_k)
            out[bitext.language].update(error_rate_margin=50 * (xx_to_en + en_to_xx), margin_k=run.tatoeba_margin_k)
    out["error_rate_mean"] = float(np.mean([out[bitext.language]["error_rate"] for bitext in bitexts]))
    if run.tatoeba_margin_k:
        out["error_rate_margin_mean"] = float(np.mean([out[b.language]["error_rate_margin"] for b in bitexts]))
    return out


def _run_bitext_dev(run: _Run, task: str) -> dict:
    """Retrieval error (%, nearest cosine, mean of both directions) on the dev pairs of `task` (xnli-dev, pud-dev)
    of the run's Tatoeba languages that have them (`all`: every language with a file)."""
    from .metrics.bitext_mining import nearest_neighbour_errors  # Tatoeba's retrieval, as its metric scores it

    languages = list(run.tatoeba_languages)
    if [language.lower() for language in languages] == ["all"]:
        languages = data_module.bitext_dev_languages(run.data_dir, task)
    else:
        present = set(data_module.bitext_dev_languages(run.data_dir, task))
        languages = [language for language in languages if data_module.two_letter_code(language) in present]
    if not languages:
        folder = run.data_dir / Path(data_module.BITEXT_DEV_PATTERNS[task]).parent
        raise PSPInputError(f"{task}: none of the languages {list(run.tatoeba_languages)} has a file in {folder}")
    bitexts = [run.use(data_module.read_bitext_dev(run.data_dir, task, language)) for language in languages]
    embeddings = run.embed([s for bitext in bitexts for s in (*bitext.other, *bitext.english)], f"{task}: encode")
    out: dict[str, Any] = {}
    at = 0
    for bitext in bitexts:
        n = len(bitext)
        xx_to_en, en_to_xx = nearest_neighbour_errors(embeddings[at : at + n], embeddings[at + n : at + 2 * n])
        at += 2 * n
        out[bitext.language] = {
            "error_rate": 50 * (xx_to_en + en_to_xx),
            "error_rate_xx_to_en": 100 * xx_to_en,
            "error_rate_en_to_xx": 100 * en_to_xx,
            "n": n,
        }
    out["error_rate_mean"] = float(np.mean([out[bitext.language]["error_rate"] for bitext in bitexts]))
    return out


# ---------------------------------------------------------------------------------------------- SentEval
def _run_senteval_binary(run: _Run, task: str) -> dict:
    items = run.use(data_module.read_senteval_binary(run.data_dir, task))
    features = run.embed(items.sentences, f"{task}: encode")
    with run.classify_bar(task, run.senteval_kfold) as bar:
        return senteval.nested_cv_accuracy(
            features, items.labels, 2, kfold=run.senteval_kfold, seed=run.seed, progress=lambda: bar.update(1)
        )


def _run_trec(run: _Run, task: str) -> dict:
    train, test = (run.use(data_module.read_trec(run.data_dir, split)) for split in ("train", "test"))
    features = run.embed([*train.sentences, *test.sentences], f"{task}: encode")
    with run.classify_bar(task, 1) as bar:
        result, _ = senteval.kfold_then_test(
            features[: len(train)], train.labels, features[len(train) :], test.labels,
            len(data_module.TREC_CLASSES), kfold=run.senteval_kfold, seed=run.seed, progress=lambda: bar.update(1),
        )  # fmt: skip
    return result


def _run_sst(run: _Run, task: str) -> dict:
    splits = [run.use(data_module.read_sst(run.data_dir, task, split)) for split in ("train", "dev", "test")]
    features = run.embed([s for split in splits for s in split.sentences], f"{task}: encode")
    bounds = np.cumsum([0, *(len(split) for split in splits)])
    parts = [(features[bounds[i] : bounds[i + 1]], splits[i].labels) for i in range(3)]
    with run.classify_bar(task, 1) as bar:
        return senteval.dev_then_test(*parts, n_classes=2 if task == "sst2" else 5, progress=lambda: bar.update(1))


def _pair_task_features(run: _Run, task: str, splits: Sequence[data_module.PairSet]) -> list[np.ndarray]:
    sentences = [s for pairs in splits for s in (*pairs.sentences1, *pairs.sentences2)]
    embeddings = run.embed(sentences, f"{task}: encode")
    out, at = [], 0
    for pairs in splits:
        n = len(pairs)
        out.append(senteval.pair_features(embeddings[at : at + n], embeddings[at + n : at + 2 * n]))
        at += 2 * n
    return out


def _run_mrpc(run: _Run, task: str) -> dict:
    train, test = (run.use(data_module.read_mrpc(run.data_dir, split)) for split in ("train", "test"))
    train_features, test_features = _pair_task_features(run, task, [train, test])
    with run.classify_bar(task, 1) as bar:
        result, predictions = senteval.kfold_then_test(
            train_features, train.gold, test_features, test.gold, 2,
            kfold=run.senteval_kfold, seed=run.seed, progress=lambda: bar.update(1),
        )  # fmt: skip
    result["f1"] = 100 * senteval.binary_f1(predictions, test.gold)
    return result


def _run_sicke(run: _Run, task: str) -> dict:
    splits = [run.use(data_module.read_sick_entailment(run.data_dir, split)) for split in ("train", "trial", "test")]
    features = _pair_task_features(run, task, splits)
    parts = [(x, pairs.gold) for x, pairs in zip(features, splits, strict=True)]
    with run.classify_bar(task, 1) as bar:
        return senteval.dev_then_test(
            *parts, n_classes=len(data_module.SICK_ENTAILMENT_CLASSES), progress=lambda: bar.update(1)
        )


_RUNNERS: dict[str, Callable[[_Run, str], dict]] = {
    **{task: _run_sts_year for task in STS_YEAR_TASKS},
    "stsb": _run_stsb,
    "sickr": _run_sickr,
    "sts17": _run_sts17,
    "tatoeba": _run_tatoeba,
    **{task: _run_bitext_dev for task in DEV_TASKS},
    **{task: _run_senteval_binary for task in data_module.SENTEVAL_BINARY},
    "trec": _run_trec,
    "sst2": _run_sst,
    "sst5": _run_sst,
    "mrpc": _run_mrpc,
    "sicke": _run_sicke,
}


def _headline(task: str, result: dict) -> str:
    """One number per task for the progress log."""
    if task in STS_YEAR_TASKS:
        return f"Pearson {result['pearson_mean']:.1f}"
    if task == "stsb":
        return f"test Pearson {result['test']['pearson']:.1f}"
    if task == "sickr":
        return f"test Pearson {result['test']['pearson']:.1f}"
    if task == "sts17":
        return f"mean Pearson {result['pearson_mean']:.1f}"
    if task == "tatoeba" or task in DEV_TASKS:
        return f"mean error {result['error_rate_mean']:.1f} %"
    return f"accuracy {result['accuracy']:.1f}"


def summarize(results: dict[str, dict]) -> dict:
    """The averages the papers report, for whichever tasks were run."""
    summary: dict[str, Any] = {}
    years = [task for task in STS_YEAR_TASKS if task in results]
    if years:
        summary["sts12-16"] = {
            "years": years,
            "pearson_mean": float(np.mean([results[task]["pearson_mean"] for task in years])),
            "all_spearman_mean": float(np.mean([results[task]["all_spearman"] for task in years])),
        }
    transfer = [task for task in SENTEVAL_TASKS if task in results]
    if transfer:
        summary["senteval"] = {
            "tasks": transfer,
            "accuracy_mean": float(np.mean([results[task]["accuracy"] for task in transfer])),
        }
    return summary


def evaluate_model(
    encoder: Any,
    tasks: Iterable[str] | None = None,
    data_dir: str | os.PathLike | None = None,
    *,
    batch_size: int | None = None,
    tatoeba_languages: Sequence[str] = data_module.TATOEBA_DEFAULT_LANGUAGES,
    sts17_pairs: Sequence[str] = data_module.STS17_DEFAULT_PAIRS,
    senteval_kfold: int = 10,
    seed: int = senteval.SENTEVAL_SEED,
    tatoeba_margin_k: int = 0,
    show_progress: bool = False,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Score an encoder on `tasks` (default: all; groups such as `sts`, `fast`, `senteval` work too).

    `encoder` is an `EncoderAdapter` (see `load_encoder`), any object with `encode(sentences, batch_size=...,
    show_progress_bar=...)`, a function `list[str] -> array`, or SentEval's `(prepare, batcher)` pair (see
    `any_encoder`). Returns `{"model": ..., "results": {task: ...}, "summary": ..., "timings": {task:
    seconds}, "files": [data files read]}`; every score is x100. `tatoeba_margin_k` > 0 adds Tatoeba
    error rates of ratio-margin retrieval over that many neighbours (`error_rate_margin`) beside the plain cosine ones.
    """
    adapter = wrap_encoder(encoder)
    task_names = resolve_tasks(tasks)
    if senteval_kfold < 2:
        raise PSPInputError(f"--senteval-kfold must be at least 2, got {senteval_kfold}")
    unknown_pairs = [pair for pair in sts17_pairs if pair not in data_module.STS17_FILES]
    if unknown_pairs:
        raise PSPInputError(
            f"unknown STS17 pair(s) {', '.join(unknown_pairs)}; valid: {', '.join(data_module.STS17_FILES)}"
        )
    run = _Run(
        encoder=adapter,
        data_dir=existing_data_dir(data_dir),
        batch_size=batch_size,
        progress=show_progress,
        tatoeba_languages=tuple(tatoeba_languages),
        sts17_pairs=tuple(sts17_pairs),
        senteval_kfold=senteval_kfold,
        seed=seed,
        tatoeba_margin_k=tatoeba_margin_k,
    )
    results: dict[str, dict] = {}
    timings: dict[str, float] = {}
    for task in task_names:
        start = time.perf_counter()
        run.task = task
        results[task] = _RUNNERS[task](run, task)
        timings[task] = time.perf_counter() - start
        if log is not None:
            log(f"{adapter.name}  {task:<8} {_headline(task, results[task]):<24} {timings[task]:6.1f} s")
    data_dir_resolved = run.data_dir.resolve()
    files = sorted(
        path.resolve().relative_to(data_dir_resolved).as_posix()
        if path.resolve().is_relative_to(data_dir_resolved)
        else str(path)
        for path in run.files
    )
    out = {
        "model": adapter.info(),
        "results": results,
        "summary": summarize(results),
        "timings": timings,
        "files": files,
        "data_dir": str(data_dir_resolved),
    }
    from .hub_data import hub_provenance

    hub = hub_provenance(data_dir_resolved, files, task_names)
    if hub:  # a folder fetched from the Hub: its datasets' revisions, licences and protocol notes
        out["hub"] = hub
    return out


__all__ = [
    "ALL_TASKS",
    "DEFAULT_TASKS",
    "DEV_SPLITS",
    "FAST_TASKS",
    "SENTEVAL_TASKS",
    "STS_TASKS",
    "STS_YEAR_TASKS",
    "TASK_GROUPS",
    "evaluate_model",
    "load_metric",
    "resolve_tasks",
    "sts_dev_score",
    "summarize",
]
