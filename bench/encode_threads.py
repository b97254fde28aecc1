"""Two encode threads against one, each timed as encodes in a row: `model.encode(sentences, num_threads=N,
batch_size=B)` on the STS sentences, in one process, several rounds.

    python bench/encode_threads.py --model demo_out/p-sp-en-distilled [--sentences 20000] [--in-a-row 15]

`bench/encode_processes.py` alternates one encode at one thread with one at two; here each thread count runs
`--in-a-row` encodes back to back (the median is kept), as a bulk job does. The table: sentences/s at one and two
threads (median over the rounds) and their ratio, by batch size.

A second table times two-thread encodes (default batch size) each after a pause of a different kind: none, a
25 ms sleep, a one-thread encode (what `bench/encode_processes.py` does), a 25 ms busy loop on the calling thread,
and a one-thread encode on another thread while the caller waits; each with encode's CPU groups
(`psp_hf.inference.cpu_groups`) and without them (`PSP_SPREAD_THREADS=0`), taking turns. Without them, the pauses
that leave the calling thread busy made Linux run both threads on one CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

PAUSE_SECONDS = 0.025
SWITCH = "PSP_SPREAD_THREADS"  # psp_hf.inference.cpu_groups.ENVIRONMENT_SWITCH


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
    print()
    print_pauses(model, sentences, args.in_a_row, rates.get((1024, 1)))
    print(f"\nload average after the runs: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")


def _busy() -> None:
    started = time.perf_counter()
    while time.perf_counter() - started < PAUSE_SECONDS:
        pass


def print_pauses(model, sentences: list[str], repeats: int, one_thread_rates: list[float] | None) -> None:
    """Two-thread encodes, each after a pause of one kind, with encode's CPU groups on and off (the kinds and the
    settings taking turns in this process: `cpu_groups` reads PSP_SPREAD_THREADS at every call); median
    sentences/s."""

    def on_another_thread() -> None:
        thread = threading.Thread(target=model.encode, args=(sentences,), kwargs={"num_threads": 1})
        thread.start()
        thread.join()

    pauses = {
        "nothing (encodes in a row)": lambda: None,
        f"a {PAUSE_SECONDS * 1000:.0f} ms sleep": lambda: time.sleep(PAUSE_SECONDS),
        "a one-thread encode on the calling thread": lambda: model.encode(sentences, num_threads=1),
        f"a {PAUSE_SECONDS * 1000:.0f} ms busy loop on the calling thread": _busy,
        "a one-thread encode on another thread, the caller waiting": on_another_thread,
    }
    settings = ("1", "0")
    seconds: dict[tuple[str, str], list[float]] = {(name, on): [] for name in pauses for on in settings}
    saved = os.environ.get(SWITCH)
    try:
        for _ in range(repeats):
            for name, pause in pauses.items():
                for on in settings:
                    os.environ[SWITCH] = on
                    pause()
                    started = time.perf_counter()
                    model.encode(sentences, num_threads=2)
                    seconds[(name, on)].append(time.perf_counter() - started)
    finally:
        if saved is None:
            os.environ.pop(SWITCH, None)
        else:
            os.environ[SWITCH] = saved
    one = statistics.median(one_thread_rates) if one_thread_rates else None
    print(f"Two-thread encodes after a pause ({repeats} of each, taking turns), with encode's CPU groups and without\n")
    print("| before each timed 2-thread encode | CPU groups: sentences/s | / 1 thread | without | / 1 thread |")
    print("|---|---|---|---|---|")
    for name in pauses:
        rates = [len(sentences) / statistics.median(seconds[(name, on)]) for on in settings]
        cells = [f"{rate:,.0f} | {f'{rate / one:.2f}x' if one else '-'}" for rate in rates]
        print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
