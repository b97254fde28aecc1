"""The flags shared by the `psp` commands: one spelling, one meaning and one default for each idea.

- `-m/--model`: the model a command reads.      - `-o/--output`: what a command writes (file or folder).
- `--data`: training data only.                 - `--data-dir`: the data folder (default $PSP_DATA).
- `--threads`: threads, default the cores available; `--num-proc` only where it means processes.
- `--columns`: two columns, 1-based numbers or header names, parsed by `columns` here.
- `-q/--quiet` and `-v/--verbose`: on every command, added by `add_verbosity` (status lines on stderr only).

Every flag has one spelling: the spellings of the unreleased versions before this vocabulary (`--out`,
`--output-dir`, `--data` for the data folder, `psp prepare pool`) are gone, not aliased. Only argparse's public API
is used.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from typing import Any

from ..errors import PSPInputError


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that records its subcommands (`subcommands`); subcommands' parsers are built with this
    class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # No abbreviations: `--out` would otherwise still parse as `--output`, a second spelling of every flag.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        # Subcommand name -> (one-line help, its parser), in the order added. argparse has no public way to list
        # a parser's subcommands; the CLI reference (`reference.py`) and `add_verbosity` walk this instead.
        self.subcommands: dict[str, tuple[str, Parser]] = {}
        self._subcommand_action: Any = None

    def add_subparsers(self, **kwargs: Any) -> Any:
        """argparse's `add_subparsers`, remembered so that `add_subcommand` adds to it."""
        self._subcommand_action = super().add_subparsers(**kwargs)
        return self._subcommand_action

    def add_subcommand(self, name: str, *, help: str, **kwargs: Any) -> Parser:
        """Add subcommand `name` (after `add_subparsers`) with its one-line help; listed in `subcommands`."""
        if self._subcommand_action is None:
            raise TypeError(f"{self.prog}: call add_subparsers before add_subcommand")
        child = self._subcommand_action.add_parser(name, help=help, **kwargs)
        self.subcommands[name] = (help, child)
        return child


def cores_available() -> int:
    """The cores this process may run on (the default of every `--threads`)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def positive_int(value: str) -> int:
    """An argparse `type=` for counts and sizes: an integer of at least 1."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return number


def fraction(value: str) -> float:
    """An argparse `type=` for a similarity bound: a number in [-1, 1]."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
    if not -1.0 <= number <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between -1 and 1, got {value}")
    return number


def columns(value: str) -> list[int | str]:
    """The one `--columns` type: two columns, each a 1-based number (made 0-based) or a header name."""
    from ..data.readers import parse_column

    parts = value.split(",")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"--columns takes two columns like 2,3 or sentence1,sentence2; got {value!r}")
    try:
        return [parse_column(part) for part in parts]
    except PSPInputError as error:
        raise argparse.ArgumentTypeError(f"--columns {value!r}: {error}") from None


def add_model(parser: Any, help: str = "model folder or Hugging Face Hub repo id", **kwargs: Any) -> argparse.Action:
    """`-m/--model`: the model the command reads."""
    kwargs.setdefault("required", True)
    return parser.add_argument("-m", "--model", help=help, **kwargs)


def add_output(parser: Any, help: str, **kwargs: Any) -> argparse.Action:
    """`-o/--output`: what the command writes."""
    return parser.add_argument("-o", "--output", help=help, **kwargs)


def add_data_dir(parser: Any, help: str = "data folder (default: $PSP_DATA or ../shared/data)") -> argparse.Action:
    """`--data-dir`: the data folder."""
    return parser.add_argument("--data-dir", default=None, metavar="DIR", help=help)


def add_threads(parser: Any, what: str = "threads") -> argparse.Action:
    """`--threads`: one default everywhere, the cores available."""
    cores = cores_available()
    return parser.add_argument(
        "--threads", type=positive_int, default=cores, help=f"{what} (default: the cores available, {cores})"
    )


def add_columns(parser: Any, help: str) -> argparse.Action:
    """`--columns`: two columns, 1-based numbers or header names."""
    return parser.add_argument("--columns", type=columns, default=None, metavar="A,B", help=help)


def add_verbosity(parser: Parser) -> None:
    """`-q/--quiet` and `-v/--verbose` on `parser`, or on each of its subcommands: the same meaning everywhere."""
    if parser.subcommands:
        for _, child in parser.subcommands.values():
            add_verbosity(child)
        return
    from ..logs import QUIET_HELP, VERBOSE_HELP

    choice = parser.add_argument_group("messages").add_mutually_exclusive_group()
    # A command may declare -q itself (`psp train`: the `quiet` setting of TrainingArguments, with this help).
    with contextlib.suppress(argparse.ArgumentError):
        choice.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    choice.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)


def add_skip_bad_lines(parser: Any, help: str) -> argparse.Action:
    """`--skip-bad-lines`: report and skip a bad line instead of stopping at it."""
    return parser.add_argument("--skip-bad-lines", action="store_true", help=help)


def check_batch_size(value: int) -> None:
    """A clear error for a batch size below 1."""
    if value < 1:
        raise PSPInputError(f"--batch-size must be at least 1, got {value}")
