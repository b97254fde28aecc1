"""`psp prepare`: training data from the command line, the papers' recipes and the distillation corpus.

psp prepare paraphrases para-nmt-50m.txt -o data/paranmt --push-to-hub org/paranmt
psp prepare paraphrases train.pairs.tsv.gz --no-score-filter -o data/flickr-pairs
psp prepare bitext --lang de de-en.tsv.gz -o data/bitext-de
psp prepare distill-corpus -o CORPUS                # unlabelled English text, evaluation sentences removed
psp prepare label --corpus CORPUS -o CACHE          # teacher embeddings of the corpus (resumable)
psp prepare mine-pairs --cache CACHE -o pairs.tsv   # paraphrase pairs mined with the teacher
psp prepare bitext-sources --lang fr --sources default,python-docs -o DIR     # the data folder's bitext by name
psp prepare mono --lang fr -o DIR                   # monolingual text for a multilingual teacher

Every argument and output is checked before the work starts; a bad one is one `psp: error: ...` line.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from ..errors import PSPInputError
from . import flags
from .flags import positive_int


def _column(value: str):
    from ..data.readers import parse_column

    try:
        return parse_column(value)
    except PSPInputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _languages(value: str) -> list[str]:
    codes = [code.strip() for code in value.split(",") if code.strip()]
    if not codes:
        raise argparse.ArgumentTypeError(f"expected language codes like en,cs; got {value!r}")
    return codes


def _add_io(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="TSV files (.tsv, .tsv.gz, .txt); for bitext also hub:NAME (sentence-transformers/parallel-sentences-NAME"
        ", e.g. hub:opensubtitles) or hub:OWNER/NAME, streamed from the Hub (docs/data.md)",
    )
    flags.add_output(parser, help="write the dataset folder here (atomically)")
    parser.add_argument("--push-to-hub", metavar="REPO", help="upload the dataset to this Hub dataset repo")
    parser.add_argument("--private", action="store_true", help="create the Hub repo as private")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output folder")
    group = parser.add_argument_group("input format")
    group.add_argument(
        "--header",
        choices=["auto", "yes", "no"],
        default="auto",
        help="is the first line a header? auto: yes when it names the expected columns (default)",
    )
    flags.add_columns(group, "the pair's two columns: 1-based numbers (2,3) or header names (sentence1,sentence2)")
    group.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="skip (and count) lines that are not UTF-8, have the wrong column count or a bad score, "
        "instead of stopping with file:line",
    )
    group.add_argument("--limit", type=positive_int, default=None, help="read at most this many pairs")


def _add_output(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("output")
    group.add_argument("--no-lowercase", dest="lowercase", action="store_false", help="keep the case")
    group.add_argument("--no-dedupe", dest="dedupe", action="store_false", help="keep exact duplicate pairs")
    group.add_argument("--no-shuffle", dest="shuffle", action="store_false", help="keep the input order")
    group.add_argument("--seed", type=int, default=0, help="shuffling seed (default 0)")
    group.add_argument(
        "--num-shards", type=positive_int, default=None, help="parquet shards (default: about one per million pairs)"
    )
    group.add_argument(
        "--vocab-size",
        type=positive_int,
        default=50000,
        help="sentencepiece vocabulary trained on the output (default 50000)",
    )
    group.add_argument(
        "--no-tokenizer", dest="train_tokenizer", action="store_false", help="do not train the sentencepiece vocabulary"
    )
    group.add_argument("--batch-size", type=positive_int, default=8192, help="pairs per filtering batch")


def _add_length(parser: argparse.ArgumentParser, low: int, high: int) -> None:
    group = parser.add_argument_group("token length")
    group.add_argument("--min-tokens", type=int, default=low, help=f"minimum tokens per side (default {low})")
    group.add_argument("--max-tokens", type=int, default=high, help=f"maximum tokens per side (default {high})")
    group.add_argument(
        "--length-unit",
        choices=["auto", "words", "chars"],
        default="auto",
        help="words = whitespace tokens; chars = non-space characters; auto: chars for languages written "
        "without spaces (zh, ja, th, ...), words otherwise",
    )
    group.add_argument(
        "--no-length-filter", dest="length_filter", action="store_false", help="keep pairs of any length"
    )


def _add_candidates(parser) -> None:
    parser.add_argument(
        "--langid-candidates",
        type=_languages,
        default=None,
        metavar="CODES",
        help="languages langid may choose from, comma-separated (default: all 97); e.g. en,cs for "
        "Czech-English back-translations cuts false rejections of short English sentences",
    )


def _add_evaluation_flag(parser) -> None:
    parser.add_argument(
        "--keep-evaluation-sentences",
        dest="exclude_evaluation",
        action="store_false",
        help="keep pairs with a side equal to an evaluation sentence (STS, STS17, Tatoeba, ...; removed by default)",
    )


def add_arguments(parser: flags.Parser) -> None:
    """Arguments of `psp prepare` (`paraphrases`, `bitext`, `distill-corpus`, `label`, `mine-pairs`, ...)."""
    parser.add_subparsers(dest="kind", required=True, metavar="KIND")

    para = parser.add_subcommand(
        "paraphrases",
        help="filter ParaNMT-format paraphrase pairs",
        description="Filter paraphrase pairs (sentence1, sentence2, optional score) into a datasets folder: "
        "lowercase, empty side, token length, trigram overlap, duplicates, language ID, paraphrase score.",
    )
    _add_io(para)
    para.add_argument(
        "--score-column",
        type=_column,
        default=None,
        help="column with the paraphrase score (default: 'score' in a header, or column 3 of a "
        "headerless 3-column file)",
    )
    group = para.add_argument_group("filters")
    group.add_argument("--lang", default="en", help="language of both sides (default en)")
    group.add_argument("--no-langid", dest="langid", action="store_false", help="skip language identification")
    _add_candidates(group)
    group.add_argument("--min-score", type=float, default=0.7, help="minimum paraphrase score (default 0.7)")
    group.add_argument("--max-score", type=float, default=1.0, help="maximum paraphrase score (default 1.0)")
    group.add_argument(
        "--score-model", default=None, help="psp model (folder or Hub id) whose cosine is the paraphrase score"
    )
    group.add_argument(
        "--no-score-filter", dest="score_filter", action="store_false", help="keep pairs of any paraphrase score"
    )
    group.add_argument(
        "--max-overlap",
        type=float,
        default=0.5,
        help="maximum trigram overlap, shared / trigrams of the shorter side (default 0.5)",
    )
    group.add_argument(
        "--no-overlap-filter", dest="overlap_filter", action="store_false", help="keep pairs of any trigram overlap"
    )
    _add_evaluation_flag(group)
    _add_length(para, 5, 40)
    _add_output(para)

    bitext = parser.add_subcommand(
        "bitext",
        help="filter X–English bitext",
        description="Filter <lang>–English bitext into a datasets folder with columns <lang> and en: lowercase, "
        "empty side, token length, duplicates, optional language ID, shuffle; shared sentencepiece vocabulary.",
    )
    bitext.add_argument("--lang", required=True, help="the non-English language (e.g. de, zh)")
    _add_io(bitext)
    bitext.add_argument("--langid", action="store_true", help="also check with langid that the sides are <lang> and en")
    _add_candidates(bitext)
    _add_evaluation_flag(bitext)
    _add_length(bitext, 3, 100)
    _add_output(bitext)
    registry = parser.add_subcommand(
        "registry-bitext",
        help="X-English pairs from Debian packages: FreeDict dictionaries, gettext catalogues",
        description="Read the FreeDict dictionaries and translated gettext catalogues of unpacked Debian packages "
        "(make registry-bitext) for --lang and filter them like `psp prepare bitext` (length 1-60 tokens, "
        "duplicates, evaluation sentences, language ID between --lang and English); licences in the card.",
    )
    registry.add_argument("--lang", required=True, help="the non-English language (ar, de, es, fr, ru, tr, zh, ...)")
    flags.add_output(registry, required=True, help="write the dataset folder here (atomically)")
    registry.add_argument("--overwrite", action="store_true", help="replace an existing --output folder")
    registry.add_argument("--root", default=None, help="where the packages were unpacked (default .cache/...)")
    registry.add_argument(
        "--sources",
        type=_languages,
        default=None,
        help="freedict,mueller,unihan,cedict,gettext,help,bible,apertium (default all)",
    )
    registry.add_argument(
        "--per-source-limit",
        type=positive_int,
        default=None,
        help="pairs per source (a larger source is sampled evenly over its entries)",
    )
    registry.add_argument("--no-langid", dest="langid", action="store_false", help="skip language identification")
    registry.add_argument(
        "--vocab-size", type=positive_int, default=50000, help="sentencepiece vocabulary trained on the output (50000)"
    )
    from .prepare_sources import add_source_commands

    add_source_commands(parser)
    from .prepare_languages import add_language_commands

    add_language_commands(parser)


def _command(args: argparse.Namespace) -> str:
    argv = sys.argv[1:]
    if argv[:2] == ["prepare", args.kind]:
        return shlex.join(["psp", *argv])
    # Called as a library (tests, notebooks): the inputs and destinations are what identifies the run.
    parts = ["psp", "prepare", args.kind, *args.inputs]
    if args.kind == "bitext":
        parts += ["--lang", args.lang]
    if args.output:
        parts += ["--output", args.output]
    if args.push_to_hub:
        parts += ["--push-to-hub", args.push_to_hub]
    return shlex.join(parts)


def run(args: argparse.Namespace) -> int:
    """Run `psp prepare`; the recipes print a summary of the counts on stderr."""
    from .prepare_languages import LANGUAGE_COMMANDS
    from .prepare_sources import SOURCE_COMMANDS

    commands = {**SOURCE_COMMANDS, **LANGUAGE_COMMANDS}
    if args.kind in commands:
        return commands[args.kind](args)
    from ..data.prepare import prepare_bitext, prepare_paraphrases

    if args.output is None and args.push_to_hub is None:
        raise PSPInputError("give --output DIR, --push-to-hub REPO, or both")
    common = {
        "out": args.output,
        "push_to_hub": args.push_to_hub,
        "private": args.private,
        "overwrite": args.overwrite,
        "columns": args.columns,
        "header": args.header,
        "skip_bad_lines": args.skip_bad_lines,
        "length_filter": args.length_filter,
        "min_tokens": args.min_tokens,
        "max_tokens": args.max_tokens,
        "length_unit": args.length_unit,
        "lowercase": args.lowercase,
        "dedupe": args.dedupe,
        "shuffle": args.shuffle,
        "seed": args.seed,
        "num_shards": args.num_shards,
        "vocab_size": args.vocab_size,
        "train_tokenizer": args.train_tokenizer,
        "batch_size": args.batch_size,
        "limit": args.limit,
        "langid_candidates": args.langid_candidates,
        "command": _command(args),
        "progress": not args.quiet and sys.stderr.isatty(),
    }
    if args.kind == "paraphrases":
        report = prepare_paraphrases(
            args.inputs,
            score_column=args.score_column,
            language=args.lang,
            langid=args.langid,
            score_filter=args.score_filter,
            min_score=args.min_score,
            max_score=args.max_score,
            score_model=args.score_model,
            overlap_filter=args.overlap_filter,
            max_overlap=args.max_overlap,
            exclude_evaluation=args.exclude_evaluation,
            **common,
        )
    else:
        from ..data.sources.hub import staged_inputs

        with staged_inputs(args.inputs, args.lang, args.limit) as inputs:  # `hub:NAME` streamed from the Hub
            report = prepare_bitext(
                inputs, args.lang, langid=args.langid, exclude_evaluation=args.exclude_evaluation, **common
            )
    if not args.quiet:
        from .prepare_sources import print_summary

        print_summary(report)
    return 0
