"""Which teacher makes the best English student: one distillation corpus, several teachers and their
ensembles, one recipe.

Each teacher labels the corpus once (`label_corpus`, on `--device`); ensembles are made from those caches
(`psp_hf.teachers.combine`: `concat` and `mean` of the L2-normalised rows); every label set then trains a student
with `make distill`'s combined recipe on the same tokenizer (caption pairs at margin weight 0.1, Wikipedia at half
weight, kept at its best STS-B dev step), several students at a time. The table: each teacher's own scores, each
student's STS-B dev (kept), STS12–16 (mean Pearson of the years), STS-B test and SICK-R test, and the labelling
and training seconds.

    python bench/english_teachers.py --corpus CORPUS --tokenizer TOK --pairs PAIRS --out OUT \\
        --teacher minilm=minilm --teacher e5=E5_FOLDER --combine concat=minilm,e5 --combine mean=minilm,e5 \\
        [--device cuda] [--jobs 4 --threads 4] [--max-sentences N] [--recipe demo] [--labels NAME=CACHE]

`--teacher NAME=PATH`: a sentence-transformers folder, `minilm` (the packaged all-MiniLM-L6-v2) or a named
teacher (`e5-small`). Rerunning resumes: caches label only what they lack, finished students are kept.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TASKS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")
# `make distill`'s combined run (Makefile: DISTILL_FLAGS and the m-combined target).
# `make demo`'s distilled student (psp_hf.experiments.demo.DEMO_DISTILL_SETTINGS, less its vocab_size and
# threads): distillation only, 10 passes over the corpus.
DEMO_RECIPE = [
    *("--dim", "384", "--lr", "0.01", "--init-std", "0.1", "--distill-weight", "1"),
    *("--distill-batch-size", "512", "--epochs", "10", "--quiet"),
]
RECIPE = [
    *("--dim", "384", "--lr", "0.01", "--init-std", "0.1", "--distill-weight", "1", "--margin-weight", "0.1"),
    *("--teacher-negative-threshold", "0.8", "--distill-batch-size", "1024", "--epochs", "1"),
    *("--corpus-weights", "wikipedia-2015=0.5", "--quiet"),
]


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise SystemExit(f"{flag} {value!r}: expected NAME=VALUE")
        out[name] = rest
    return out


def _teacher_path(path: str) -> str | None:
    return None if path == "minilm" else path  # None: label_corpus's default, the packaged all-MiniLM-L6-v2


def label(name: str, path: str, args, out: Path) -> dict:
    """Label the corpus with one teacher (`psp prepare label` in its own process, so teachers label side by side)."""
    cache = out / f"labels-{name}"
    backend = "torch" if args.device != "cpu" else args.backend
    command = [sys.executable, "-m", "psp_hf.cli", "prepare", "label", "--corpus", args.corpus, "-o", str(cache)]
    command += ["--backend", backend, "--device", args.device, "--threads", str(args.threads), "--chunk-size", "65536"]
    if path != "minilm":  # else the default teacher, the packaged all-MiniLM-L6-v2
        command += ["--teacher", path]
    if args.label_batch_size:
        command += ["--batch-size", str(args.label_batch_size)]
    if args.max_sentences:
        command += ["--max-sentences", str(args.max_sentences)]
    log = out / f"label-{name}.log"
    out.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as handle:
        done = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"[{name}] labelling failed ({done.returncode}); see {log}")
    meta = json.loads((cache / "meta.json").read_text(encoding="utf-8"))
    seconds = float(meta.get("label_seconds", 0.0))  # summed over resumed runs
    total = args.max_sentences or 0
    rate = total / seconds if seconds and total else None
    print(f"[{name}] labels ready: {seconds:.1f} s of labelling ({backend}, {args.device})", flush=True)
    return {"cache": str(cache), "label_seconds": round(seconds, 1), "sentences_per_s": rate}


def train(name: str, cache: Path, args, out: Path) -> Path:
    folder = out / f"student-{name}"
    if (folder / "model.safetensors").is_file():
        return folder
    command = [sys.executable, "-m", "psp_hf.cli", "train", "-o", str(folder)]
    command += ["--tokenizer", args.tokenizer, "--teacher-cache", str(cache), "--threads", str(args.threads)]
    command += ["--seed", str(args.seed), "--data-dir", args.data_dir]
    command += [*DEMO_RECIPE] if args.recipe == "demo" else ["--data", args.pairs, *RECIPE]
    command += shlex.split(args.train_extra)  # as a shell would split it: a quoted value keeps its spaces
    started = time.perf_counter()
    log = out / f"train-{name}.log"
    with open(log, "w", encoding="utf-8") as handle:
        done = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"[{name}] training failed ({done.returncode}); see {log}")
    print(f"[{name}] trained in {time.perf_counter() - started:.0f} s", flush=True)
    return folder


def kept_dev(folder: Path) -> tuple[float | None, float | None]:
    """(best STS-B dev, training seconds) from `psp train`'s metrics."""
    from psp_hf.training.reporting.metrics_log import end_record

    end = end_record(folder)
    return end.get("best_score"), end.get("train_seconds")


