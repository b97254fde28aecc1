"""The evaluation sets from their public Hub copies (MTEB's), written in the data folder's layout.

`psp data fetch --for eval` and `psp eval --from-hub` (or `psp eval` without a data folder) write the files
`evaluation/data.py` reads, so a set scores the same from either place. What a Hub copy cannot give:

- STS 2012-2016: MTEB's copies merge a year's sub-datasets into one `test` split, so each year is one file,
  `all.tsv`, and the year's "mean over sub-datasets" is the Pearson over all its pairs pooled (the papers' number is
  the unweighted mean of the sub-datasets'); the report names the protocol (`protocols`).
- STS17: the second Spanish-English track (`es-en-wmt`) has no config there.
- SICK: the copy holds the relatedness score only (no entailment label, so no SICK-E), test split only.
- SentEval's tasks (MR, CR, SUBJ, MPQA, TREC, SST, MRPC, SICK-E): not fetched.

`sources_of(data_dir)` reads back what a fetched folder records (`SOURCES.tsv`: dataset, config, split, revision,
licence, protocol of each file) for the report and the card's `model-index`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import PSPInputError
from ..io.reading import iter_tsv
from ..public_data import FetchItem, HubSet, configs, tsv_field
from .data import STS17_FILES, STS17_HUB_CONFIGS, STS_YEARS, TATOEBA_DEFAULT_LANGUAGES, tatoeba_code

SOURCES_FILE = "SOURCES.tsv"
SOURCES_COLUMNS = ("path", "dataset", "config", "split", "revision", "license", "protocol")

_STS_COLUMNS = ("sentence1", "sentence2", "score")
_NOT_SPECIFIED = "not specified on the card (SemEval organisers' terms: research evaluation)"
EVAL_HUB_SETS: dict[str, HubSet] = {
    **{
        task: HubSet(f"mteb/{task}-sts", _STS_COLUMNS, _NOT_SPECIFIED, f"psp eval --tasks {task}") for task in STS_YEARS
    },
    "stsb": HubSet(
        "mteb/stsbenchmark-sts",
        _STS_COLUMNS,
        "not specified on the card (STS Benchmark: scores CC BY-SA 4.0, text per source)",
        "psp eval --tasks stsb",
    ),
    "sickr": HubSet("mteb/sickr-sts", _STS_COLUMNS, "CC BY-NC-SA 3.0", "psp eval --tasks sickr"),
    "sts17": HubSet("mteb/sts17-crosslingual-sts", _STS_COLUMNS, _NOT_SPECIFIED, "psp eval --tasks sts17"),
    "tatoeba": HubSet(
        "mteb/tatoeba-bitext-mining", ("sentence1", "sentence2"), "CC BY 2.0 (Tatoeba)", "psp eval --tasks tatoeba"
    ),
}
# The tasks a Hub copy can feed (SentEval's are not fetched: see the module text).
HUB_TASKS: tuple[str, ...] = tuple(EVAL_HUB_SETS)
POOLED_PROTOCOL = (
    "Hub copy: the year's sub-datasets merged into one split, so the year's Pearson is over all its pairs pooled, "
    "not the papers' mean over sub-datasets"
)


def _score_rows(rows: Iterator[dict[str, str]], handles: list) -> int:
    (sink,) = handles
    sink.write("score\tsentence1\tsentence2\n")
    count = 0
    for row in rows:
        sink.write(f"{tsv_field(row['score'])}\t{tsv_field(row['sentence1'])}\t{tsv_field(row['sentence2'])}\n")
        count += 1
    return count


def _stsb_rows(rows: Iterator[dict[str, str]], handles: list) -> int:
    (sink,) = handles
    # The Hub copy has no genre, file, year or id: placeholders keep the folder's columns (no field is empty).
    sink.write("genre\tfilename\tyear\tsid\tscore\tsentence1\tsentence2\n")
    count = 0
    for count, row in enumerate(rows, 1):
        sentence1, sentence2 = tsv_field(row["sentence1"]), tsv_field(row["sentence2"])
        sink.write(f"hub\tmteb\t-\t{count:04d}\t{tsv_field(row['score'])}\t{sentence1}\t{sentence2}\n")
    return count


def _sick_rows(rows: Iterator[dict[str, str]], handles: list) -> int:
    (sink,) = handles
    # No entailment label in the Hub copy: "-" is no class, so SICK-E on this file fails with a message.
    sink.write("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n")
    count = 0
    for count, row in enumerate(rows, 1):
        sentence1, sentence2 = tsv_field(row["sentence1"]), tsv_field(row["sentence2"])
        sink.write(f"{count}\t{sentence1}\t{sentence2}\t{tsv_field(row['score'])}\t-\n")
    return count


def _tatoeba_rows(rows: Iterator[dict[str, str]], handles: list) -> int:
    other, english = handles
    count = 0
    for row in rows:
        count += 1
        other.write(tsv_field(row["sentence1"]) + "\n")  # sentence1 is the other language, sentence2 English
        english.write(tsv_field(row["sentence2"]) + "\n")
    return count


def sts12_train() -> FetchItem:
    """The STS 2012 training pairs (the split `train` of mteb/sts12-sts): never in a distillation corpus."""
    return FetchItem(EVAL_HUB_SETS["sts12"], "default", "train", ("sts/en/STS12-train/all.tsv",), _score_rows)


def sts17_config(pair: str) -> str:
    """The config of mteb/sts17-crosslingual-sts for one of the harness's STS17 tracks."""
    config = STS17_HUB_CONFIGS.get(pair)
    if config is None or pair not in STS17_FILES:
        raise PSPInputError(
            f"STS17 track {pair!r} has no Hub copy (mteb/sts17-crosslingual-sts); tracks from the Hub: "
            f"{', '.join(p for p in STS17_FILES if p in STS17_HUB_CONFIGS)}"
        )
    return config


