"""`psp data fetch`: the data folder's layout from public Hub datasets (`psp_hf.data.fetch`), for a machine without
the shared data folder.

    psp data fetch --for eval -o data && psp eval -m MODEL --data-dir data --tasks fast
"""

from __future__ import annotations

import argparse
import logging
import sys

from . import flags

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `psp data`."""
    from ..data.fetch import PURPOSES

    parser.add_argument("action", choices=["fetch"], help="fetch: write the data folder's layout from the Hub")
    parser.add_argument(
        "--for",
        dest="purpose",
        default="eval",
        choices=PURPOSES,
        help="what the folder is for: eval (the evaluation sets psp eval reads from MTEB's Hub copies), demo (the "
        "sets make demo scores on, the Flickr30k caption pairs and Wikipedia sentences), languages (the sets psp "
        "languages scores on; its training text streams with --sources hub:NAME). Default: eval",
    )
    parser.add_argument(
        "--langs",
        default=None,
        help="comma-separated languages whose Tatoeba and STS17 sets to fetch (default: ar,de,es,fr,ru,tr,zh)",
    )
    parser.add_argument(
        "--wikipedia-sentences",
        type=flags.positive_int,
        default=None,
        help="--for demo: how many Wikipedia sentences (default 1,000,000, as the shared folder holds)",
    )
    flags.add_output(
        parser,
        default=None,
        help="the folder to write (default: $PSP_DATA or ../shared/data); rerun the same command to resume",
    )


def run(args: argparse.Namespace) -> int:
    """Fetch what --for needs into --output, resuming a fetch that stopped."""
    from ..data.fetch import fetch, items_for
    from ..data_folder import data_dir

    out = data_dir(args.output)
    languages = [code.strip() for code in args.langs.split(",") if code.strip()] if args.langs else None
    items = items_for(args.purpose, languages, args.wikipedia_sentences)

    logger.info(f"fetching {len(items)} Hub set(s) into {out} (--for {args.purpose}); a rerun resumes")
    done = fetch(out, items, progress=not args.quiet and sys.stderr.isatty())
    skipped = f", {len(done['skipped'])} already there" if done["skipped"] else ""
    logger.info(f"done: {len(done['fetched'])} file(s) written{skipped}; sources and revisions in {out}/SOURCES.tsv")
    return 0