def scores(model: str | Path, data_dir: str, device: str = "cpu") -> dict:
    from psp_hf.evaluation import evaluate_model, load_encoder

    report = evaluate_model(load_encoder(model, device=device), TASKS, data_dir=data_dir)
    results = report["results"]
    return {
        "sts12-16": report["summary"]["sts12-16"]["pearson_mean"],
        "stsb_test": results["stsb"]["test"]["pearson"],
        "sickr_test": results["sickr"]["test"]["pearson"],
    }


def markdown(table: dict) -> str:
    lines = [
        "| teacher (labels) | teacher STS12-16 | student STS-B dev (kept) | STS12-16 | STS-B test | SICK-R test "
        "| labelling s | training s |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def cell(value, digits=2):
        return "—" if value is None else f"{value:.{digits}f}"

    for row in table["rows"]:
        teacher = row.get("teacher_scores") or {}
        lines.append(
            f"| {row['name']} | {cell(teacher.get('sts12-16'))} | {cell(row.get('dev'))} | {cell(row.get('sts12-16'))} "
            f"| {cell(row.get('stsb_test'))} | {cell(row.get('sickr_test'))} | {cell(row.get('label_seconds'), 0)} "
            f"| {cell(row.get('train_seconds'), 0)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from psp_hf.cli import flags

    parser = flags.Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="corpus folder (psp prepare distill-corpus)")
    parser.add_argument("--tokenizer", required=True, help="one tokenizer for every student")
    parser.add_argument("--pairs", default=None, help="the caption pairs of the combined recipe")
    parser.add_argument(
        "--recipe",
        choices=("distill", "demo"),
        default="distill",
        help="distill: make distill's combined run (needs --pairs); demo: make demo's distillation-only run",
    )
    parser.add_argument(
        "--labels", action="append", default=[], metavar="NAME=CACHE", help="a teacher already labelled: its cache"
    )
    parser.add_argument("--out", required=True)
    parser.add_argument("--teacher", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument(
        "--combine",
        action="append",
        default=[],
        metavar="HOW=NAME[,NAME]",
        help="concat, mean (L2-normalised rows), center or whiten (one teacher); "
        "concat-center, mean-whiten, ...: the parts centred or whitened first",
    )
    parser.add_argument("--shrink", type=float, default=0.1, help="whitening's shrinkage (x the mean variance)")
    parser.add_argument("--data-dir", default=os.environ.get("PSP_DATA", "../shared/data"))
    parser.add_argument("--device", default="cpu", help="where teachers label (cuda: torch on the GPU)")
    parser.add_argument("--backend", default="onnx-int8", help="labelling backend on the CPU")
    parser.add_argument("--label-batch-size", type=int, default=None)
    parser.add_argument("--max-sentences", type=int, default=None, help="label and distil the corpus's first N only")
    parser.add_argument("--label-jobs", type=int, default=1, help="teachers labelling at a time")
    parser.add_argument("--jobs", type=int, default=1, help="students trained at a time")
    parser.add_argument(
        "--train-extra", default="", help='more psp train flags for every student (e.g. "--resume --max-minutes 30")'
    )
    parser.add_argument(
        "--students", default=None, help="comma-separated rows to train (default: every teacher and combination)"
    )
    parser.add_argument("--threads", type=int, default=1, help="threads per student (and CPU labelling)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", default=None, help="where the table and each row's JSON go (default --out)")
    parser.add_argument("--no-teacher-scores", dest="teacher_scores", action="store_false")
    args = parser.parse_args(argv)
    if args.recipe == "distill" and not args.pairs:
        parser.error("--recipe distill needs --pairs")
    if not args.teacher and not args.labels:
        parser.error("give at least one --teacher or --labels")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    teachers = _pairs(args.teacher, "--teacher")
    with ThreadPoolExecutor(max_workers=args.label_jobs) as pool:
        labelled = list(pool.map(lambda item: label(*item, args, out), teachers.items()))
    rows = {
        name: {"name": name, "teacher": path, **info}
        for (name, path), info in zip(teachers.items(), labelled, strict=True)
    }
    for name, cache in _pairs(args.labels, "--labels").items():
        meta = json.loads((Path(cache) / "meta.json").read_text(encoding="utf-8"))
        rows[name] = {"name": name, "teacher": meta.get("teacher"), "cache": cache}
        rows[name]["label_seconds"] = meta.get("label_seconds", 0.0)
    from psp_hf.teachers.combine import combine_caches

    for value in args.combine:
        how, _, names = value.partition("=")
        parts = names.split(",")
        name = f"{how}({'+'.join(parts)})"
        cache = out / f"labels-{how}-{'-'.join(parts)}"
        base, _, transform = how.partition("-")
        if base in ("center", "whiten"):
            base, transform = "concat", base
        if not (cache / "meta.json").is_file():
            caches = [rows[part]["cache"] for part in parts]
            transform = transform or "none"
            count, dim = combine_caches(caches, cache, how=base, name=name, transform=transform, shrink=args.shrink)
            print(f"[{name}] {count:,} rows, {dim}-d", flush=True)
        seconds = sum(rows[part]["label_seconds"] for part in parts)
        rows[name] = {"name": name, "teacher": name, "cache": str(cache), "label_seconds": seconds, "parts": parts}
    report = Path(args.report or out)
    report.mkdir(parents=True, exist_ok=True)

    def student(name: str) -> None:
        folder = train(name, Path(rows[name]["cache"]), args, out)
        dev, seconds = kept_dev(folder)
        rows[name].update(model=str(folder), dev=dev, train_seconds=seconds, **scores(folder, args.data_dir))
        print(f"[{name}] student: {json.dumps({k: rows[name][k] for k in ('dev', 'sts12-16', 'stsb_test')})}")
        # Written as each student finishes, so a run stopped early still reports the finished ones.
        # Letters, digits, '.', '_' and '-' only in the file name: the device tool returns no other names.
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")
        (report / f"row-{safe}.json").write_text(json.dumps(rows[name], indent=2) + "\n", encoding="utf-8")

    chosen = list(rows) if args.students is None else args.students.split(",")
    unknown = [name for name in chosen if name not in rows]
    if unknown:
        raise SystemExit(f"--students: no row named {', '.join(unknown)} (rows: {', '.join(rows)})")
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(student, chosen))
    if args.teacher_scores:
        for name, path in teachers.items():
            rows[name]["teacher_scores"] = scores(path, args.data_dir, device=args.device)
            print(f"[{name}] teacher: {json.dumps(rows[name]['teacher_scores'])}", flush=True)
    table = {"rows": list(rows.values()), "corpus": str(args.corpus), "max_sentences": args.max_sentences}
    (report / "table.json").write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")
    text = markdown(table)
    (report / "table.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
