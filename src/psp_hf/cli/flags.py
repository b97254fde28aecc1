"""The flags shared by the `psp` commands: one spelling, one meaning and one default for each idea.

- `-m/--model`: the model a command reads.      - `-o/--output`: what a command writes (file or folder).
- `--data`: training data only.                 - `--data-dir`: the data folder (default $PSP_DATA).
- `--threads`: threads, default the cores available; `--num-proc` only where it means processes.
- `--columns`: two columns, 1-based numbers or header names, parsed by `columns` here.
- `-q/--quiet`: on every command.

Spellings of earlier versions (`--out`, `--output-dir`, `--cache` for an output, `--data` for the data folder) still
parse, as hidden aliases of the same argument: `add` registers each argument's old spellings as an argument of their
own, with `help=argparse.SUPPRESS` (so `--help` and the usage line leave them out) that fills the same `dest` the same
way, so the help shows one vocabulary while every old command line keeps working. Only argparse's public API is used.
"""

from __future__ import annotations

import argparse
import os
import weakref
from collections.abc import Sequence
from typing import Any

from ..errors import PSPInputError

# The parser each argument group or mutually exclusive group (made by a `Parser`) belongs to: `add` records old
# spellings on the parser, which argparse's public API does not reach from a group.
_PARSER_OF: weakref.WeakKeyDictionary[Any, Parser] = weakref.WeakKeyDictionary()


class OldSpelling(argparse.Action):
    """An earlier spelling of an argument (`--out` for `-o/--output`): hidden from help, it hands what it parsed to
    the argument itself (`target`), so that the value lands in the same place in the same way (store, store_true,
    append...). Built by `add` with the target's nargs, const, type and choices, so argparse converts and checks
    the value exactly as for the new spelling."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, target: argparse.Action, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.target = target

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: Any = None
    ) -> None:
        self.target(parser, namespace, values, option_string)
        if self.target.required and isinstance(parser, Parser):
            # argparse counts a required argument as given only when its own spelling was: the old one stands in.
            parser.satisfied_by_old_spelling(self.target)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that records the old spellings `add` gives its arguments (`old_spellings`) and its
    subcommands (`subcommands`); subcommands' parsers are built with this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Subcommand name -> (one-line help, its parser), in the order added. argparse has no public way to list
        # a parser's subcommands; the CLI reference (`reference.py`) walks this instead.
        self.subcommands: dict[str, tuple[str, Parser]] = {}
        # Old spelling -> the argument it fills (its shown spellings are `option_strings`); for tests and tools.
        self.old_spellings: dict[str, argparse.Action] = {}
        self._subcommand_action: Any = None
        # Required arguments given by an old spelling in the parse under way (required again once it ends).
        self._relaxed: list[argparse.Action] = []

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

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        """argparse's `add_argument_group`; `add` on the group records old spellings on this parser."""
        group = super().add_argument_group(*args, **kwargs)
        _PARSER_OF[group] = self
        return group

    def add_mutually_exclusive_group(self, **kwargs: Any) -> Any:
        """argparse's `add_mutually_exclusive_group`; `add` on the group records old spellings on this parser."""
        group = super().add_mutually_exclusive_group(**kwargs)
        _PARSER_OF[group] = self
        return group

    def record_old_spellings(self, action: argparse.Action, old: Sequence[str]) -> None:
        """Note that the `old` spellings (already added, hidden) fill `action`: listed in `old_spellings`."""
        for option in old:
            self.old_spellings[option] = action

    def satisfied_by_old_spelling(self, action: argparse.Action) -> None:
        """Required `action` was given by an old spelling: not required for the rest of the parse under way."""
        action.required = False
        self._relaxed.append(action)

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        """argparse's `parse_known_args`; required arguments given by an old spelling count as given."""
        try:
            return super().parse_known_args(args, namespace)
        finally:
            # Required again for the usage line and the next parse.
            for action in self._relaxed:
                action.required = True
            self._relaxed.clear()

    def add_old_subcommand_name(self, old: str, name: str) -> Parser:
        """Let `old`, an earlier name of subcommand `name`, still parse as `name`, unlisted in --help.

        Call it once `name`'s arguments are all added: the old name's parser takes them over (argparse's `parents`)
        and sets the subcommand's `dest` to `name`, so the code after parsing sees one name. It is not added to
        `subcommands`, so the CLI reference leaves it out too."""
        current = self.subcommands[name][1]
        child = self._subcommand_action.add_parser(
            old, parents=[current], add_help=False, description=current.description
        )
        child.set_defaults(**{self._subcommand_action.dest: name})
        return child


