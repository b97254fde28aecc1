"""`TrainingArguments` and `psp train` flags both ways, for the drivers that train (`psp languages`, `make demo`):
the command line that gives a set of arguments (shown to the user and kept in the run's record, so that a run can
be repeated by hand), and a driver's arguments with a user's extra flags on top."""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Sequence

from .checks import field_default, shown_flags, value_type
from .training_arguments import TrainingArguments, add_arguments, arguments_from_namespace


def command_line(arguments: TrainingArguments) -> list[str]:
    """The `psp train` flags that give `arguments`: one per field that differs from its default, in field order."""
    hints = typing.get_type_hints(TrainingArguments)
    flags: list[str] = []
    for spec in dataclasses.fields(TrainingArguments):
        value = getattr(arguments, spec.name)
        if value == field_default(spec):
            continue
        flag = shown_flags(spec)[-1]
        kind, _optional, is_list = value_type(hints[spec.name])
        if kind is bool:
            flags.append(flag if value else "--no-" + flag[2:])
        elif is_list:
            flags += [flag, *map(str, value)]
        else:
            flags += [flag, str(value)]
    return flags


def with_flags(arguments: TrainingArguments, flags: Sequence[str]) -> TrainingArguments:
    """`arguments` with the `psp train` flags `flags` on top (a flag given wins), validated; a bad flag is the usage
    error `psp train` gives."""
    parser = argparse.ArgumentParser(prog="psp train")
    add_arguments(parser)
    return arguments_from_namespace(parser.parse_args(list(flags)), base=arguments)
