"""Training throughput (pairs/s), peak memory and STS quality of `psp train`, against the original P-SP code.

Each configuration runs `train.py` in a fresh process with the thread count fixed, on the Flickr30k caption
pairs of $PSP_DATA, with the original's settings: batch 128, mega-batch 100 annealed every 150 mini-batches,
margin 0.4, Adam lr 1e-3. pairs/s is pairs trained / training seconds (data streaming, tokenising, mining and
updates; not start-up or the vocabulary). The original's figures were measured on this machine (one epoch,
2 threads) and are printed beside for the ratio.

    .venv/bin/python bench/train.py                        # 2,000 steps at dim 300 and 1024, sparse and dense
    .venv/bin/python bench/train.py --epochs 1 --sts       # full epoch, with the STS 2012-2016 average
    .venv/bin/python bench/train.py --rss                  # peak RSS, 100k vs 1M streamed pairs, M fixed
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(__file__).resolve().parent / ".cache"
sys.path.insert(0, str(ROOT / "src"))

# The authors' code on the same pairs, one epoch, 2 threads, this machine (see docs/MISSION.md).
ORIGINAL = {300: {"pairs_per_s": 915.0, "sts": 46.0, "rss_gb": 0.7}, 1024: {"pairs_per_s": 240.0, "sts": 49.4}}


def flickr_pairs() -> Path:
    from psp_hf.data_folder import data_dir

    path = data_dir() / "paraphrase" / "en" / "flickr30k-captions" / "train.pairs.tsv.gz"
    if not path.is_file():
        sys.exit(f"bench/train.py: {path} not found; set PSP_DATA to the shared data folder")
    return path


def tokenizer_folder(data: Path, vocab: int) -> Path:
    """A sentencepiece vocabulary trained on the pairs, as `psp train --vocab-size` would (cached)."""
    folder = CACHE / f"flickr-tokenizer-v{vocab}"
    if not (folder / "tokenizer.json").is_file():
        from psp_hf.tokenization.pieces import train_tokenizer
        from psp_hf.training.data.pairs import PairSource

        train_tokenizer(PairSource([str(data)]).texts(2_000_000), vocab_size=vocab, output_dir=folder)
    return folder


def run_training(name: str, data: list[Path], tokenizer: Path, threads: int, extra: list[str]) -> dict:
    """train.py in a fresh process; returns its end-of-run metrics plus the wall time."""
    out = CACHE / "train-runs" / name
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), RAYON_NUM_THREADS=str(threads))
    command = [
        sys.executable,
        str(ROOT / "train.py"),
        "--data",
        *map(str, data),
        "-o",
        str(out),
        "--tokenizer",
        str(tokenizer),
        "--threads",
        str(threads),
        "--dev",
        "none",
        "--save-every",
        "0",
        "--eval-every",
        "0",
        "--keep",
        "last",
        "--quiet",
        *extra,
    ]
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, cwd=ROOT)
    wall = time.perf_counter() - start
    lines = (out / "training" / "metrics.jsonl").read_text().splitlines()
    end = json.loads(lines[-1])
    return {**end, "wall_s": wall, "folder": str(out)}


def sts_average(folder: str, random_table: bool = False) -> float:
    """STS 2012-2016 average Pearson x100 of a model folder (or of a random table over its vocabulary)."""
    from psp_hf import PSPEncoder
    from psp_hf.evaluation import evaluate_model

    encoder = PSPEncoder.from_pretrained(folder)
    if random_table:
        import torch

        torch.manual_seed(0)
        encoder.model.embeddings.weight.data.normal_()
    report = evaluate_model(encoder, tasks=["sts12", "sts13", "sts14", "sts15", "sts16"])
    return report["summary"]["sts12-16"]["pearson_mean"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="300,1024")
    parser.add_argument("--modes", default="sparse,dense", help="sparse (lazy Adam) and/or dense (Adam)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=2000, help="mini-batches per run (ignored with --epochs)")
    parser.add_argument("--epochs", type=int, default=0, help="train this many full epochs instead of --steps")
    parser.add_argument("--vocab", type=int, default=50000)
    parser.add_argument("--sts", action="store_true", help="also evaluate STS 2012-2016 (and the untrained floor)")
    parser.add_argument("--rss", action="store_true", help="peak RSS for 100k vs 1M streamed pairs instead")
    parser.add_argument("--rss-dim", type=int, default=300)
    parser.add_argument("--rss-megabatch", type=int, default=20, help="fixed M of the --rss runs")
    args = parser.parse_args()

    data = flickr_pairs()
    tokenizer = tokenizer_folder(data, args.vocab)
    print(f"data: {data}; tokenizer: {tokenizer}; {args.threads} threads; load average {os.getloadavg()[0]:.1f}")
    schedule = ["--batch-size", "128", "--megabatch-size", "100", "--megabatch-anneal", "150"]

    if args.rss:
        print(f"\nmega-batch fixed at M={args.rss_megabatch}")
        print("| pairs streamed | dim | steps | pairs/s | peak RSS (MB) |\n|---|---|---|---|---|")
        for pairs in (100_000, 1_000_000):
            steps = -(-pairs // 128)
            copies = -(-pairs // 283_649)  # the file listed as often as needed: same text, more data
            # M fixed (no annealing) so that only the amount of data differs between the two runs: with the
            # annealed schedule M would reach ~55 mini-batches in the 1M run and ~6 in the 100k run.
            fixed = ["--batch-size", "128", "--megabatch-size", str(args.rss_megabatch), "--megabatch-anneal", "0"]
            result = run_training(
                f"rss-{pairs}",
                [data] * copies,
                tokenizer,
                args.threads,
                [*fixed, "--dim", str(args.rss_dim), "--max-steps", str(steps), "--epochs", "1"],
            )
            print(
                f"| {result['pairs_seen']:,} | {args.rss_dim} | {result['step']} | {result['pairs_per_s']:,.0f} | "
                f"{result['peak_rss_mb']:,.0f} |",
                flush=True,
            )
        return

    length = ["--epochs", str(args.epochs)] if args.epochs else ["--max-steps", str(args.steps), "--epochs", "100"]
    rows = []
    for dim in (int(d) for d in args.dims.split(",")):
        for mode in args.modes.split(","):
            sparse = {"sparse": "on", "dense": "off"}[mode]
            result = run_training(
                f"d{dim}-{mode}",
                [data],
                tokenizer,
                args.threads,
                [*schedule, "--dim", str(dim), "--sparse", sparse, *length],
            )
            if args.sts:
                result["sts"] = sts_average(result["folder"])
                result["sts_untrained"] = sts_average(result["folder"], random_table=True)
            rows.append((dim, mode, result))
            print(f"  d{dim} {mode}: {result['pairs_per_s']:,.0f} pairs/s", file=sys.stderr, flush=True)

    print(
        "\n| dim | optimizer | pairs | wall (s) | train (s) | pairs/s | vs original | peak RSS (MB) | STS12-16 "
        "(untrained) |\n|---|---|---|---|---|---|---|---|---|"
    )
    for dim, mode, r in rows:
        original = ORIGINAL.get(dim)
        ratio = f"{r['pairs_per_s'] / original['pairs_per_s']:.1f}x" if original else ""
        sts = f"{r['sts']:.1f} ({r['sts_untrained']:.1f})" if "sts" in r else ""
        label = "lazy Adam (sparse)" if mode == "sparse" else "Adam (dense)"
        print(
            f"| {dim} | {label} | {r['pairs_seen']:,} | {r['wall_s']:.0f} | {r['train_seconds']:.0f} | "
            f"{r['pairs_per_s']:,.0f} | {ratio} | {r['peak_rss_mb']:,.0f} | {sts} |"
        )
    for dim, original in ORIGINAL.items():
        rss = f"{original['rss_gb'] * 1000:,.0f}" if "rss_gb" in original else ""
        print(
            f"| {dim} | original P-SP code (dense Adam), 1 epoch | 283,649 | | | {original['pairs_per_s']:,.0f} "
            f"| 1.0x | {rss} | {original['sts']} |"
        )


if __name__ == "__main__":
    main()