def add(parser: Any, *options: str, old: Sequence[str] = (), **kwargs: Any) -> argparse.Action:
    """`parser.add_argument(*options, **kwargs)`, also accepting the `old` spellings, which help does not show.

    `parser` is a `Parser` or a group made by one. The old spellings are one more argument with the same `dest`,
    nargs, const, type, choices and metavar, hidden (`help=argparse.SUPPRESS`) and with no default of its own
    (`default=argparse.SUPPRESS`), that passes what it parses to the new one; in a mutually exclusive group it
    belongs to the group too, so it excludes the others as the new spelling does (giving both spellings of one
    argument there is refused too). A required argument is satisfied by either spelling. Error messages name the
    spelling given (`argument --out: expected one argument`). Returns the new argument."""
    owner = parser if isinstance(parser, Parser) else _PARSER_OF.get(parser)
    if old and owner is None:
        raise TypeError(f"old spellings {', '.join(old)} need a flags.Parser or a group made by one")
    action = parser.add_argument(*options, **kwargs)
    if not old:
        return action
    parser.add_argument(
        *old,
        action=OldSpelling,
        target=action,
        dest=action.dest,
        nargs=action.nargs,
        const=action.const,
        type=action.type,
        choices=action.choices,
        metavar=action.metavar,
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )
    owner.record_old_spellings(action, old)
    return action


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
    return add(parser, "-m", "--model", help=help, **kwargs)


def add_output(parser: Any, help: str, old: Sequence[str] = ("--out",), **kwargs: Any) -> argparse.Action:
    """`-o/--output`: what the command writes; `old` are the spellings earlier versions used."""
    return add(parser, "-o", "--output", old=[option for option in old if option != "-o"], help=help, **kwargs)


def add_data_dir(parser: Any, help: str = "data folder (default: $PSP_DATA or ../shared/data)") -> argparse.Action:
    """`--data-dir`: the data folder (`--data` in earlier versions)."""
    return add(parser, "--data-dir", old=("--data",), default=None, metavar="DIR", help=help)


def add_threads(parser: Any, what: str = "threads") -> argparse.Action:
    """`--threads`: one default everywhere, the cores available."""
    cores = cores_available()
    return parser.add_argument(
        "--threads", type=positive_int, default=cores, help=f"{what} (default: the cores available, {cores})"
    )


def add_columns(parser: Any, help: str) -> argparse.Action:
    """`--columns`: two columns, 1-based numbers or header names."""
    return parser.add_argument("--columns", type=columns, default=None, metavar="A,B", help=help)


def add_quiet(parser: Any, help: str = "no progress bar or summary") -> argparse.Action:
    """`-q/--quiet`."""
    return parser.add_argument("-q", "--quiet", action="store_true", help=help)


def add_skip_bad_lines(parser: Any, help: str) -> argparse.Action:
    """`--skip-bad-lines`: report and skip a bad line instead of stopping at it."""
    return parser.add_argument("--skip-bad-lines", action="store_true", help=help)


def check_batch_size(value: int) -> None:
    """A clear error for a batch size below 1."""
    if value < 1:
        raise PSPInputError(f"--batch-size must be at least 1, got {value}")
