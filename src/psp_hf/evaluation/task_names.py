"""The evaluation's task names: the tasks, their groups and aliases, and `resolve_tasks` (what `--tasks` accepts).

Apart from `tasks.py` (which runs them) so that the card side (`model_index.py`, `report.py`) reads the names
without importing the harness and the encoders behind it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import PSPInputError
from .data import BITEXT_DEV_PATTERNS

STS_YEAR_TASKS: tuple[str, ...] = ("sts12", "sts13", "sts14", "sts15", "sts16")
STS_TASKS: tuple[str, ...] = (*STS_YEAR_TASKS, "stsb", "sickr")
MULTILINGUAL_TASKS: tuple[str, ...] = ("sts17", "tatoeba")
SENTEVAL_TASKS: tuple[str, ...] = ("mr", "cr", "subj", "mpqa", "trec", "sst2", "sst5", "mrpc", "sicke")
# Dev sets: scored to choose recipes (never a test result); run only when named (the group `dev` names both).
DEV_TASKS: tuple[str, ...] = tuple(BITEXT_DEV_PATTERNS)
# Every test (the dev sets are not tests).
ALL_TASKS: tuple[str, ...] = STS_TASKS + MULTILINGUAL_TASKS + SENTEVAL_TASKS
KNOWN_TASKS: tuple[str, ...] = ALL_TASKS + DEV_TASKS
# What `psp eval` runs without --tasks: every test (SentEval takes minutes; `--tasks fast` skips it).
DEFAULT_TASKS: tuple[str, ...] = ALL_TASKS
FAST_TASKS: tuple[str, ...] = STS_TASKS + MULTILINGUAL_TASKS
TASK_GROUPS: dict[str, tuple[str, ...]] = {
    "all": ALL_TASKS,
    "fast": FAST_TASKS,
    "sts": STS_TASKS,
    "sts12-16": STS_YEAR_TASKS,
    "multilingual": MULTILINGUAL_TASKS,
    "senteval": SENTEVAL_TASKS,
    "dev": DEV_TASKS,
}
# Spellings from the papers and SentEval that name the same task.
TASK_ALIASES: dict[str, str] = {
    "sts-b": "stsb", "stsbenchmark": "stsb", "sick-r": "sickr", "sickrelatedness": "sickr",
    "sick-e": "sicke", "sickentailment": "sicke", "sst-2": "sst2", "sst-5": "sst5", "sts2017": "sts17",
    "sts12-train": "sts12",
}  # fmt: skip


def resolve_tasks(names: Iterable[str] | None) -> list[str]:
    """Task names (groups expanded, aliases resolved) in canonical order; unknown names list the valid ones."""
    if names is None:
        return list(DEFAULT_TASKS)
    wanted: set[str] = set()
    for raw in names:
        for name in str(raw).split(","):
            key = name.strip().lower()
            if not key:
                continue
            key = TASK_ALIASES.get(key, key)
            if key in TASK_GROUPS:
                wanted.update(TASK_GROUPS[key])
            elif key in KNOWN_TASKS:
                wanted.add(key)
            else:
                raise PSPInputError(
                    f"unknown task {name.strip()!r}; valid tasks: {', '.join(KNOWN_TASKS)}; "
                    f"groups: {', '.join(TASK_GROUPS)}"
                )
    if not wanted:
        raise PSPInputError(f"no task given; valid tasks: {', '.join(KNOWN_TASKS)}; groups: {', '.join(TASK_GROUPS)}")
    return [task for task in KNOWN_TASKS if task in wanted]
