"""The `psp` vocabulary: every flag has one spelling and help text, -q and -v mean the same on every command, the
spellings of the unreleased versions before it are refused, and the parsers use argparse's public API only."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

import psp_hf
from psp_hf.cli import COMMANDS, command_parser, parse_args
from psp_hf.logs import QUIET_HELP, VERBOSE_HELP


def _leaves():
    """(prog, parser) of every `psp` command, or of each of its own subcommands, as `psp` builds them."""

    def walk(parser):
        if not parser.subcommands:
            yield parser.prog, parser
        for _help, child in parser.subcommands.values():
            yield from walk(child)

    for name in COMMANDS:
        yield from walk(command_parser(name))


def _flag_help(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    """Each option string of `parser` -> its help text, read from `--help` through a parser's public API."""
    found = {}
    for group in parser.format_help().split("\n\n"):
        for match in re.finditer(r"^  (-[^\n]*?)(?:  +(\S[^\n]*)|\n {10,}(\S[^\n]*)|$)", group, flags=re.M):
            for option in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", match.group(1)):
                found[option] = match.group(2) or match.group(3)
    return found


@pytest.mark.parametrize(("prog", "parser"), list(_leaves()), ids=lambda value: str(value).split("(")[0])
def test_every_flag_has_help_and_quiet_and_verbose_are_the_same_everywhere(prog, parser):
    helps = _flag_help(parser)
    assert [option for option, text in helps.items() if not text] == [], prog
    assert helps["-q"].startswith(QUIET_HELP[:40]) and helps["-v"] == VERBOSE_HELP, prog


@pytest.mark.parametrize(
    "argv",
    [
        ["embed", "in.txt", "-m", "M", "--out", "e.npy"],
        ["prepare", "pool", "-o", "C"],
        ["prepare", "label", "--corpus", "P", "--cache", "C"],
        ["eval", "-m", "M", "--data", "DIR"],
        ["embed-dataset", "X", "-m", "M", "--output-dir", "O"],
        ["train", "--data", "P", "--output-dir", "O"],
        ["train", "--data", "P", "--output_dir", "O"],
        ["train", "--data", "P", "-o", "O", "--batch_size", "4"],
        ["train", "--teacher-cache", "C", "--pool-weights", "w=2", "-o", "O"],
    ],
    ids=" ".join,
)
def test_the_spellings_of_unreleased_versions_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        parse_args(argv)
    assert stop.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_a_missing_required_option_is_named_as_in_help(capsys):
    with pytest.raises(SystemExit) as stop:
        parse_args(["embed", "-m", "M"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "psp embed: error: the following arguments are required: input, -o/--output"
    )


# ------------------------------------------------------------------------------- public API only
PRIVATE = re.compile(
    r"\._actions\b|\._option_string_actions|\._get_(?:formatter|values|value|optional|positional|option_tuples)\b"
    r"|_parse_dataclass_field|def _format_\w+\(self|_SubParsersAction|\bparser\._|argparse\._|HfArgumentParser"
    r"|\._group_actions|\._mutually_exclusive_groups|\._action_groups|\._registry_get|\._defaults\b"
)


def test_no_private_argparse_or_transformers_parser_api_in_the_package():
    package = Path(psp_hf.__file__).resolve().parent
    found = {
        f"{path.relative_to(package).as_posix()}:{number}": line.strip()
        for path in sorted(package.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if PRIVATE.search(line)
    }
    assert found == {}
    assert PRIVATE.search("parser._actions") and PRIVATE.search("class F:\n    def _format_usage(self, x):")
