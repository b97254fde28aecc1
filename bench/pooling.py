"""Pooling alone: psp's compiled kernel, torch's `embedding_bag` and numpy's `pool_bags`, and the row gather that
numpy cannot avoid.

Why psp has a kernel of its own: numpy has no fused gather-and-add, so it copies every piece's row out of the table
(in cache-sized blocks) before adding, while `embedding_bag` and the kernel add each row where they read it; without
the kernel, a process that has not loaded torch pools with numpy. The batches are a model's real ones (the unknown
rule applied), pooled on one thread.

    PSP_DATA=../shared/data python bench/pooling.py --model demo_out/p-sp-en-distilled
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a psp model folder (mean pooling)")
    parser.add_argument("--sentences", type=int, default=20_000, help="first N STS sentences (20,000)")
    parser.add_argument("--batch-size", type=int, default=1024, help="encode's default (1,024)")
    parser.add_argument("--repeats", type=int, default=9, help="timed passes; the median is shown (9)")
    args = parser.parse_args()

    import torch

    import psp_hf
    from psp_hf.data_folder import sts_sentences
    from psp_hf.inference import pooling

    torch.set_num_threads(1)
    model = psp_hf.load(args.model)
    table, weights = model.weights()
    if weights is not None or model.settings.pooling != "mean":
        raise SystemExit(f"{args.model}: this bench times plain mean pooling (no piece weights)")
    sentences = sts_sentences()[: args.sentences]
    batches = []
    for start in range(0, len(sentences), args.batch_size):
        flat_ids, offsets = model.tokenize_numpy(sentences[start : start + args.batch_size])
        batches.append(model._bags_to_pool(flat_ids, offsets))
    pieces = sum(len(flat_ids) for flat_ids, _ in batches)
    rows = pooling._row_gatherer(table, 1 << 16)
    block = max(1, pooling._BLOCK_BYTES // (4 * table.shape[1]))
    torch_table = torch.from_numpy(table)

    def numpy_pool(flat_ids, offsets):
        pooling.pool_bags(table, flat_ids, offsets)

    def gather_only(flat_ids, offsets):
        for start in range(0, len(flat_ids), block):
            rows(flat_ids[start : start + block])

    out = np.empty((args.batch_size, table.shape[1]), dtype=np.float32)

    def kernel_pool(flat_ids, offsets):
        pooling._kernel.pool(table, flat_ids, offsets, out[: len(offsets)], 0, None)

    def torch_pool(flat_ids, offsets):
        torch.nn.functional.embedding_bag(
            torch.from_numpy(flat_ids), torch_table, torch.from_numpy(offsets), mode="mean"
        )

    distinct = len(np.unique(np.concatenate([flat_ids for flat_ids, _ in batches])))
    print(
        f"{len(sentences):,} sentences, {pieces:,} pieces ({distinct:,} distinct), "
        f"table {table.shape[0]:,} x {table.shape[1]}, one thread\n"
    )
    runs = [("embedding_bag (torch)", torch_pool), ("pool_bags (numpy)", numpy_pool)]
    runs += [("numpy's row gather alone", gather_only)]
    if pooling._kernel is not None:
        runs.insert(0, ("psp's kernel (what encode uses)", kernel_pool))
    else:
        print("psp's kernel is not built in this install (no C compiler?): its row is left out\n")
    print("| pooling | ms (median) | ns per piece | / embedding_bag |")
    print("|---|---|---|---|")
    timings = {name: _median_ms(run, batches, args.repeats) for name, run in runs}
    fused = timings["embedding_bag (torch)"]
    for name, ms in timings.items():
        print(f"| {name} | {ms:.1f} | {1e6 * ms / pieces:.0f} | {ms / fused:.2f}x |")


def _median_ms(run, batches, repeats: int) -> float:
    for flat_ids, offsets in batches:  # warm-up: the table's rows in cache as far as they fit
        run(flat_ids, offsets)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for flat_ids, offsets in batches:
            run(flat_ids, offsets)
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times))


if __name__ == "__main__":
    main()
