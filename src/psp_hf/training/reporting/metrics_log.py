"""`training/metrics.jsonl`: one JSON line per log window, evaluation and run end; kept in step with checkpoints."""

from __future__ import annotations

import errno
import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...errors import PSPInputError
from ...io.reading import read_regular_file
from ...io.writing import atomic_path, check_inside


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MB."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / 2**20


def end_record(model: str | os.PathLike) -> dict[str, Any]:
    """The run-end line of a trained model folder's `training/metrics.jsonl` ({} when the run has not ended)."""
    path = Path(model) / "training" / "metrics.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return next((record for record in reversed(records) if record.get("event") == "end"), {})


@dataclass
class LogWindow:
    """Sums over the steps since the last metrics line."""

    loss: torch.Tensor
    norm: torch.Tensor
    margin: torch.Tensor
    distill: torch.Tensor
    mono: torch.Tensor
    steps: int = 0
    pairs: int = 0
    sentences: int = 0
    seconds: float = 0.0
    masked: int = 0

    @classmethod
    def new(cls, device: torch.device) -> LogWindow:
        """An empty window whose sums live on `device` (no synchronisation per step)."""
        return cls(*(torch.zeros((), device=device) for _ in range(5)))


def json_safe(value: Any) -> Any:
    """`value` with every NaN or infinity made null: JSON has no such numbers, and a reader of the log
    (`json.loads` elsewhere, jq, a browser) would take `NaN` for a corrupt line."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW, 0o666)


class MetricsLog:
    """Appends records to `path` (main process only; `enabled=False` elsewhere)."""

    def __init__(self, path: Path, enabled: bool = True):
        self.path = Path(path)
        self.enabled = enabled
        # Also called with each record (the --report-to trackers), when set.
        self.sink: Callable[[dict[str, Any]], None] | None = None

    def append(self, record: dict[str, Any]) -> None:
        """Write one record as a line (and hand it to the sink)."""
        if not self.enabled:
            return
        check_inside(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a symlink planted at the log's name is an error, not a way to append to its target.
        try:
            handle = open(self.path, "a", encoding="utf-8", opener=_no_follow)  # noqa: SIM115 - closed below
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise PSPInputError(f"{self.path}: is a symlink; psp does not write through it") from None
            raise
        with handle:
            handle.write(json.dumps(json_safe(record), allow_nan=False) + "\n")
        if self.sink is not None:
            self.sink(record)

    def start_fresh(self) -> None:
        """A new run: drop the lines of an earlier run that was killed before its first checkpoint."""
        if self.enabled:
            self.path.unlink(missing_ok=True)

    def trim_to(self, step: int, warn: Callable[[str], None]) -> None:
        """On resume: keep the lines up to the checkpoint's `step`.

        Lines after it were written by the killed run past its last checkpoint and will be written again; a
        line cut short by the kill (no newline, not JSON) is dropped with a warning.
        """
        if not (self.enabled and self.path.is_file()):
            return
        kept: list[str] = []
        torn = 0
        for line in read_regular_file(self.path).split(b"\n"):
            if not line.strip():
                continue
            try:
                record = json.loads(line.decode("utf-8"))
                record_step = int(record.get("step", 0))
            except (ValueError, AttributeError, TypeError):
                torn += 1
                continue
            if record_step <= step:
                kept.append(line.decode("utf-8"))
        if torn:
            warn(f"{self.path}: dropped {torn} torn line(s) left by a killed run")
        with atomic_path(self.path) as temporary:
            temporary.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
