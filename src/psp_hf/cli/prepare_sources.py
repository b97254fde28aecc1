"""`psp prepare distill-corpus|label|mine-pairs|registry-bitext`: text for distillation and bitext from the package
registry.

`distill-corpus` was called `pool` before (beside pooling, the word named two things): `psp prepare pool` still
parses, as a hidden old name of the same subcommand.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from pathlib import Path

from ..errors import PSPInputError
from ..logs import write_result
from . import flags
from .flags import fraction, positive_int

logger = logging.getLogger(__name__)


def _names(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {value!r}")
    return names


def add_source_commands(prepare: flags.Parser) -> None:
    """The sub-subcommands `distill-corpus`, `label`, `mine-pairs` and `registry-bitext` of `psp prepare`."""
    corpus = prepare.add_subcommand(
        "distill-corpus",
        help="build the unlabelled English corpus for distillation",
        description="Gather, clean and dedupe English text of the data folder and of installed registry "
        "packages (make registry-text), with every evaluation sentence removed; writes sentences.parquet, "
        "sentences.txt and report.json into --output and prints the report.",
    )
    flags.add_output(corpus, required=True, help="output folder (files replaced atomically)")
    flags.add_data_dir(corpus)
    corpus.add_argument("--no-registry", action="store_true", help="only the shared data folder")
    corpus.add_argument(
        "--hub-text",
        action="append",
        default=[],
        metavar="OWNER/NAME[:CONFIG[:COLUMN]]",
        help="also English text of a Hub dataset, streamed (split train; default config 'default', column "
        "'sentence'), e.g. sentence-transformers/wikipedia-en-sentences; repeat for several (docs/data.md)",
    )

    label = prepare.add_subcommand(
        "label",
        help="embed the distillation corpus with a teacher (resumable)",
        description="Embed every corpus sentence not yet in the cache (--output) with a sentence-transformers "
        "teacher; a killed run continues from its last complete chunk.",
    )
    label.add_argument(
        "--corpus",
        required=True,
        help="corpus folder, parquet or txt from `psp prepare distill-corpus`, or a `psp prepare bitext` folder (its "
        "English side)",
    )
    flags.add_output(label, required=True, help="cache folder (created; resumed when it exists)")
    label.add_argument(
        "--teacher",
        default=None,
        help="sentence-transformers path or Hub id, or e5-small, e5-small-query, use-multilingual, "
        "e5-small+use-multilingual (the multilingual teachers of the teachers extra; default: MiniLM)",
    )
    flags.add_threads(label, "CPU threads")
    label.add_argument(
        "--backend",
        choices=["onnx-int8", "onnx-mixed", "onnx", "torch"],
        default=None,
        help="how the teacher runs: ONNX Runtime with int8 weights (fastest on a CPU), with int8 attention and fp32 "
        "feed-forward (onnx-mixed: nearer the teacher), ONNX fp32, or the sentence-transformers model itself (torch; "
        "needed for --device cuda). Default: the backend an existing cache was started with, else torch with "
        "--device other than cpu, onnx-mixed for the e5 teachers and onnx-int8 for the others",
    )
    label.add_argument(
        "--max-sentences", type=positive_int, default=None, help="label only the corpus's first N sentences"
    )
    label.add_argument("--chunk-size", type=positive_int, default=8192, help="sentences per cache chunk")
    label.add_argument(
        "--batch-size",
        type=positive_int,
        default=None,
        help="at most this many sentences a teacher batch (default 64; the ONNX backends end a batch at 256 "
        "padded tokens; use-multilingual: 16)",
    )
    label.add_argument("--device", default="cpu", help="device the teacher runs on (default cpu)")
    label.add_argument("--progress", action="store_true", help="force the progress bar (e.g. into a log file)")

    mine = prepare.add_subcommand(
        "mine-pairs",
        help="mine paraphrase pairs from a teacher cache",
        description="Pair each corpus sentence with its nearest teacher neighbour (cosine >= --threshold), drop "
        "near-copies (trigram overlap >= --max-trigram-overlap), write a sentence1/sentence2/score TSV.",
    )
    mine.add_argument("--cache", required=True, help="teacher cache folder (`psp prepare label`)")
    flags.add_output(mine, required=True, help="pairs TSV to write (atomically)")
    mine.add_argument("--threshold", type=fraction, default=0.8, help="minimum teacher cosine (default 0.8)")
    mine.add_argument(
        "--max-trigram-overlap",
        type=fraction,
        default=0.5,
        help="drop pairs at or above this trigram overlap, shared / trigrams of the shorter side (default 0.5)",
    )
    mine.add_argument("--nprobe", type=positive_int, default=2, help="clusters searched per sentence in large corpora")


def _run_distill_corpus(args: argparse.Namespace) -> int:
    import json

    from ..data.checks import check_output_folder
    from ..data.distill_corpus import build_distill_corpus
    from ..data.sources.hub import hub_corpus_source
    from ..data.sources.registry_text import registry_sources

    hub = [hub_corpus_source(spec) for spec in args.hub_text]  # checked before any work
    check_output_folder(Path(args.output), overwrite=True, replaces=False)
    result = build_distill_corpus(
        args.output, args.data_dir, extra_sources=[*([] if args.no_registry else registry_sources()), *hub]
    )
    write_result(json.dumps(result.report, indent=2, ensure_ascii=False))
    return 0


def _run_label(args: argparse.Namespace) -> int:
    from ..data.checks import check_output_folder
    from ..data.distill_corpus import label_corpus
    from ..devices import check_device

    check_device(args.device)
    corpus = Path(args.corpus)
    corpus_file = corpus / "sentences.parquet" if corpus.is_dir() else corpus
    if bitext_english(corpus) is not None:
        return _label_bitext(args, corpus)
    if not corpus_file.is_file():
        # The name given is a mistyped path more often than a place to build a corpus: suggest no -o with it.
        what = f"a folder without {corpus_file.name}" if corpus.is_dir() else "no such file or folder"
        raise PSPInputError(
            f"--corpus {corpus}: no distillation corpus there ({what}); a corpus is a folder: make one with "
            "`psp prepare distill-corpus -o FOLDER`"
        )
    check_output_folder(Path(args.output), overwrite=True, flag="--output", replaces=False)
    count, total, seconds = label_corpus(
        corpus,
        args.output,
        teacher=args.teacher,
        threads=args.threads,
        chunk_size=args.chunk_size,
        batch_size=args.batch_size,
        device=args.device,
        progress=True if args.progress else None,
        backend=args.backend,
        max_sentences=args.max_sentences,
    )
    logger.info("labelled %d new sentence(s) of %d in %.1f s (%d thread(s))", count, total, seconds, args.threads)
    return 0


def _label_bitext(args: argparse.Namespace, folder: Path) -> int:
    """`psp prepare label --corpus BITEXT_FOLDER`: the English side of prepared bitext (multilingual distillation);
    with a multilingual teacher both sides when `--bitext-targets auto` asks for them (same or both)."""
    import time

    from ..data.checks import check_output_folder
    from ..teachers.labels import TeacherCache, cache_backend, labelling_teacher, teacher_name
    from ..training.data.multilingual import MULTILINGUAL_DEFAULT_TARGETS, teacher_is_multilingual

    check_output_folder(Path(args.output), overwrite=True, flag="--output", replaces=False)
    both = teacher_is_multilingual(args.teacher) and MULTILINGUAL_DEFAULT_TARGETS != "en"
    english = bitext_english(folder, other_side=both)
    if args.max_sentences is not None:
        english = english[: args.max_sentences]
    backend = cache_backend(args.output, args.teacher, args.backend, args.device)
    teacher = labelling_teacher(args.teacher, backend, args.threads, Path(args.output) / "onnx", args.device)
    started = time.perf_counter()
    count = TeacherCache(args.output).label(
        english,
        teacher,
        name=teacher_name(args.teacher),
        chunk_size=args.chunk_size,
        batch_size=args.batch_size,
        show_progress_bar=True if args.progress else None,
        backend=backend,
    )
    seconds = time.perf_counter() - started
    side = "" if both else " English"
    logger.info(
        "labelled %d new%s sentence(s) of %d in %.1f s (%d thread(s))", count, side, len(english), seconds, args.threads
    )
    return 0


def bitext_english(folder: Path, other_side: bool = False) -> list[str] | None:
    """The distinct English sentences of a bitext folder written by `psp prepare bitext` (None for anything else);
    `other_side`: the other language's sentences too."""
    import json

    report_file = folder / "report" / "report.json"
    if not (folder.is_dir() and report_file.is_file()):
        return None
    report = json.loads(report_file.read_text(encoding="utf-8"))
    if report.get("kind") != "bitext":
        return None
    import pyarrow.parquet as pq

    columns = list(report.get("languages", ["en"])) if other_side else ["en"]
    sentences: dict[str, None] = {}
    for shard in sorted((folder / "data").glob("*.parquet")):
        table = pq.read_table(shard, columns=columns)
        for column in columns:
            sentences.update(dict.fromkeys(table.column(column).to_pylist()))
    return list(sentences)


