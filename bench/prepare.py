"""Throughput of `psp prepare paraphrases` without the paraphrase-score model.

Runs the ParaNMT recipe (lowercase, empty side, length 5–40, trigram overlap <= 0.5, duplicates, language
ID) on the Flickr30k caption train pairs (283,649 pairs) and prints pairs/s for: reading only, every filter
without language ID, every filter with it (all 97 langid languages, and en+cs candidates). Times are
read + filter + write parquet (end to end), excluding the one-time unpacking of langid's model (printed
apart) and tokenizer training (--tokenizer to time it too). Wall-clock and CPU-time rates are both given:
on a shared machine the CPU rate is the steadier one.

    .venv/bin/python bench/prepare.py [--limit N] [--repeats 2] [--tokenizer]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path


def data_file() -> Path:
    from psp_hf.data_folder import data_dir

    path = data_dir() / "paraphrase" / "en" / "flickr30k-captions" / "train.pairs.tsv.gz"
    if not path.is_file():
        sys.exit(f"bench/prepare.py: {path} not found (set PSP_DATA)")
    return path


def read_only(path: Path, limit: int | None) -> tuple[int, float, float]:
    """Parse the input the way prepare does (UTF-8 and column checks), nothing else."""
    from psp_hf.data.readers import PairReader, paraphrase_layout

    wall, cpu = time.perf_counter(), time.process_time()
    n = 0
    for _ in PairReader(path, paraphrase_layout()):
        n += 1
        if limit is not None and n >= limit:
            break
    return n, time.perf_counter() - wall, time.process_time() - cpu


def run_prepare(path: Path, limit: int | None, tokenizer: bool, **filters) -> tuple[dict, float, float]:
    from psp_hf.data.prepare import prepare_paraphrases

    with tempfile.TemporaryDirectory() as tmp:
        report = prepare_paraphrases(
            [path], Path(tmp) / "out", score_filter=False, train_tokenizer=tokenizer, vocab_size=50000, limit=limit,
            **filters,
        )  # fmt: skip
    seconds = report["seconds"]
    return report, seconds["filter_and_write"], seconds["filter_and_write_cpu"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="pairs to read (default: all 283,649)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per configuration; the fastest counts")
    parser.add_argument("--tokenizer", action="store_true", help="also time sentencepiece training (50k pieces)")
    args = parser.parse_args()
    path = data_file()

    started = time.perf_counter()
    from psp_hf.data.language_id import shared_identifier

    shared_identifier(None)
    shared_identifier(("cs", "en"))
    langid_load = time.perf_counter() - started

    rows = []
    best = min((read_only(path, args.limit) for _ in range(args.repeats)), key=lambda r: r[1])
    rows.append(("read + parse only", best[0], best[0], best[1], best[2], {}))
    configurations = [
        ("all filters, no langid", {"langid": False}),
        ("all filters + langid (97 languages)", {"langid": True}),
        ("all filters + langid (candidates en,cs)", {"langid": True, "langid_candidates": ["en", "cs"]}),
    ]
    for name, filters in configurations:
        runs = [run_prepare(path, args.limit, False, **filters) for _ in range(args.repeats)]
        report, wall, cpu = min(runs, key=lambda r: r[1])
        steps = {step["name"]: step["seconds"] for step in report["steps"]}
        rows.append((name, report["pairs_in"], report["pairs_out"], wall, cpu, steps))

    print(f"Flickr30k caption train pairs: {path}")
    print(f"one-time langid model unpacking: {langid_load:.1f} s (not in the times below)\n")
    header = f"| {'configuration':<42} | {'pairs in':>9} | {'pairs out':>9} | {'wall s':>6} | {'pairs/s (wall)':>14} |"
    header += f" {'pairs/s (CPU)':>13} |"
    print(header)
    print("|" + "|".join("-" * (len(cell) + 0) for cell in header.split("|")[1:-1]) + "|")
    for name, pairs_in, pairs_out, wall, cpu, _ in rows:
        print(
            f"| {name:<42} | {pairs_in:>9,} | {pairs_out:>9,} | {wall:>6.2f} | {pairs_in / wall:>14,.0f} |"
            f" {pairs_in / cpu:>13,.0f} |"
        )
    print("\nseconds per step (fastest run of each configuration):")
    names = ["lowercase", "empty", "length", "overlap", "duplicate", "language"]
    print("| configuration | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for name, _, _, _, _, steps in rows[1:]:
        print(f"| {name} | " + " | ".join(f"{steps.get(n, 0.0):.2f}" for n in names) + " |")

    if args.tokenizer:
        report, _, _ = run_prepare(path, args.limit, True, langid=True)
        print(
            f"\nsentencepiece training on the output ({report['pairs_out']:,} pairs, both sides, "
            f"{report['tokenizer']['pieces']:,} pieces): {report['seconds']['tokenizer']:.1f} s"
        )


if __name__ == "__main__":
    main()
