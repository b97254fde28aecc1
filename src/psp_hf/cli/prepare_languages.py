"""`psp prepare bitext-sources|mono`: the data folder's X–English sources and monolingual text, chosen by name.

    psp prepare bitext-sources --lang fr --sources default,python-docs=0.5 -o data/fr
    psp prepare bitext-sources --lang zh --sources everyday -o data/zh-everyday    # the everyday-register pairs alone
    psp prepare bitext-sources --lang zh --sources allset-grammar --non-commercial -o data/zh-nc
    psp prepare mono --lang fr --sources default -o data/fr-mono         # sentences.txt.gz + report.json
    psp prepare mono --lang ar --sources saudinewsnet --non-commercial -o data/ar-mono

The sources and their licences are in `language_sources.py`; `psp languages` uses the same ones.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ..logs import write_result
from . import flags
from .flags import positive_int


def add_language_commands(prepare: flags.Parser) -> None:
    """The sub-subcommands `bitext-sources` and `mono` of `psp prepare`."""
    from ..data.sources.language_sources import BITEXT_SOURCES

    bitext = prepare.add_subcommand(
        "bitext-sources",
        help="X-English bitext of the data folder, sources chosen by name",
        description="Filter the chosen bitext sources of the data folder for --lang like `psp prepare bitext` "
        "(evaluation and PUD sentences removed); the card and report list every source with its licence.",
    )
    bitext.add_argument("--lang", required=True, help="the non-English language (ar, de, es, fr, ru, tr, zh)")
    bitext.add_argument(
        "--sources",
        default="default",
        help="NAME or NAME=FRACTION, comma-separated: default, all, everyday, " + ", ".join(BITEXT_SOURCES),
    )
    bitext.add_argument(
        "--non-commercial",
        action="store_true",
        help="allow the non-commercial sources (xnli-test, allset-grammar), each named; the report says so",
    )
    mono = prepare.add_subcommand(
        "mono",
        help="monolingual text of the data folder for a multilingual teacher",
        description="Gather the chosen unlabeled/<lang>/<source> sentences (evaluation and PUD sentences and "
        "duplicates removed, at most --limit per source) into --output/sentences.txt.gz with report.json (sources, "
        "licences, counts): psp train --mono-data reads it.",
    )
    mono.add_argument("--lang", required=True, help="the language (ar, de, es, fr, ru, tr, zh)")
    mono.add_argument(
        "--sources",
        default="default",
        help="NAME or NAME=FRACTION, comma-separated: default, all, everyday (zh: dialogue), or a source's name",
    )
    mono.add_argument("--limit", type=positive_int, default=50_000, help="sentences per source (50,000)")
    mono.add_argument(
        "--non-commercial", action="store_true", help="allow the non-commercial sources (ar: saudinewsnet)"
    )
    for parser in (bitext, mono):
        flags.add_output(parser, required=True, help="output folder")
        parser.add_argument("--overwrite", action="store_true", help="replace an existing --output folder")
        flags.add_data_dir(parser)
    bitext.add_argument(
        "--vocab-size",
        type=positive_int,
        default=50_000,
        help="sentencepiece vocabulary of the output (50,000)",
    )


def _run_bitext_sources(args: argparse.Namespace) -> int:
    import shutil
    import tempfile

    from ..data.checks import check_output_folder
    from ..data.prepare import prepare_bitext
    from ..data.sources.language_sources import bitext_sources, source_licences, stage_bitext
    from ..data.sources.registry_bitext import add_licences
    from ..data_folder import data_dir
    from ..errors import PSPInputError

    check_output_folder(Path(args.output), args.overwrite)
    chosen = bitext_sources(args.lang, args.sources, args.non_commercial)
    if not chosen:
        raise PSPInputError(f"--sources {args.sources!r}: no bitext source for {args.lang}")
    staging = Path(tempfile.mkdtemp(prefix="psp-bitext-sources-"))
    try:
        files = stage_bitext(chosen, data_dir(args.data_dir), args.lang, staging)
        report = prepare_bitext(
            files,
            args.lang,
            args.output,
            overwrite=args.overwrite,
            vocab_size=args.vocab_size,
            command=shlex.join(["psp", *sys.argv[1:]]),
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    report["sources"] = source_licences(chosen, "data folder")
    add_licences(Path(report["path"]), report)
    from .prepare_sources import print_summary

    print_summary(report)
    return 0


def _run_mono(args: argparse.Namespace) -> int:
    import json

    from ..data.checks import check_output_folder
    from ..data.sources.language_sources import mono_sources, prepare_mono
    from ..data_folder import data_dir
    from ..errors import PSPInputError

    check_output_folder(Path(args.output), args.overwrite, replaces=False)
    chosen = mono_sources(args.lang, args.sources, args.non_commercial)
    if not chosen:
        raise PSPInputError(f"--sources {args.sources!r}: no monolingual source for {args.lang}")
    report = prepare_mono(chosen, data_dir(args.data_dir), args.lang, args.output, limit=args.limit)
    write_result(json.dumps(report, indent=2, ensure_ascii=False))
    return 0


LANGUAGE_COMMANDS = {"bitext-sources": _run_bitext_sources, "mono": _run_mono}