def _run_mine_pairs(args: argparse.Namespace) -> int:
    from ..data.checks import check_output_file
    from ..data.mined_pairs import mine_cache
    from ..teachers.labels import CHUNK_GLOB

    cache = Path(args.cache)
    if not cache.is_dir() or not any(cache.glob(CHUNK_GLOB)):
        raise PSPInputError(f"--cache {cache}: no teacher labels there (make them with `psp prepare label`)")
    check_output_file(args.output)
    mined, total = mine_cache(
        cache, args.output, threshold=args.threshold, max_trigram_overlap=args.max_trigram_overlap, nprobe=args.nprobe
    )
    logger.info(
        f"{len(mined.pairs)} pairs from {total} sentences (below threshold {mined.below_threshold}, "
        f"near-copies {mined.near_copies}, symmetric duplicates {mined.duplicates}) -> {args.output}"
    )
    return 0


def _run_registry_bitext(args: argparse.Namespace) -> int:
    from ..data.checks import check_output_folder
    from ..data.sources.registry_bitext import SOURCE_KINDS, prepare_registry_bitext

    check_output_folder(Path(args.output), args.overwrite)
    report = prepare_registry_bitext(
        args.lang,
        args.output,
        root=args.root,
        kinds=tuple(args.sources) if args.sources else SOURCE_KINDS,
        per_source_limit=args.per_source_limit,
        langid=args.langid,
        overwrite=args.overwrite,
        vocab_size=args.vocab_size,
        command=shlex.join(["psp", *sys.argv[1:]]),
    )
    print_summary(report)
    return 0


