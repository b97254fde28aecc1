"""Two encode threads against one, each timed as encodes in a row: `model.encode(sentences, num_threads=N,
batch_size=B)` on the STS sentences, in one process, several rounds.

    python bench/encode_threads.py --model demo_out/p-sp-en-distilled [--sentences 20000] [--in-a-row 15]

`bench/encode_processes.py` alternates one encode at one thread with one at two, so the second core starts each
two-thread encode from idle; here each thread count runs `--in-a-row` encodes back to back (the median is kept), as
a bulk job does. The table: sentences/s at one and two threads (median over the rounds) and their ratio, by batch
size.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--sentences", type=int, default=20_000)
    parser.add_argument("--in-a-row", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-sizes", default="256,512,1024,2048")
    args = parser.parse_args()

    import psp_hf
    from psp_hf.data_folder import sts_sentences

    sentences = sts_sentences()[: args.sentences]
    model = psp_hf.load(args.model)
    for threads in (1, 2):
        model.encode(sentences, num_threads=threads)  # warm-up: word cache, first allocations
    sizes = [int(size) for size in args.batch_sizes.split(",")]
    rates: dict[tuple[int, int], list[float]] = {}
    for _ in range(args.rounds):
        for size in sizes:
            for threads in (1, 2):
                seconds = []
                for _ in range(args.in_a_row):
                    started = time.perf_counter()
                    model.encode(sentences, num_threads=threads, batch_size=size)
                    seconds.append(time.perf_counter() - started)
                rates.setdefault((size, threads), []).append(len(sentences) / statistics.median(seconds))
    print(f"{len(sentences):,} STS sentences, {args.in_a_row} encodes in a row, {args.rounds} rounds\n")
    print("| batch size | 1 thread, sentences/s | 2 threads | 2 threads / 1 |\n|---|---|---|---|")
    for size in sizes:
        one, two = (statistics.median(rates[(size, threads)]) for threads in (1, 2))
        print(f"| {size:,} | {one:,.0f} | {two:,.0f} | {two / one:.2f}x |")
    print(f"\nload average after the runs: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")


if __name__ == "__main__":
    main()
