"""The resumable steps of a build: order, records, skipping what is done, and a failed step run again."""

import json
import logging

import pytest

from psp_hf.errors import PSPInputError
from psp_hf.experiments.build_steps import mark_step, run_steps, step_done, step_path, step_record


def test_steps_run_in_order_and_leave_their_records(tmp_path, caplog):
    ran = []

    def step(name, info):
        return lambda: ran.append(name) or info

    folder = tmp_path / "build"  # created by the first run
    with caplog.at_level(logging.INFO, logger="psp_hf.experiments.build_steps"):
        run_steps("de", folder, {"prepare": step("prepare", {"pairs": 3}), "train": step("train", None)})
    assert ran == ["prepare", "train"]
    assert step_record(folder, "prepare")["pairs"] == 3 and step_record(folder, "prepare")["seconds"] >= 0
    assert set(step_record(folder, "train")) == {"seconds"}  # a step that returns nothing still leaves a record
    assert "psp languages [de]: train: done in" in caplog.text


def test_a_killed_build_runs_only_what_is_left(tmp_path, caplog):
    folder = tmp_path / "build"
    ran = []

    def failing():
        ran.append("train")
        raise RuntimeError("killed")

    steps = {"prepare": lambda: ran.append("prepare") or {}, "train": failing}
    with pytest.raises(RuntimeError):
        run_steps("fr", folder, steps)
    assert step_done(folder, "prepare") and not step_done(folder, "train")

    ran.clear()
    steps["train"] = lambda: ran.append("train") or {"steps": 10}
    with caplog.at_level(logging.INFO, logger="psp_hf.experiments.build_steps"):
        run_steps("fr", folder, steps)
    assert ran == ["train"]
    assert "psp languages [fr]: prepare: done before, skipped" in caplog.text
    assert step_record(folder, "train")["steps"] == 10


def test_records_are_json_and_a_damaged_one_is_named(tmp_path):
    mark_step(tmp_path, "label", {"sentences": 5})
    assert json.loads(step_path(tmp_path, "label").read_text(encoding="utf-8")) == {"sentences": 5}
    step_path(tmp_path, "train").write_text("{not json", encoding="utf-8")
    with pytest.raises(PSPInputError, match=r"the record of step 'train' .*done-train:1: not valid JSON"):
        step_record(tmp_path, "train")
