"""`psp languages`: the X-English models end to end (the pipeline: `psp_hf.experiments.languages`; here its flags)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from ..data.sources.fragments import FRAGMENT_LANGUAGES, FRAGMENTS
from ..data.sources.language_sources import BITEXT_SOURCES
from ..data_folder import data_dir
from ..errors import PSPInputError
from ..experiments.english_rows import E5_STUDENT, ENGLISH_SENTENCES, english_student
from ..experiments.languages import (
    ENGLISH_TASKS,
    LANGUAGES,
    MULTILINGUAL_EPOCHS,
    MULTILINGUAL_MINUTES,
    MULTILINGUAL_VOCAB_SIZE,
    REGISTRY_SOURCES,
    Settings,
    build_language,
    training_arguments,
    write_summary,
)
from ..experiments.languages_data import check_data
from ..experiments.multilingual_model import build_multilingual
from ..logs import write_result
from ..training.data.multilingual import (
    BITEXT_TARGETS,
    MONO_WEIGHT,
    MULTILINGUAL_DEFAULT_MONO,
    MULTILINGUAL_DEFAULT_TARGETS,
)
from . import flags

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `psp languages`."""
    parser.add_argument("--langs", default=",".join(LANGUAGES), help="comma-separated languages (default: all 7)")
    flags.add_output(parser, default=".cache/languages", help="output folder (default .cache/languages)")
    flags.add_data_dir(parser)
    parser.add_argument(
        "--teacher",
        default="default",
        help="teacher: folder, Hub id, e5-small, e5-small-query, use-multilingual, e5-small+use-multilingual "
        "(default MiniLM)",
    )
    parser.add_argument("--teacher-cache", default=None, help="teacher cache folder (default OUT/teacher-cache)")
    parser.add_argument("--minutes", type=float, default=20.0, help="training minutes per language (default 20)")
    parser.add_argument("--epochs", type=int, default=5, help="at most this many epochs (default 5)")
    parser.add_argument(
        "--dim",
        type=int,
        default=None,
        help="embedding dimension of a model trained from scratch (default 1024); a model started from "
        "--init-rows-from has that model's dimension, and --dim is then ignored (with a warning)",
    )
    parser.add_argument(
        "--vocab-size", type=int, default=50_000, help="sentencepiece vocabulary of each language's data (50,000)"
    )
    parser.add_argument("--limit", type=int, default=None, help="read at most this many pairs per language")
    parser.add_argument("--no-registry", dest="registry", action="store_false", help="no Debian registry pairs")
    parser.add_argument(
        "--registry-limit",
        type=int,
        default=50_000,
        help="pairs per registry source, sampled evenly from a larger one (50,000)",
    )
    parser.add_argument(
        "--registry-sources",
        default=",".join(REGISTRY_SOURCES),
        help=f"which registry sources, comma-separated (default: all of {', '.join(REGISTRY_SOURCES)})",
    )
    parser.add_argument("--tasks", default=",".join(("tatoeba", "sts17", *ENGLISH_TASKS)), help="evaluation tasks")
    flags.add_threads(parser, "torch threads")
    parser.add_argument(
        "--margin-only",
        action="store_true",
        help="the baseline: train with P-SP's cross-lingual margin loss alone (no teacher, nothing labelled)",
    )
    parser.add_argument(
        "--init-rows-from",
        default=None,
        metavar="MODEL",
        help="an English psp model (e.g. `make distill`'s): the rows of the pieces its vocabulary shares with each "
        "language's start from it, and the width is its own (--dim is then ignored); "
        f"{E5_STUDENT}: build (once, in OUT/english) an English student of e5-small's whitened 'query: ' labels "
        f"of {ENGLISH_SENTENCES:,} corpus sentences and start from it: the rows measured best with --teacher "
        "e5-small",
    )
    _add_data_arguments(parser)
    _add_multilingual_arguments(parser)
    parser.add_argument("--train-args", default="", help="more psp train flags, e.g. '--margin-weight 0.5'")


