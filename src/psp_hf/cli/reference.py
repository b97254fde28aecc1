"""The CLI reference (`docs/cli.md`), generated from the real `psp` parsers.

    python -m psp_hf.cli.reference > docs/cli.md

Walks `psp` and every command (each built as `psp_hf.cli.main` builds it) and their
sub-subcommands recursively, writing each one's usage and options. `tests/project/test_docs.py` checks that the file in
the repository equals this output, so a flag changed without regenerating fails the tests.

The output does not depend on the terminal or the machine: help is formatted at a fixed width, and defaults that
depend on the machine (the number of cores) are written as what they mean, not as this machine's number.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator

from . import COMMANDS, build_parser, command_parser
from .flags import Parser

# Wide enough for the long option lists, narrow enough to read on GitHub without scrolling much.
WIDTH = 100
# `psp embed --threads` defaults to the cores available; its help names the number of this machine.
MACHINE_CORES = re.compile(r"the cores available, \d+\)")


class _FixedWidthFormatter(argparse.HelpFormatter):
    """argparse's help formatter at a fixed width (it reads the terminal's width otherwise); old spellings are
    hidden arguments (`help=argparse.SUPPRESS`), which no formatter shows."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=WIDTH, max_help_position=32)


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand of `parser`, in the order they were added.

    `psp`'s commands come from `COMMANDS` (each built in full by `command_parser`); their own subcommands
    (`psp prepare KIND`, `psp teacher ACTION`) from the `subcommands` each `flags.Parser` records as they are added.
    """
    if parser.prog == "psp":
        for name, (_module, summary) in COMMANDS.items():
            yield name, summary, command_parser(name)
        return
    subcommands = parser.subcommands if isinstance(parser, Parser) else {}
    for name, (summary, child) in subcommands.items():
        yield name, summary, child


def _help_text(parser: argparse.ArgumentParser) -> str:
    """`parser`'s --help at the fixed width, with this machine's core count written as what it means."""
    _set_formatter(parser)
    text = parser.format_help()
    return MACHINE_CORES.sub("the cores available)", text)


def _set_formatter(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = _FixedWidthFormatter  # a public attribute, read by `format_help`


def _sections(parser: argparse.ArgumentParser, level: int, summary: str) -> Iterator[str]:
    yield f"{'#' * level} `{parser.prog}`\n"
    if summary:
        yield f"{summary}\n"
    yield "```text\n" + _help_text(parser).rstrip() + "\n```\n"
    for _name, child_summary, child in _subcommands(parser):
        yield from _sections(child, min(level + 1, 6), child_summary)


def reference() -> str:
    """The whole reference as Markdown: `psp`, then each subcommand (and theirs) with usage and options."""
    parser = build_parser()
    head = [
        "# CLI reference\n",
        "Generated from the `psp` parsers by `python -m psp_hf.cli.reference > docs/cli.md`; do not edit by hand "
        "(`tests/project/test_docs.py` fails when this file and the parsers differ). The how-to pages explain the "
        "commands; this page lists every option.\n",
    ]
    commands = ["## Commands\n"]
    for name, summary, _child in _subcommands(parser):
        commands.append(f"- [`psp {name}`](#psp-{name}): {summary}")
    body = list(_sections(parser, 2, ""))
    return "\n".join(head + ["\n".join(commands) + "\n"] + body)


def main() -> int:
    """Print the reference on stdout."""
    sys.stdout.write(reference())
    return 0


if __name__ == "__main__":
    sys.exit(main())
