"""Corpus scale: `psp embed-dataset` over 1M Wikipedia sentences and `psp mine` of 10k queries against them.

Embedding: 100k and 1M sentences with 1 thread, 1M with 2 threads and with 2 processes (`--num-proc 2`), each a
fresh `psp embed-dataset` run into an empty folder; wall time (model load and reading the gzip included) and
peak resident memory of the largest process. Mining: 10k STS sentences as queries against the 1M embeddings,
k = 4, with the exact (IndexFlatIP) and approximate (IndexIVFFlat) index: build and search time and recall@1 of
the approximate index (same top-1 neighbour as the exact one); then the whole margin mining (neighbours both ways)
with the approximate index.

    .venv/bin/python bench/corpus.py [--model bench/.cache/psp-de-en-300] [--skip-embed] [--skip-mine]
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

CACHE = Path(__file__).resolve().parent / ".cache"


def timed_child(command: list[str]) -> tuple[float, float]:
    """Run `command` in a wrapper process; wall seconds and peak RSS (GiB) of its largest descendant."""
    wrapper = (
        "import resource, subprocess, sys, time, json\n"
        "start = time.perf_counter(); subprocess.run(sys.argv[1:], check=True)\n"
        "print(json.dumps([time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))"
    )
    out = subprocess.run([sys.executable, "-c", wrapper, *command], check=True, stdout=subprocess.PIPE, text=True)
    seconds, max_rss_kib = json.loads(out.stdout.strip().splitlines()[-1])
    return seconds, max_rss_kib / 2**20


def embed_table(model: str, wiki: Path) -> list[dict]:
    subset = CACHE / "wiki-100k.txt"
    if not subset.is_file():
        with gzip.open(wiki, "rt", encoding="utf-8") as source, open(subset, "w", encoding="utf-8") as out:
            for number, line in enumerate(source):
                if number == 100_000:
                    break
                out.write(line)
    runs = [
        ("100k", subset, ["--threads", "1"], "1 thread"),
        ("1M", wiki, ["--threads", "1"], "1 thread"),
        ("1M", wiki, ["--threads", "2"], "2 threads"),
        ("1M", wiki, ["--num-proc", "2", "--threads", "1"], "2 processes x 1 thread"),
    ]
    rows = []
    for size, path, flags, label in runs:
        out = CACHE / f"wiki-emb-{size}-{label.replace(' ', '')}"
        shutil.rmtree(out, ignore_errors=True)
        command = [sys.executable, "-m", "psp_hf.cli", "embed-dataset", str(path), "-m", model, "-o", str(out), "-q"]
        seconds, rss = timed_child(command + flags)
        n = json.loads((out / "index.json").read_text())["rows"]
        rows.append({"sentences": n, "setup": label, "seconds": seconds, "rate": n / seconds, "peak_gib": rss})
        print(f"| {n:,} | {label} | {seconds:.1f} | {n / seconds:,.0f} | {rss:.2f} |", flush=True)
    return rows


def mine_table(model: str) -> None:
    import numpy as np

    from psp_hf import load
    from psp_hf.corpus.mine import build_index, mine_margin, search
    from psp_hf.corpus.shards import load_embeddings
    from psp_hf.data_folder import sts_sentences

    folder = CACHE / "wiki-emb-1M-1thread"
    _, base = load_embeddings(folder)
    queries = load(model).encode(list(dict.fromkeys(sts_sentences()))[:10_000])
    print(f"\nmine: {len(queries):,} queries x {len(base):,} embeddings ({base.shape[1]}-d), k = 4\n")
    print("| index | build s | search s (10k x 1M, k=4) | recall@1 vs exact |")
    print("|---|---|---|---|")
    top1 = {}
    for kind in ("exact", "approx"):
        start = time.perf_counter()
        index = build_index(base, kind)
        built = time.perf_counter() - start
        start = time.perf_counter()
        _, ids = search(index, queries, 4)
        searched = time.perf_counter() - start
        top1[kind] = ids[:, 0]
        recall = float(np.mean(top1[kind] == top1["exact"]))
        print(f"| {kind} | {built:.1f} | {searched:.1f} | {recall:.3f} |", flush=True)
    del index
    start = time.perf_counter()
    src, _, _, _ = mine_margin(queries, base, k=4, retrieval="forward", index_kind="approx")
    print(
        f"\nmine_margin(queries, 1M, k=4, forward, approximate index both ways): {len(src):,} pairs in "
        f"{time.perf_counter() - start:.1f} s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(CACHE / "psp-de-en-300"))
    parser.add_argument("--wiki", default=None, help="sentences.txt.gz (default: in the data folder)")
    parser.add_argument("--skip-embed", action="store_true")
    parser.add_argument("--skip-mine", action="store_true")
    args = parser.parse_args()
    from psp_hf.data_folder import existing_data_dir

    wiki = Path(args.wiki or existing_data_dir() / "unlabeled/en/wikipedia-2015/sentences.txt.gz")
    print(f"model: {args.model}; load before: {Path('/proc/loadavg').read_text().split()[:3]}")
    if not args.skip_embed:
        print("\n| sentences | setup | seconds | sentences/s | peak RSS GiB |\n|---|---|---|---|---|")
        embed_table(args.model, wiki)
    if not args.skip_mine:
        mine_table(args.model)
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"\nload after: {load}; bench process peak RSS {resource.getrusage(0).ru_maxrss / 2**20:.2f} GiB")


if __name__ == "__main__":
    main()
