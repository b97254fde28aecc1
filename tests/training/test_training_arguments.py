"""`TrainingArguments` flags built from the dataclass fields (public APIs only), every rule read from field metadata."""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from psp_hf.errors import PSPInputError
from psp_hf.training.arguments import checks as argument_checks
from psp_hf.training.arguments import training_arguments as arguments
from psp_hf.training.arguments.checks import add_field_arguments, check_rules, fields_with, setting, value_type
from psp_hf.training.arguments.training_arguments import (
    RESUME_FIXED,
    TrainingArguments,
    add_arguments,
    arguments_from_namespace,
)

SAMPLES = {int: "7", float: "0.5", str: "some-value"}


def parser_and_added():
    parser = argparse.ArgumentParser(prog="psp train", allow_abbrev=False)
    return parser, add_arguments(parser)


def test_every_field_becomes_exactly_one_option():
    _parser, added = parser_and_added()
    fields = dataclasses.fields(TrainingArguments)
    negations = [action for action in added if action.option_strings[0].startswith("--no-")]
    options = [action for action in added if action not in negations]
    assert sorted(action.dest for action in options) == sorted(spec.name for spec in fields)
    hints = typing.get_type_hints(TrainingArguments)
    booleans = sorted(spec.name for spec in fields if hints[spec.name] is bool)
    assert sorted(action.dest for action in negations) == booleans  # one --no-X for each boolean, no more


def test_each_option_sets_its_field():
    parser, added = parser_and_added()
    hints = typing.get_type_hints(TrainingArguments)
    for action in added:
        spec = arguments.FIELDS[action.dest]
        kind, _optional, is_list = value_type(hints[spec.name])
        for flag in action.option_strings:  # the shown spelling and the hidden ones alike
            if kind is bool:
                expected = not action.option_strings[0].startswith("--no-")
                argv = [flag]
            else:
                raw = spec.metadata["choices"][-1] if "choices" in spec.metadata else SAMPLES[kind]
                expected = [raw] if is_list else kind(raw)
                argv = [flag, raw]
            assert getattr(parser.parse_args(argv), spec.name) == expected, argv
        assert getattr(parser.parse_args([]), spec.name) is None  # unset: a config file may fill it in


def test_each_setting_has_one_spelling():
    parser, _added = parser_and_added()
    assert parser.parse_args(["-o", "out"]).output_dir == parser.parse_args(["--output", "out"]).output_dir == "out"
    parsed = parser.parse_args(["--batch-size", "3", "--no-lowercase", "--resume", "true", "--cpu", "no", "-q"])
    assert (parsed.batch_size, parsed.lowercase, parsed.resume, parsed.cpu, parsed.quiet) == (
        3,
        False,
        True,
        False,
        True,
    )
    assert parser.parse_args(["--one-sided"]).one_sided is True and parser.parse_args(["--no-quiet"]).quiet is False
    for other in (["--output-dir", "out"], ["--output_dir", "out"], ["--batch_size", "3"], ["--no_lowercase"]):
        with pytest.raises(SystemExit):
            parser.parse_args(other)


