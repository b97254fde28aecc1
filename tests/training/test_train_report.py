"""--report-to (Accelerate's trackers) and the metrics.png picture written at the end of a run."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import pytest

from psp_hf.errors import PSPInputError
from psp_hf.training import TrainingArguments, train
from psp_hf.training.reporting.plot import plot_metrics
from psp_hf.training.reporting.trackers import parse_report_to, record_scalars, tracker_config

WORD_LIST = "man woman child dog cat bird horse boy girl runs walks jumps sits plays eats reads street park"
WORDS = WORD_LIST.split()
PAIRS = [(f"{a} {b} {c}", f"{c} {a} {b}") for a in WORDS[:6] for b in WORDS[6:12] for c in WORDS[12:]]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Path:
    from psp_hf.tokenization.pieces import train_tokenizer

    folder = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer([f"a {word} the {word}s" for word in WORDS] * 3, vocab_size=80, output_dir=folder)
    return folder


def run(out: Path, tokenizer: Path, **overrides) -> Path:
    values = {
        "output_dir": str(out),
        "tokenizer": str(tokenizer),
        "dim": 16,
        "batch_size": 16,
        "megabatch_size": 3,
        "megabatch_anneal": 4,
        "epochs": 2,
        "dev": "none",
        "eval_every": 10,
        "keep": "last",
        "save_every": 0,
        "threads": 1,
        "quiet": True,
        "log_every": 2,
    }
    values.update(overrides)
    return train(TrainingArguments(**values), data=PAIRS)


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (after checking the signature)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def has_sts_data() -> bool:
    from psp_hf.data_folder import data_dir

    return (data_dir() / "sts" / "stsbenchmark").is_dir()


def test_tensorboard_events_hold_the_metrics_and_the_png_is_drawn(tmp_path, tokenizer):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    dev = "stsb" if has_sts_data() else "none"
    folder = run(tmp_path / "tb", tokenizer, report_to="tensorboard", dev=dev)
    records = [json.loads(line) for line in (folder / "training" / "metrics.jsonl").read_text().splitlines()]
    events = sorted((folder / "training" / "runs").rglob("events.out.tfevents.*"))
    assert events, "no TensorBoard event file"
    scalars: dict[str, list] = {}
    for path in events:
        accumulator = EventAccumulator(str(path))
        accumulator.Reload()
        for tag in accumulator.Tags()["scalars"]:
            scalars[tag] = [(event.step, event.value) for event in accumulator.Scalars(tag)]
    # Every train line of metrics.jsonl is a point of train/loss at its step, with its value.
    train_lines = [record for record in records if record["event"] == "train"]
    assert [step for step, _ in scalars["train/loss"]] == [record["step"] for record in train_lines]
    assert scalars["train/loss"][-1][1] == pytest.approx(train_lines[-1]["loss"], rel=1e-6)
    assert [value for _, value in scalars["train/megabatch_size"]] == [r["megabatch_size"] for r in train_lines]
    assert "end/train_seconds" in scalars
    if dev == "stsb":
        assert len(scalars["eval/dev_stsb_pearson"]) == len([r for r in records if r["event"] == "eval"])
    assert (folder / "training" / "runs").rglob("hparams.yml")
    png = folder / "training" / "metrics.png"
    width, height = png_size(png)
    assert width >= 400 and height >= 400
    assert png.stat().st_size > 10_000  # three drawn panels, not an empty canvas


def test_png_without_matplotlib_is_one_line_and_the_run_goes_on(tmp_path, tokenizer, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    folder = run(tmp_path / "nompl", tokenizer, dev="none", quiet=False)
    assert (folder / "model.safetensors").is_file()
    assert not (folder / "training" / "metrics.png").exists()
    lines = [line for line in capsys.readouterr().err.splitlines() if "metrics.png" in line]
    assert lines == ["psp train: no metrics.png: matplotlib is not installed (pip install matplotlib)"]


def test_plot_of_a_distillation_log_without_dev(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    lines = [
        {"event": "train", "step": step, "loss": 1 / step, "distill_loss": 1 / step, "megabatch_size": 1}
        for step in range(1, 20)
    ]
    metrics.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"event": "tr', encoding="utf-8")
    assert plot_metrics(metrics, tmp_path / "m.png", print) == tmp_path / "m.png"
    assert png_size(tmp_path / "m.png")[0] > 0
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    assert plot_metrics(empty, tmp_path / "none.png", print) is None


def test_report_to_names_are_checked():
    assert parse_report_to("none") == [] and parse_report_to(None) == []
    assert parse_report_to("TensorBoard, wandb") == ["tensorboard", "wandb"]
    with pytest.raises(PSPInputError, match="unknown tracker 'tensorbored'"):
        parse_report_to("tensorbored")
    with pytest.raises(PSPInputError, match="--report-to: unknown tracker"):
        TrainingArguments(data=["x"], output_dir="o", report_to="nope").validate()


def test_a_named_tracker_that_is_not_installed_is_an_error(tmp_path, tokenizer, monkeypatch):
    import accelerate.tracking

    monkeypatch.setattr(accelerate.tracking, "get_available_trackers", lambda: [])
    with pytest.raises(PSPInputError, match=r"--report-to tensorboard: the tensorboard package is not installed"):
        run(tmp_path / "missing", tokenizer, report_to="tensorboard", dev="none")
    assert not (tmp_path / "missing" / "training").exists()  # refused before any work


def test_records_become_event_scoped_scalars():
    values, step = record_scalars({"event": "eval", "step": 7, "dev_stsb_pearson": 71.5, "best": None, "x": True})
    assert (values, step) == ({"eval/dev_stsb_pearson": 71.5}, 7)
    config = tracker_config({"data": ["a.tsv", "b.tsv"], "lang": None, "dim": 8, "lr": 0.1})
    assert config == {"data": "a.tsv,b.tsv", "lang": "none", "dim": 8, "lr": 0.1}


def test_cli_flag_reaches_the_run_and_bad_names_are_one_error_line(tmp_path, tokenizer, capsys):
    from psp_hf.cli import main

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("sentence1\tsentence2\n" + "".join(f"{a}\t{b}\n" for a, b in PAIRS), encoding="utf-8")
    common = ["train", "--data", str(pairs), "--tokenizer", str(tokenizer), "--dim", "8", "--dev", "none", "--quiet"]
    assert main([*common, "-o", str(tmp_path / "bad"), "--report-to", "tensorbored"]) == 2
    assert "psp: error: --report-to: unknown tracker 'tensorbored'" in capsys.readouterr().err
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    out = tmp_path / "cli"
    assert main([*common, "-o", str(out), "--max-steps", "6", "--report-to", "tensorboard"]) == 0
    assert list((out / "training" / "runs").glob("events.out.tfevents.*"))
    assert json.loads((out / "training" / "args.json").read_text())["report_to"] == "tensorboard"