SOURCE_COMMANDS = {
    "distill-corpus": _run_distill_corpus,
    "label": _run_label,
    "mine-pairs": _run_mine_pairs,
    "registry-bitext": _run_registry_bitext,
}


def print_summary(report: dict) -> None:
    """What `psp prepare` did, as status lines: pairs in and out, and what each step removed."""
    lines = [f"pairs in: {report['pairs_in']:,}"]
    if report["bad_lines"]["count"]:
        lines.append(f"bad lines skipped: {report['bad_lines']['count']:,}")
    for step in report["steps"]:
        if step["name"] == "lowercase":
            continue
        removed = f"{step['removed']:,}" if step["enabled"] else "off"
        lines.append(f"  removed by {step['name']}: {removed}")
    lines.append(f"pairs out: {report['pairs_out']:,} ({report['pairs_per_second']:,.0f} pairs/s)")
    if (report.get("tokenizer") or {}).get("warning"):
        lines.append(report["tokenizer"]["warning"])
    where = report.get("path") or report.get("url")
    if report.get("path"):
        lines.append(f"wrote {report['path']} (report in {report['path']}/report/)")
    if report.get("url"):
        lines.append(f"pushed to {report['url']}")
    if not where:
        lines.append("nothing written")
    logger.info("\n".join(lines))