def test_a_rule_in_the_metadata_is_enforced_and_names_the_flag():
    @dataclass
    class WithWarmup(TrainingArguments):
        warmup_steps: int = field(default=0, metadata=setting("warm-up steps", min=2, max=10, fixed_on_resume=True))
        schedule: str = field(default="flat", metadata=setting("learning-rate schedule", choices=("flat", "cosine")))

    parser = argparse.ArgumentParser(allow_abbrev=False)
    add_field_arguments(parser, WithWarmup)
    assert parser.parse_args(["--warmup-steps", "4"]).warmup_steps == 4
    namespace = vars(parser.parse_args(["--warmup-steps", "1", "--data", "x.tsv", "-o", "out"]))
    with pytest.raises(PSPInputError, match=r"^--warmup-steps must be in \[2, 10\], got 1$"):
        WithWarmup(**{key: value for key, value in namespace.items() if value is not None}).validate()
    with pytest.raises(PSPInputError, match=r"^--schedule must be one of flat, cosine; got 'linear'$"):
        check_rules(WithWarmup(schedule="linear", warmup_steps=3))
    check_rules(WithWarmup(schedule="cosine", warmup_steps=3))  # within the rules: no error
    assert "warmup_steps" in fields_with(WithWarmup, "fixed_on_resume")
    assert "warmup_steps" not in RESUME_FIXED  # the new rule belongs to the new class only


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"dim": 0}, "--dim must be at least 1, got 0"),
        ({"lr": 0.0}, "--lr must be positive, got 0.0"),
        ({"dropout": 1.0}, r"--dropout must be in \[0, 1\), got 1.0"),
        ({"scramble_rate": 1.5}, r"--scramble-rate must be in \[0, 1\], got 1.5"),
        ({"mono_batch_size": 0}, "--mono-batch-size must be at least 1, got 0"),
        ({"teacher_negative_threshold": 2.0}, r"--teacher-negative-threshold must be in \[-1, 1\], got 2.0"),
        ({"second_units": "letters"}, "--second-units must be one of piece, word, trigram; got 'letters'"),
        ({"distill_weight": -1.0}, "--distill-weight must be >= 0, got -1.0"),
    ],
)
def test_declared_bounds_and_choices(values, message):
    with pytest.raises(PSPInputError, match=message):
        TrainingArguments(data=["x.tsv"], output_dir="out", **values).validate()


def test_a_bound_is_one_psp_error_line_naming_the_flag(capsys):
    from psp_hf.cli import main

    assert main(["train", "--data", "x.tsv", "-o", "out", "--scramble-rate", "2"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert lines == ["psp: error: --scramble-rate must be in [0, 1], got 2.0"]


def test_unknown_rule_is_refused_where_the_field_is_declared():
    with pytest.raises(TypeError, match="unknown setting rule"):
        setting("a help text", minimum=1)


def test_resume_and_card_lists_come_from_the_metadata():
    from psp_hf.training.loop import run_setup
    from psp_hf.training.loop.run_end import PAIR_ONLY_SETTINGS

    declared = {spec.name for spec in dataclasses.fields(TrainingArguments) if spec.metadata.get("fixed_on_resume")}
    assert run_setup.RESUME_FIXED == RESUME_FIXED and set(RESUME_FIXED) == declared
    assert {"data", "seed", "dim", "encoder_type", "mono_data", "dev_bitext"} <= declared
    assert {"lr", "epochs", "max_steps", "resume"}.isdisjoint(declared)  # may change on resume
    assert set(PAIR_ONLY_SETTINGS) == {*fields_with(TrainingArguments, "pairs_only"), "pairs_seen"}


def test_config_file_values_are_typed_and_listed(tmp_path):
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"data": "a.tsv", "output-dir": "o", "batch_size": 4, "margin": 1}))
    parser, _added = parser_and_added()
    parsed = arguments_from_namespace(parser.parse_args(["--config", str(config)]))
    assert (parsed.data, parsed.batch_size, parsed.margin) == (["a.tsv"], 4, 1.0)
    assert isinstance(parsed.margin, float)
    config.write_text(json.dumps({"data": ["a.tsv"], "output_dir": "o", "resume": "yes"}))
    with pytest.raises(PSPInputError, match="setting 'resume' must be bool, got 'yes'"):
        arguments_from_namespace(parser.parse_args(["--config", str(config)]))


def test_no_private_transformers_or_argparse_api():
    for module in (arguments, argument_checks):
        source = Path(module.__file__).read_text(encoding="utf-8")
        for private in ("._parse_dataclass_field", "._actions", "HfArgumentParser", "argparse._"):
            assert private not in source, (module.__name__, private)
    train_cli = Path(arguments.__file__).parents[2] / "cli" / "train.py"
    assert "._actions" not in train_cli.read_text(encoding="utf-8")
