"""Encoding long, word-rich text: the Wikipedia sentences of the data folder, in equal parts, with 1 and 2 threads.

Each thread count gets a fresh encoder (an empty word cache) and encodes the first `--sentences` sentences part by
part, so the table shows the cache filling (early parts meet many new words) and what it costs once full (500,000
words; later parts tokenize the words it lacks without storing them). torch is loaded, as in `psp embed`.

    .venv/bin/python bench/wikipedia_encode.py --model MODEL [--sentences 1000000] [--parts 4] [--threads 1,2]
        [--text unlabeled/ar/saudinewsnet/sentences.txt.gz]

`--text` (a path in the data folder, or any one-sentence-a-line file, .gz or not) measures another language's text
with that language's model.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--sentences", type=int, default=1_000_000)
    parser.add_argument("--parts", type=int, default=4)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--text", default="unlabeled/en/wikipedia-2015/sentences.txt.gz")
    args = parser.parse_args()
    import torch

    from psp_hf import PSPEncoder
    from psp_hf.data_folder import existing_data_dir

    torch.set_num_threads(1)  # parallelism is encode's threads
    path = Path(args.text) if Path(args.text).is_file() else Path(existing_data_dir()) / args.text
    with (gzip.open if path.suffix == ".gz" else open)(path, "rt", encoding="utf-8") as handle:
        sentences = [line.rstrip("\n") for line in itertools.islice(handle, args.sentences)]
    size = -(-len(sentences) // args.parts)
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"model {args.model}; {path}: {len(sentences):,} sentences in parts of {size:,}; load {load}")
    print("\n| threads | part | sentences/s | words cached after |\n|---|---|---|---|")
    for threads in (int(value) for value in args.threads.split(",")):
        encoder = PSPEncoder.from_pretrained(args.model)
        for part in range(args.parts):
            chunk = sentences[part * size : (part + 1) * size]
            start = time.perf_counter()
            encoder.encode(chunk, num_threads=threads)
            rate = len(chunk) / (time.perf_counter() - start)
            print(f"| {threads} | {part + 1} | {rate:,.0f} | {len(encoder._word_cache):,} |", flush=True)


if __name__ == "__main__":
    main()
