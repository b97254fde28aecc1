"""`--report-to`: the lines of `metrics.jsonl` also sent to Accelerate's experiment trackers (TensorBoard, ...).

Each record becomes scalars named `EVENT/KEY` (e.g. `train/loss`, `eval/dev_stsb_pearson`) at the record's
step. Trackers that keep local files (TensorBoard) write them under `training/` in `-o/--output`.
"""

from __future__ import annotations

from typing import Any

from ...errors import PSPInputError

PROJECT_NAME = "runs"  # TensorBoard: event files under training/runs/
# The pip package each tracker needs, for the error message when it is missing.
PACKAGES = {"tensorboard": "tensorboard", "comet_ml": "comet-ml", "dvclive": "dvclive"}


def parse_report_to(text: str | None) -> list[str]:
    """Tracker names of `--report-to` ('none' or empty: no tracker); unknown names raise `PSPInputError`."""
    names = [part.strip().lower() for part in (text or "none").split(",") if part.strip()]
    if names in ([], ["none"]):
        return []
    from accelerate.utils import LoggerType

    known = LoggerType.list()
    for name in names:
        if name not in known:
            raise PSPInputError(f"--report-to: unknown tracker {name!r} (known: none, {', '.join(known)})")
    return names


def check_installed(names: list[str]) -> None:
    """Raise `PSPInputError` for a named tracker whose package is missing (Accelerate would skip it silently)."""
    from accelerate.tracking import get_available_trackers

    available = {str(tracker) for tracker in get_available_trackers()}
    for name in names:
        if name != "all" and name not in available:
            package = PACKAGES.get(name, name)
            extra = " (or psp-hf[tensorboard])" if name == "tensorboard" else ""
            raise PSPInputError(
                f"--report-to {name}: the {package} package is not installed; pip install {package}{extra}"
            )


def tracker_config(settings: dict[str, Any]) -> dict[str, Any]:
    """The run's settings in the plain types every tracker accepts (lists joined, None as 'none')."""
    config: dict[str, Any] = {}
    for name, value in settings.items():
        if isinstance(value, (list, tuple)):
            value = ",".join(str(item) for item in value)
        elif value is None:
            value = "none"
        elif not isinstance(value, (bool, int, float, str)):
            value = str(value)
        config[name] = value
    return config


def record_scalars(record: dict[str, Any]) -> tuple[dict[str, float], int | None]:
    """The numeric values of one metrics record as `EVENT/KEY` scalars, and its step."""
    event = str(record.get("event", "metrics"))
    values = {
        f"{event}/{key}": float(value)
        for key, value in record.items()
        if key not in ("event", "step") and isinstance(value, (int, float)) and not isinstance(value, bool)
    }
    step = record.get("step")
    return values, (int(step) if isinstance(step, int) else None)


class TrackerSink:
    """Sends metrics records to the Accelerator's trackers (`accelerator.log` runs on the main process only)."""

    def __init__(self, accelerator, settings: dict[str, Any]):
        self.accelerator = accelerator
        accelerator.init_trackers(PROJECT_NAME, config=tracker_config(settings))
        self.open = True

    def __call__(self, record: dict[str, Any]) -> None:
        """Log one record."""
        values, step = record_scalars(record)
        if self.open and values:
            self.accelerator.log(values, step=step)

    def close(self) -> None:
        """Flush and close every tracker."""
        if self.open:
            self.open = False
            # What `accelerator.end_training()` does for trackers, without its other effect (destroying the
            # process group), which would break a caller that goes on using torch.distributed after train().
            for tracker in self.accelerator.trackers:
                tracker.finish()
