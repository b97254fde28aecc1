"""`TrainingArguments` <-> `psp train` flags (what `psp languages` and `make demo` record and show)."""

from __future__ import annotations

import pytest

from psp_hf.training import TrainingArguments
from psp_hf.training.arguments.command_line import command_line, with_flags


def test_the_command_line_gives_back_the_same_arguments(tmp_path):
    arguments = TrainingArguments(
        data=["a.tsv", "b.tsv"], output_dir="out", dim=300, lr=0.01, init_std=0.1, epochs=3, quiet=True,
        teacher_cache=str(tmp_path), distill_weight=1.0, corpus_weights="wikipedia-2015=0.5", lowercase=False,
    )  # fmt: skip
    flags = command_line(arguments)
    start = flags.index("--data")
    assert flags[start : start + 3] == ["--data", "a.tsv", "b.tsv"]  # a list setting: one flag, its values after it
    assert "--quiet" in flags and "--no-lowercase" in flags  # booleans both ways, by their shown spelling
    assert "--batch-size" not in flags  # defaults are left out
    assert with_flags(TrainingArguments(), flags) == arguments
    assert command_line(TrainingArguments()) == []


def test_flags_go_on_top_and_are_checked():
    base = TrainingArguments(data=["a.tsv"], output_dir="out", lr=0.01, quiet=True)
    changed = with_flags(base, ["--lr", "0.05", "--no-quiet", "--max-steps", "9"])
    assert (changed.lr, changed.quiet, changed.max_steps, changed.data) == (0.05, False, 9, ["a.tsv"])
    assert with_flags(base, []) == base
    with pytest.raises(SystemExit):  # argparse's usage error, as psp train gives it
        with_flags(base, ["--no-such-flag"])
    from psp_hf.errors import PSPInputError

    with pytest.raises(PSPInputError, match="-o/--output is required"):
        with_flags(TrainingArguments(data=["a.tsv"]), [])
