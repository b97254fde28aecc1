"""What more text buys: STS of a distilled student as the labelled distillation corpus grows (a prefix of the
shuffled corpus).

For each size N: label the corpus's first N sentences into one teacher cache (`psp prepare label --max-sentences N`:
a larger N labels only what is new), snapshot the cache (hard links, so nothing is copied), distil a student from
the snapshot with the `make distill` settings (384-d, 30k pieces, distillation only) for the same number of steps at
every size (`--steps`, 512 corpus sentences a step: equal compute, so a larger corpus shows each sentence fewer
times),
and evaluate it on STS12-16 (papers' protocol), STS-B test and SICK-R test. Finished steps are reused, so a killed
run continues.

    python bench/corpus_curve.py --corpus CORPUS --work DIR --sizes 100000,250000,500000,1000000 [--threads 2]

Prints a Markdown table (and writes DIR/curve.json).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

TRAIN_FLAGS = [
    "--dim", "384", "--vocab-size", "30000", "--lr", "0.01", "--init-std", "0.1", "--distill-weight", "1",
    "--distill-batch-size", "512", "--quiet",
]  # fmt: skip


def _psp(*arguments: str) -> None:
    command = [sys.executable, "-m", "psp_hf.cli", *arguments]
    print("$ " + " ".join(command), file=sys.stderr, flush=True)
    subprocess.run(command, check=True)


def snapshot(cache: Path, target: Path) -> Path:
    """A copy of the cache made of hard links (chunks are never rewritten in place, so the copy stays as it is)."""
    if target.exists():
        return target
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for path in cache.iterdir():
        if path.is_file():
            os.link(path, partial / path.name)
    partial.rename(target)
    return target


def label_seconds(cache: Path) -> float:
    meta = json.loads((cache / "meta.json").read_text(encoding="utf-8"))
    return float(meta.get("label_seconds", 0.0))


def main(argv: list[str] | None = None) -> int:
    from psp_hf.cli import flags

    parser = flags.Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="a corpus from `psp prepare distill-corpus`")
    parser.add_argument("--work", required=True, help="folder for the cache, its snapshots and the students")
    parser.add_argument("--sizes", default="100000,250000,500000,1000000")
    parser.add_argument("--threads", default="2")
    parser.add_argument("--steps", default="2000", help="training steps of every student (default: 1M sentences)")
    parser.add_argument("--cache", default=None, help="the growing teacher cache (default WORK/teacher-labels)")
    args = parser.parse_args(argv)
    work = Path(args.work)
    cache = Path(args.cache) if args.cache else work / "teacher-labels"
    rows = []
    for size in (int(n) for n in args.sizes.split(",")):
        _psp("prepare", "label", "--corpus", args.corpus, "-o", str(cache), "--threads", args.threads,
             "--max-sentences", str(size))  # fmt: skip
        labels = snapshot(cache, work / f"labels-{size}")
        student = work / f"student-{size}"
        if not (student / "model.safetensors").is_file():
            shutil.rmtree(student, ignore_errors=True)
            started = time.perf_counter()
            _psp("train", "--teacher-cache", str(labels), "-o", str(student), "--threads", args.threads,
                 "--epochs", "1000", "--max-steps", args.steps, *TRAIN_FLAGS)  # fmt: skip
            (student / "bench-train-seconds.txt").write_text(f"{time.perf_counter() - started:.1f}\n")
        from psp_hf.evaluation import evaluate_model, load_encoder

        tasks = ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"]
        report = evaluate_model(load_encoder(str(student)), tasks)
        rows.append(
            {
                "corpus_sentences": size,
                "label_seconds_total": label_seconds(labels),
                "train_seconds": float((student / "bench-train-seconds.txt").read_text()),
                "sts12_16": report["summary"]["sts12-16"]["pearson_mean"],
                "stsb_test": report["results"]["stsb"]["test"]["pearson"],
                "sickr_test": report["results"]["sickr"]["test"]["pearson"],
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    (work / "curve.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    print(f"\nStudents: 384-d, 30k pieces, {args.steps} steps of 512 corpus sentences, distillation only\n")
    print("| corpus sentences | labelling s (cumulative) | training s | STS12-16 | STS-B test | SICK-R test |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['corpus_sentences']:,} | {row['label_seconds_total']:.0f} | {row['train_seconds']:.0f} | "
            f"{row['sts12_16']:.2f} | {row['stsb_test']:.2f} | {row['sickr_test']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
