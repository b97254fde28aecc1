"""`psp languages`: the X-English models end to end (the pipeline: `psp_hf.experiments.languages`; here its flags)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from ..data.sources.fragments import FRAGMENT_LANGUAGES, FRAGMENTS
from ..data.sources.language_sources import BITEXT_SOURCES, DEV_SETS, EVERYDAY
from ..data_folder import data_dir
from ..errors import PSPInputError
from ..experiments.english_rows import E5_STUDENT, ENGLISH_SENTENCES, english_student
from ..experiments.language_results import DEV_TASKS, ENGLISH_TASKS, LANGUAGES, folder_rows, write_summary
from ..experiments.languages import (
    DEFAULT_MINUTES,
    MULTILINGUAL_EPOCHS,
    MULTILINGUAL_MINUTES,
    MULTILINGUAL_VOCAB_SIZE,
    RECIPE,
    REGISTRY_SOURCES,
    Settings,
    build_language,
    training_arguments,
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
        default=RECIPE["teacher"],
        help="teacher: folder, Hub id, e5-small, e5-small-query, use-multilingual, e5-small+use-multilingual, "
        f"default (all-MiniLM-L6-v2) (default {RECIPE['teacher']}: the measured recipe)",
    )
    parser.add_argument("--teacher-cache", default=None, help="teacher cache folder (default OUT/teacher-cache)")
    parser.add_argument(
        "--minutes",
        type=float,
        default=DEFAULT_MINUTES,
        help=f"training minutes per language at most (default {DEFAULT_MINUTES:g})",
    )
    parser.add_argument(
        "--epochs", type=int, default=RECIPE["epochs"], help=f"at most this many epochs (default {RECIPE['epochs']})"
    )
    parser.add_argument("--dim", type=int, default=RECIPE["dim"], help="width without --init-rows-from (default 1024)")
    parser.add_argument(
        "--vocab-size",
        type=int,
        default=RECIPE["vocab_size"],
        help=f"sentencepiece vocabulary of each language's data (default {RECIPE['vocab_size']:,})",
    )
    parser.add_argument("--limit", type=int, default=None, help="read at most this many pairs per language")
    parser.add_argument("--no-registry", dest="registry", action="store_false", help="no Debian registry pairs")
    parser.add_argument(
        "--registry-limit",
        type=int,
        default=RECIPE["registry_limit"],
        help="pairs per registry source, sampled evenly from a larger one (50,000)",
    )
    parser.add_argument(
        "--registry-sources",
        default=",".join(REGISTRY_SOURCES),
        help=f"which registry sources, comma-separated (default: all of {', '.join(REGISTRY_SOURCES)})",
    )
    parser.add_argument(
        "--tasks",
        default=",".join(("tatoeba", "sts17", *ENGLISH_TASKS, *DEV_TASKS)),
        help="evaluation tasks (the dev sets xnli-dev and pud-dev are scored beside the tests, never chosen on)",
    )
    flags.add_threads(parser, "torch threads")
    parser.add_argument(
        "--margin-only",
        action="store_true",
        help="the baseline: train with P-SP's cross-lingual margin loss alone (no teacher, nothing labelled)",
    )
    parser.add_argument(
        "--init-rows-from",
        default="auto",
        metavar="MODEL",
        help="an English psp model (e.g. `make distill`'s): the rows of the pieces its vocabulary shares with each "
        "language's start from it, and the width is its own (--dim is then ignored); "
        f"{E5_STUDENT}: build (once, in OUT/english) an English student of e5-small's whitened 'query: ' labels "
        f"of {ENGLISH_SENTENCES:,} corpus sentences and start from it: the rows measured best with --teacher "
        f"e5-small; none: random rows of --dim; auto (default): {E5_STUDENT} with an e5-small teacher, none "
        "otherwise and with --margin-only",
    )
    parser.add_argument(
        "--english-sentences",
        type=int,
        default=None,
        help=f"the labelling budget of the {E5_STUDENT} English student: corpus sentences labelled "
        f"(default {ENGLISH_SENTENCES:,}; fewer only for a quicker, weaker build)",
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
    init_rows_from = resolve_init_rows(args.init_rows_from, args.teacher, args.margin_only)
    build_english = init_rows_from == E5_STUDENT  # a name, as --teacher's are: never a folder of that name
    if init_rows_from and not build_english and not (Path(args.init_rows_from) / "config.json").is_file():
        raise PSPInputError(f"--init-rows-from {args.init_rows_from}: not a model folder (no config.json)")
    if args.mono_fragments is not None and args.mono_fragments < 0:
        raise PSPInputError(f"--mono-fragments {args.mono_fragments}: give a count of spans, 0 for none")
    for flag, minutes in (("--minutes", args.minutes), ("--multilingual-minutes", args.multilingual_minutes)):
        # Named here, before any work: psp train would refuse it only at the first language's training step.
        if not math.isfinite(minutes) or minutes < 0:
            raise PSPInputError(f"{flag} must be a number of minutes >= 0 (0: no limit), got {minutes}")
    try:
        extra = tuple(shlex.split(args.train_args))
    except ValueError as error:  # an unbalanced quote
        raise PSPInputError(f"--train-args {args.train_args!r}: cannot split it into flags ({error})") from None
    if args.english_sentences is not None and args.english_sentences < 1:
        raise PSPInputError(f"--english-sentences {args.english_sentences}: give a count of at least 1")
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
        init_rows_from=init_rows_from,
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
        english_sentences=args.english_sentences,
        changed=recipe_changes(args),
    )
    for code in languages:  # a wrong source name, a missing dev set or a bad training flag fails before any work
        check_data(code, settings)
        training_arguments(code, out / code, settings)
    if build_english:
        settings.init_rows_from = str(english_student(settings))
    rows = folder_rows(out, [build_language(code, settings) for code in languages])
    multilingual = build_multilingual(languages, settings) if args.multilingual else None
    write_result(write_summary(out, rows, multilingual))
    return 0


def resolve_init_rows(value: str | None, teacher: str, margin_only: bool) -> str | None:
    """What `--init-rows-from` stands for: auto is the e5 English student with an e5-small teacher (the recipe)."""
    if value in (None, "none"):
        return None
    if value == "auto":
        return E5_STUDENT if str(teacher).startswith("e5-small") and not margin_only else None
    return value


def recipe_changes(args: argparse.Namespace) -> tuple[str, ...]:
    """The recipe's flags that `args` changed, as `--flag value` (the card records them; budgets are not listed)."""
    changed = []
    for name, value in RECIPE.items():
        given = getattr(args, name, value)
        if name == "init_rows_from" and given == "auto":
            continue
        if given != value:
            changed.append(f"--{name.replace('_', '-')} {given}")
    for flag, on in (("--margin-only", args.margin_only), ("--non-commercial", args.non_commercial)):
        if on:
            changed.append(flag)
    if args.train_args:
        changed.append(f"--train-args '{args.train_args}'")
    return tuple(changed)


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
        f"multi30k-nllb, wmt-news and the everyday register), 'all' (every source that is not non-commercial), "
        f"'{EVERYDAY}' (the everyday register alone: xsid, ud-atis (at most 1,000 pairs), storybooks, diabla, "
        "xpersona), or names of "
        + ", ".join(BITEXT_SOURCES)
        + " (xnli-test and allset-grammar only with --non-commercial) (default: default)",
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
        help="allow the non-commercial sources, each named: saudinewsnet (ar news, --mono-sources), xnli-test and "
        "allset-grammar (--sources); the model card then says so and takes a non-commercial licence",
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
        default=RECIPE["dev"],
        choices=(*DEV_SETS, "bitext"),
        help="dev sets that choose checkpoints, by mining accuracy (both directions) on pairs never trained on: "
        "pud+xnli (the mean of PUD's and XNLI dev's: the rule every choice of the recipe follows), pud (news and "
        "Wikipedia), xnli (XNLI's dev split: the everyday register), or bitext (pairs held back from the training "
        f"bitext) (default: {RECIPE['dev']})",
    )
