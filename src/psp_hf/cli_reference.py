"""The CLI reference (`docs/cli.md`), generated from the real `psp` parsers.

    python -m psp_hf.cli_reference > docs/cli.md

Walks `psp` and every subcommand (the delegated ones included, each built as `psp_hf.cli.main` builds it) and their
sub-subcommands recursively, writing each one's usage and options. `tests/test_docs.py` checks that the file in the
repository equals this output, so a flag changed without regenerating fails the tests.

The output does not depend on the terminal or the machine: help is formatted at a fixed width, and defaults that
depend on the machine (the number of cores) are written as what they mean, not as this machine's number.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Iterator

from . import cli

# Wide enough for the long option lists, narrow enough to read on GitHub without scrolling much.
WIDTH = 100
# `psp embed --threads` defaults to the cores available; its help names the number of this machine.
MACHINE_CORES = re.compile(r"the cores available, \d+\)")


class _FixedWidthFormatter(argparse.HelpFormatter):
    """argparse's formatter at a fixed width (it reads the terminal's width otherwise)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=WIDTH, max_help_position=32)


def _delegated_parser(name: str) -> argparse.ArgumentParser:
    """The parser of a delegated subcommand, built as `psp_hf.cli.main` builds it."""
    module_name, help_text = cli.DELEGATED[name]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"psp {name}", description=help_text)
    module.add_arguments(parser)
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand of `parser`, in the order they were added."""
    # argparse has no public way to list a parser's subcommands; its actions are the one place that holds them.
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, child in action.choices.items():
                if name in cli.DELEGATED and parser.prog == "psp":
                    child = _delegated_parser(name)
                yield name, helps.get(name, ""), child


def _help_text(parser: argparse.ArgumentParser) -> str:
    """`parser`'s --help at the fixed width, with this machine's core count written as what it means."""
    _set_formatter(parser)
    text = parser.format_help()
    return MACHINE_CORES.sub("the cores available)", text)


def _set_formatter(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = _FixedWidthFormatter


def _sections(parser: argparse.ArgumentParser, level: int, summary: str) -> Iterator[str]:
    yield f"{'#' * level} `{parser.prog}`\n"
    if summary:
        yield f"{summary}\n"
    yield "```text\n" + _help_text(parser).rstrip() + "\n```\n"
    for _name, child_summary, child in _subparsers(parser):
        yield from _sections(child, min(level + 1, 6), child_summary)


def reference() -> str:
    """The whole reference as Markdown: `psp`, then each subcommand (and theirs) with usage and options."""
    parser = cli.build_parser()
    head = [
        "# CLI reference\n",
        "Generated from the `psp` parsers by `python -m psp_hf.cli_reference > docs/cli.md`; do not edit by hand "
        "(`tests/test_docs.py` fails when this file and the parsers differ). The how-to pages explain the "
        "commands; this page lists every option.\n",
    ]
    commands = ["## Commands\n"]
    for name, summary, _child in _subparsers(parser):
        commands.append(f"- [`psp {name}`](#psp-{name}): {summary}")
    body = list(_sections(parser, 2, ""))
    return "\n".join(head + ["\n".join(commands) + "\n"] + body)


def main() -> int:
    """Print the reference on stdout."""
    sys.stdout.write(reference())
    return 0


if __name__ == "__main__":
    sys.exit(main())
