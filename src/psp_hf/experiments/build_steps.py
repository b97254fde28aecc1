"""The steps of a resumable build (`psp languages`' languages, p-sp-multilingual, the English student) and their
records.

A step that succeeds writes `done-<step>` in the build's folder: a JSON object with what the step returned and the
seconds it took. A later run reads the records, skips the steps that have one and runs the rest in order, so a
killed build is continued by running the same command again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from ..io.reading import read_json
from ..io.writing import write_json

logger = logging.getLogger(__name__)


def step_path(folder: Path, step: str) -> Path:
    """Where `step`'s record is (or will be) in `folder`."""
    return folder / f"done-{step}"


def step_done(folder: Path, step: str) -> bool:
    """Whether `step` succeeded in `folder` (its record is there)."""
    return step_path(folder, step).is_file()


def step_record(folder: Path, step: str) -> dict:
    """The record `step` left in `folder` (what it returned, and its seconds)."""
    return read_json(step_path(folder, step), what=f"the record of step {step!r}")


def mark_step(folder: Path, step: str, info: dict) -> None:
    """Write `step`'s record in `folder` (atomically: a killed write leaves the step to be run again)."""
    write_json(step_path(folder, step), info)


def run_steps(name: str, folder: Path, steps: dict[str, Callable[[], dict | None]]) -> None:
    """Run `steps` (step name -> what runs it) in their order in `folder`, skipping those with a record; each
    one's returned dict, with its seconds, becomes its record. `name` heads the progress lines."""
    folder.mkdir(parents=True, exist_ok=True)
    for step, run in steps.items():
        if step_done(folder, step):
            logger.info(f"psp languages [{name}]: {step}: done before, skipped")
            continue
        started = time.perf_counter()
        logger.info(f"psp languages [{name}]: {step} ...")
        info = run() or {}
        info["seconds"] = round(time.perf_counter() - started, 1)
        mark_step(folder, step, info)
        logger.info(f"psp languages [{name}]: {step}: done in {info['seconds']} s")