def run(args: argparse.Namespace) -> int:
    """Run the pipeline for every language of --langs; print the summary table."""
    import math
    import shlex

    languages = [code.strip() for code in args.langs.split(",") if code.strip()]
    unknown = [code for code in languages if code not in LANGUAGES]
    if unknown:
        raise PSPInputError(f"--langs: no recipe for {', '.join(unknown)} (known: {', '.join(LANGUAGES)})")
    if not languages:  # an empty list would run nothing and report success
        raise PSPInputError(f"--langs {args.langs!r}: give one or more of {', '.join(LANGUAGES)}")
    kinds = tuple(kind.strip() for kind in args.registry_sources.split(",") if kind.strip())
    if not kinds or set(kinds) - set(REGISTRY_SOURCES):
        known = ", ".join(REGISTRY_SOURCES)
        raise PSPInputError(f"--registry-sources {args.registry_sources!r}: give one or more of {known}")
    build_english = args.init_rows_from == E5_STUDENT  # a name, as --teacher's are: never a folder of that name
    if args.init_rows_from and not build_english and not (Path(args.init_rows_from) / "config.json").is_file():
        raise PSPInputError(f"--init-rows-from {args.init_rows_from}: not a model folder (no config.json)")
    if args.mono_fragments is not None and args.mono_fragments < 0:
        raise PSPInputError(f"--mono-fragments {args.mono_fragments}: give a count of spans, 0 for none")
    if args.dim is not None and args.init_rows_from:
        logger.warning("psp languages: --dim %d is ignored: the models take --init-rows-from's dimension", args.dim)
    for flag, minutes in (("--minutes", args.minutes), ("--multilingual-minutes", args.multilingual_minutes)):
        # Named here, before any work: psp train would refuse it only at the first language's training step.
        if not math.isfinite(minutes) or minutes < 0:
            raise PSPInputError(f"{flag} must be a number of minutes >= 0 (0: no limit), got {minutes}")
    try:
        extra = tuple(shlex.split(args.train_args))
    except ValueError as error:  # an unbalanced quote
        raise PSPInputError(f"--train-args {args.train_args!r}: cannot split it into flags ({error})") from None
    out = Path(args.output)
    settings = Settings(
        out=out,
        data=data_dir(args.data_dir),
        teacher=args.teacher,
        teacher_cache=Path(args.teacher_cache) if args.teacher_cache else out / "teacher-cache",
        minutes=args.minutes,
        epochs=args.epochs,
        dim=args.dim or 1024,
        vocab_size=args.vocab_size,
        limit=args.limit,
        registry=args.registry,
        registry_limit=args.registry_limit,
        registry_sources=kinds,
        tasks=tuple(task.strip() for task in args.tasks.split(",") if task.strip()),
        threads=args.threads,
        extra=extra,
        margin_only=args.margin_only,
        init_rows_from=args.init_rows_from,
        sources=args.sources,
        mono_sources=args.mono_sources,
        mono_limit=args.mono_limit,
        mono_fragments=args.mono_fragments,
        non_commercial=args.non_commercial,
        bitext_targets=args.bitext_targets,
        mono_weight=args.mono_weight,
        mono_batch_size=args.mono_batch_size,
        dev=args.dev,
        multilingual_vocab_size=args.multilingual_vocab_size,
        multilingual_epochs=args.multilingual_epochs,
        multilingual_minutes=args.multilingual_minutes,
    )
    for code in languages:  # a wrong source name, a missing dev set or a bad training flag fails before any work
        check_data(code, settings)
        training_arguments(code, out / code, settings)
    if build_english:
        settings.init_rows_from = str(english_student(settings))
    rows = [build_language(code, settings) for code in languages]
    multilingual = build_multilingual(languages, settings) if args.multilingual else None
    write_result(write_summary(out, rows, multilingual))
    return 0


def _add_multilingual_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the multilingual model (p-sp-multilingual)."""
    parser.add_argument(
        "--multilingual",
        action="store_true",
        help="after the languages, build one model for all of them and English (OUT/multilingual: p-sp-multilingual) "
        "from their prepared text, and compare it with them",
    )
    parser.add_argument(
        "--multilingual-vocab-size",
        type=int,
        default=MULTILINGUAL_VOCAB_SIZE,
        help=f"--multilingual: its sentencepiece vocabulary ({MULTILINGUAL_VOCAB_SIZE:,})",
    )
    parser.add_argument(
        "--multilingual-epochs",
        type=int,
        default=MULTILINGUAL_EPOCHS,
        help=f"--multilingual: at most this many epochs ({MULTILINGUAL_EPOCHS})",
    )
    parser.add_argument(
        "--multilingual-minutes",
        type=float,
        default=MULTILINGUAL_MINUTES,
        help=f"--multilingual: training minutes at most ({MULTILINGUAL_MINUTES:g})",
    )


def _add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """The data and multilingual-teacher flags of `psp languages`."""
    parser.add_argument(
        "--sources",
        default="default",
        help="bitext sources of the data folder by name, NAME or NAME=FRACTION, comma-separated: 'default' (multi30k, "
        "multi30k-nllb, wmt-news), 'all', or names of " + ", ".join(BITEXT_SOURCES) + " (default: default)",
    )
    parser.add_argument(
        "--mono-sources",
        default="auto",
        help="monolingual text by name (unlabeled/<lang>/<name>), as --sources: 'default' (every source of the "
        "language that is not non-commercial, and en-wikipedia: English Wikipedia text), 'all', 'none', names; auto: "
        f"{MULTILINGUAL_DEFAULT_MONO} with a multilingual teacher (measured), none with an English-only one",
    )
    parser.add_argument(
        "--mono-limit", type=int, default=50_000, help="sentences per monolingual source, drawn evenly (50,000)"
    )
    parser.add_argument(
        "--mono-fragments",
        type=int,
        default=None,
        help="short spans (2-7 words; 4-14 characters in zh) cut from the language's bitext side and monolingual "
        f"text, added to the monolingual text for the teacher to label; 0 for none. Default: {FRAGMENTS:,} in "
        f"{', '.join(FRAGMENT_LANGUAGES)} (PUD dev rose with them; STS-B dev tied), none in the others and without "
        "monolingual text",
    )
    parser.add_argument(
        "--non-commercial",
        action="store_true",
        help="allow non-commercial sources (ar: saudinewsnet, CC BY-NC-SA 4.0); the model card then says so",
    )
    parser.add_argument(
        "--bitext-targets",
        default="auto",
        choices=BITEXT_TARGETS,
        help="psp train --bitext-targets: en, same, both; auto: en for an English-only teacher, "
        f"{MULTILINGUAL_DEFAULT_TARGETS} for a multilingual one",
    )
    parser.add_argument(
        "--mono-weight", type=float, default=MONO_WEIGHT, help=f"psp train --mono-weight ({MONO_WEIGHT:g})"
    )
    parser.add_argument("--mono-batch-size", type=int, default=128, help="psp train --mono-batch-size (128)")
    parser.add_argument(
        "--dev",
        default="pud",
        choices=("pud", "bitext"),
        help="dev set that chooses checkpoints: pud (mining accuracy on the PUD pairs, never trained on) or bitext "
        "(pairs held back from the training bitext) (default: pud)",
    )