def eval_items(
    tasks: Sequence[str],
    tatoeba_languages: Sequence[str] = TATOEBA_DEFAULT_LANGUAGES,
    sts17_pairs: Sequence[str] = ("ar-ar", "ar-en", "es-es", "es-en", "en-en", "tr-en"),
) -> list[FetchItem]:
    """What to fetch for `tasks` (names as `resolve_tasks` gives them); a task without a Hub copy is an error."""
    missing = [task for task in tasks if task not in EVAL_HUB_SETS]
    if missing:
        raise PSPInputError(
            f"no Hub copy is read for {', '.join(missing)}; tasks from the Hub: {', '.join(HUB_TASKS)} "
            "(--tasks fast is all of them)"
        )
    items: list[FetchItem] = []
    for task in tasks:
        hub_set = EVAL_HUB_SETS[task]
        if task in STS_YEARS:
            path = f"sts/en/{STS_YEARS[task][0]}/all.tsv"
            items.append(FetchItem(hub_set, "default", "test", (path,), _score_rows, POOLED_PROTOCOL))
        elif task == "stsb":
            for split, hub_split in (("dev", "validation"), ("test", "test")):
                path = f"sts/stsbenchmark/{split}.tsv"
                items.append(FetchItem(hub_set, "default", hub_split, (path,), _stsb_rows))
        elif task == "sickr":
            items.append(FetchItem(hub_set, "default", "test", ("sts/sick/test.tsv",), _sick_rows))
        elif task == "sts17":
            for pair in sts17_pairs:
                # The config's first language is its sentence1's, as in the folder's files (STS17_FILES).
                path = f"sts/sts17/{pair}.tsv"
                items.append(FetchItem(hub_set, sts17_config(pair), "test", (path,), _score_rows))
        elif task == "tatoeba":
            codes = [tatoeba_code(language) for language in tatoeba_languages]
            if [code.lower() for code in codes] == ["all"]:
                codes = [name.split("-")[0] for name in configs(hub_set) if name.endswith("-eng")]
            for code in codes:
                paths = (f"tatoeba/v1/tatoeba.{code}-eng.{code}", f"tatoeba/v1/tatoeba.{code}-eng.eng")
                items.append(FetchItem(hub_set, f"{code}-eng", "test", paths, _tatoeba_rows))
    return items


def hub_data_dir() -> Path:
    """Where `psp eval --from-hub` keeps the sets it fetched: $PSP_HUB_DATA, else <HF_HOME>/psp-hf/data."""
    env = os.environ.get("PSP_HUB_DATA")
    if env:
        return Path(env)
    from huggingface_hub import constants

    return Path(constants.HF_HOME) / "psp-hf" / "data"


def sources_of(data_dir: str | os.PathLike) -> dict[str, dict[str, str]]:
    """`SOURCES.tsv` of a fetched folder as {path: {dataset, config, split, revision, license, protocol}}; {} when
    the folder was not fetched from the Hub."""
    path = Path(data_dir) / SOURCES_FILE
    if not path.is_file():
        return {}
    return {
        row[0]: dict(zip(SOURCES_COLUMNS[1:], row[1:], strict=True))
        for _, row in iter_tsv(path, header=list(SOURCES_COLUMNS))
    }


def hub_provenance(data_dir: str | os.PathLike, files: Sequence[str], tasks: Sequence[str]) -> dict:
    """What a run read from Hub copies: {"datasets": {id: revision}, "protocols": {task: text}}; {} for none."""
    sources = sources_of(data_dir)
    read = {name: sources[name] for name in files if name in sources}
    if not read:
        return {}
    protocols = {}
    for task in tasks:
        hub_set = EVAL_HUB_SETS.get(task)
        notes = {s["protocol"] for s in read.values() if hub_set and s["dataset"] == hub_set.repo_id and s["protocol"]}
        if notes:
            protocols[task] = "; ".join(sorted(notes))
    return {
        "datasets": {s["dataset"]: s["revision"] for s in read.values()},
        "licenses": {s["dataset"]: s["license"] for s in read.values()},
        "protocols": protocols,
    }
