"""Old flag spellings as hidden arguments (`cli.flags.add`, the training fields' other spellings): every one of every
`psp` parser parses to what its new spelling parses to, satisfies a requirement, and stays out of --help and usage;
built from public argparse API only."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

import psp_hf
from psp_hf.cli import COMMANDS, command_parser, parse_args
from psp_hf.cli.flags import Parser, add, add_output

# A command line each parser accepts, in today's spelling (required options included). A parser whose arguments
# have old spellings must be here, so that the walk below reaches them.
BASE = {
    "psp embed": ["in.txt", "-m", "M", "-o", "O"],
    "psp score": ["in.tsv", "-m", "M"],
    "psp train": [],
    "psp eval": [],
    "psp data": ["fetch"],
    "psp prepare paraphrases": ["p.tsv"],
    "psp prepare bitext": ["p.tsv", "--lang", "de"],
    "psp prepare registry-bitext": ["--lang", "de", "-o", "O"],
    "psp prepare distill-corpus": ["-o", "O"],
    "psp prepare label": ["--corpus", "C", "-o", "O"],
    "psp prepare mine-pairs": ["--cache", "C", "-o", "O"],
    "psp prepare bitext-sources": ["--lang", "de", "-o", "O"],
    "psp prepare mono": ["--lang", "de", "-o", "O"],
    "psp push": ["F", "org/repo"],
    "psp convert-original": ["--checkpoint", "c.pt", "--sp-model", "s.model", "-o", "O"],
    "psp backtranslate": ["b.tsv", "--src-lang", "cs", "-m", "M"],
    "psp export": ["MODEL", "-o", "O"],
    "psp embed-dataset": ["in", "-m", "M", "-o", "O"],
    "psp mine": ["E", "-o", "O"],
    "psp teacher convert-e5": ["-o", "O"],
    "psp languages": [],
    "psp serve": ["MODEL"],
}
# Values tried for an option, in order, until one parses and changes what the base command line parses to.
SAMPLES = ["3", "0.5", "1,2", "false", "word"]


def _parsers():
    """(prog, parser) of every `psp` command and of their own subcommands, as `psp` builds them."""

    def walk(parser):
        yield parser.prog, parser
        for _help, child in parser.subcommands.values():
            yield from walk(child)

    for name in COMMANDS:
        yield from walk(command_parser(name))


def _options(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", text))


def _parses(parser: argparse.ArgumentParser, argv: list[str]) -> dict | None:
    """What `argv` parses to, or None when the parser refuses it."""
    try:
        return vars(parser.parse_args(argv))
    except SystemExit:
        return None


def _without(argv: list[str], action: argparse.Action) -> list[str]:
    """`argv` less the (one-value) option `action` and its value."""
    kept, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token in action.option_strings:
            skip = action.nargs != 0
        else:
            kept.append(token)
    return kept


def _values(parser, base: list[str], shown: str, action: argparse.Action) -> list[list[str]]:
    """Value lists for `shown` that parse and change the result: none for a switch, else one sample (or a choice)."""
    before = _parses(parser, base)
    candidates = [[]] if action.nargs in (0, "?") else []
    candidates += [[str(choice)] for choice in action.choices or ()] or [[sample] for sample in SAMPLES]
    found = [values for values in candidates if _parses(parser, [*base, shown, *values]) not in (None, before)]
    assert found, (shown, "no sample value parses")
    return found[:2]


def test_every_parser_with_old_spellings_has_a_base_command_line():
    walked = dict(_parsers())
    assert {prog for prog, parser in walked.items() if parser.old_spellings} <= set(BASE)
    assert set(BASE) <= set(walked)
    for prog, argv in BASE.items():
        assert _parses(walked[prog], argv) is not None, prog
    # The old spellings the README used are among them.
    assert {"--out", "--data"} <= set(walked["psp prepare distill-corpus"].old_spellings)
    assert "--cache" in walked["psp prepare label"].old_spellings
    assert {"--output-dir", "--output_dir", "--batch_size"} <= set(walked["psp train"].old_spellings)


@pytest.mark.parametrize("prog", sorted(BASE))
def test_each_old_spelling_parses_as_the_new_one_and_is_hidden(prog, capsys):
    parser = dict(_parsers())[prog]
    shown_options = _options(parser.format_help())
    base = BASE[prog]
    for old, action in parser.old_spellings.items():
        assert old not in shown_options, (prog, old)
        assert old not in _options(parser.format_usage()), (prog, old)
        shown = action.option_strings[-1]
        assert shown in shown_options, (prog, shown)
        for values in _values(parser, base, shown, action):
            new_result = _parses(parser, [*base, shown, *values])
            assert _parses(parser, [*base, old, *values]) == new_result, (prog, old, values)
            if action.required:
                # The old spelling alone satisfies the requirement, and the requirement stays for the next parse.
                rest = _without(base, action)
                assert _parses(parser, [*rest, old, *values]) == _parses(parser, [*rest, shown, *values]) is not None
                assert _parses(parser, rest) is None, (prog, old)
    capsys.readouterr()


def test_old_spellings_through_the_psp_entry_point():
    assert parse_args(["embed", "in.txt", "-m", "M", "--out", "e.npy"]).output == "e.npy"
    assert parse_args(["prepare", "label", "--corpus", "P", "--cache", "C"]).output == "C"
    args = parse_args(["train", "--output_dir", "O", "--no_cpu", "--batch_size", "4"])
    assert (args.output_dir, args.cpu, args.batch_size) == ("O", False, 4)


def test_a_missing_required_option_is_named_as_in_help(capsys):
    with pytest.raises(SystemExit) as stop:
        parse_args(["embed", "-m", "M"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "psp embed: error: the following arguments are required: input, -o/--output"
    )


# ------------------------------------------------------------------------------- flags.add on small parsers
def _pair(build) -> tuple[Parser, Parser]:
    """The same arguments built twice: with old spellings, and without (what --help should look like)."""
    with_old, without = Parser(prog="x"), Parser(prog="x")
    build(with_old, True)
    build(without, False)
    return with_old, without


def _build(parser: Parser, old: bool) -> None:
    spelling = (lambda *names: names) if old else (lambda *names: ())
    add_output(parser, old=spelling("--out"), required=True, help="where")
    add(parser, "--mode", old=spelling("--kind"), choices=["a", "b"], default="a", help="mode")
    add(parser, "--fast", old=spelling("--quick"), action="store_true", help="go fast")
    add(parser, "--langs", old=spelling("--languages"), nargs="+", default=["en"], help="languages")
    add(parser, "--tag", old=spelling("--label"), action="append", help="tags")
    group = parser.add_argument_group("limits")
    add(group, "--limit", old=spelling("--max", "--most"), type=int, default=5, help="limit")
    exclusive = parser.add_mutually_exclusive_group()
    add(exclusive, "--loud", old=spelling("--noisy"), action="store_true", help="loud")
    add(exclusive, "--quiet-ish", action="store_true", help="quiet")
    parser.add_argument("input")


def test_help_and_usage_are_those_of_the_parser_without_old_spellings():
    with_old, without = _pair(_build)
    assert with_old.format_help() == without.format_help()
    assert with_old.format_usage() == without.format_usage()
    assert set(with_old.old_spellings) == {"--out", "--kind", "--quick", "--languages", "--label", "--max", "--most",
                                           "--noisy"}  # fmt: skip


def test_old_spellings_fill_the_same_argument_the_same_way():
    parser, _ = _pair(_build)
    assert vars(parser.parse_args(["i", "-o", "O"])) == {
        "output": "O", "mode": "a", "fast": False, "langs": ["en"], "tag": None, "limit": 5, "loud": False,
        "quiet_ish": False, "input": "i",
    }  # fmt: skip
    old = ["i", "--out", "O", "--kind", "b", "--quick", "--languages", "de", "fr", "--label", "x", "--tag", "y"]
    new = ["i", "-o", "O", "--mode", "b", "--fast", "--langs", "de", "fr", "--tag", "x", "--tag", "y"]
    assert vars(parser.parse_args([*old, "--most", "7", "--noisy"])) == vars(parser.parse_args([*new, "--limit", "7",
                                                                                               "--loud"]))  # fmt: skip
    # The last spelling given wins, whichever it is, as with one spelling.
    assert parser.parse_args(["i", "--output", "A", "--out", "B"]).output == "B"
    assert parser.parse_args(["i", "--out", "A", "-o", "B"]).output == "B"
    assert parser.parse_args(["i", "-o", "O", "--max", "1", "--limit", "2"]).limit == 2


def test_old_spellings_are_checked_like_the_new(capsys):
    parser, _ = _pair(_build)
    for argv, message in (
        (["i", "-o", "O", "--kind", "c"], "argument --kind: invalid choice: 'c' (choose from 'a', 'b')"),
        (["i", "-o", "O", "--max", "x"], "argument --max/--most: invalid int value: 'x'"),
        (["i", "-o", "O", "--languages"], "argument --languages: expected at least one argument"),
        (["i", "-o", "O", "--noisy", "--quiet-ish"], "argument --quiet-ish: not allowed with argument --noisy"),
        (["i", "-o", "O", "--quiet-ish", "--noisy"], "argument --noisy: not allowed with argument --quiet-ish"),
        (["i", "-o", "O", "--loud", "--noisy"], "argument --noisy: not allowed with argument --loud"),
        (["i"], "the following arguments are required: -o/--output"),
    ):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        assert capsys.readouterr().err.splitlines()[-1] == f"x: error: {message}", argv


def test_a_required_option_given_by_its_old_spelling_is_required_again_afterwards(capsys):
    parser, without = _pair(_build)
    assert parser.parse_args(["i", "--out", "O"]).output == "O"
    assert parser.format_usage() == without.format_usage()  # still shown as required
    with pytest.raises(SystemExit):
        parser.parse_args(["i"])
    assert "required: -o/--output" in capsys.readouterr().err


def test_subcommands_old_spellings_satisfy_their_requirements():
    parser = Parser(prog="x")
    parser.add_subparsers(dest="kind", required=True)
    child = parser.add_subcommand("make", help="make it")
    add_output(child, old=("--out", "--cache"), required=True, help="where")
    assert parser.parse_args(["make", "--cache", "C"]).output == "C"
    assert child.old_spellings["--cache"].option_strings == ["-o", "--output"]


def test_old_spellings_need_a_parser_that_records_them():
    with pytest.raises(TypeError, match="flags.Parser"):
        add(argparse.ArgumentParser(), "--output", old=("--out",))
    inner = Parser(prog="x").add_argument_group("g").add_mutually_exclusive_group()  # made by the group, not Parser
    with pytest.raises(TypeError, match="--old"):
        add(inner, "--new", old=("--old",), action="store_true")
    add(argparse.ArgumentParser(), "--output")  # no old spellings: any parser


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
