"""`training/metrics.png`: loss, dev score and mega-batch size over steps, drawn from `metrics.jsonl`.

matplotlib is optional: without it the run says so in one line and writes no picture.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ...io.writing import atomic_path

LOSS_KEYS = ("loss", "margin_loss", "distill_loss")


def read_records(metrics_path: Path) -> list[dict]:
    """The JSON lines of `metrics_path` (a torn last line is skipped)."""
    records = []
    for line in Path(metrics_path).read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def plot_metrics(metrics_path: Path, png_path: Path, say: Callable[[str], None] = print) -> Path | None:
    """Draw the run's curves into `png_path`; returns it, or None (said why) when nothing could be drawn."""
    try:
        from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state in the caller
    except ImportError:
        say(f"no {Path(png_path).name}: matplotlib is not installed (pip install matplotlib)")
        return None
    if not Path(metrics_path).is_file():
        return None
    records = read_records(metrics_path)
    train = [record for record in records if record.get("event") == "train"]
    evals = [record for record in records if record.get("event") == "eval"]
    if not train and not evals:
        return None
    figure = Figure(figsize=(7, 8), dpi=100, layout="constrained")
    loss_axes, dev_axes, size_axes = figure.subplots(3, 1, sharex=True)
    for key in LOSS_KEYS:
        points = [(record["step"], record[key]) for record in train if key in record]
        if points:
            loss_axes.plot(*zip(*points, strict=True), marker=".", label=key.replace("_", " "))
    loss_axes.set_ylabel("training loss")
    loss_axes.legend(loc="upper right")
    dev_keys = sorted({key for record in evals for key in record if key.startswith("dev_")})
    for key in dev_keys:
        points = [(record["step"], record[key]) for record in evals if record.get(key) is not None]
        if points:
            dev_axes.plot(*zip(*points, strict=True), marker="o", label=key.replace("_", " "))
    dev_axes.set_ylabel("dev score")
    if dev_keys:
        dev_axes.legend(loc="lower right")
    else:
        dev_axes.text(0.5, 0.5, "no dev set (--dev none)", ha="center", va="center", transform=dev_axes.transAxes)
    points = [(record["step"], record["megabatch_size"]) for record in train if "megabatch_size" in record]
    if points:
        size_axes.step(*zip(*points, strict=True), where="post")
    size_axes.set_ylabel("mega-batch size M")
    size_axes.set_xlabel("step")
    for axes in (loss_axes, dev_axes, size_axes):
        axes.grid(alpha=0.3)
    with atomic_path(png_path) as temporary:
        figure.savefig(temporary, format="png")
    return Path(png_path)
