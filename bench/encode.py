"""End-to-end encoding speed: raw strings in, float32 array out.

psp-hf against model2vec's StaticModel built from the very same embedding table and tokenizer, on 20k real
STS sentences, with 1 and 2 threads (psp-hf: `encode(num_threads=...)`, batches on a thread pool; model2vec: its
multiprocessing switch). Each configuration runs in a fresh process so thread settings hold.

    .venv/bin/python bench/encode.py [--sentences 20000] [--dim 1024] [--vocab 50000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CACHE = Path(__file__).resolve().parent / ".cache"


def build_model(vocab: int, dim: int) -> Path:
    """A random `dim`-d table over a sentencepiece vocabulary trained on English text (cached)."""
    from psp_hf import PSPEncoder
    from psp_hf.data_folder import english_training_text
    from psp_hf.tokenizer import train_tokenizer

    folder = CACHE / f"model-v{vocab}-d{dim}"
    if (folder / "model.safetensors").is_file():
        return folder
    tokenizer = train_tokenizer(english_training_text(), vocab_size=vocab)
    PSPEncoder.from_tokenizer(tokenizer, hidden_size=dim, seed=0).save_pretrained(folder)
    return folder


def measure(engine: str, folder: str, n_sentences: int, repeats: int, threads: int) -> dict:
    """Runs inside a child process whose thread environment is already set.

    "psp-hf" loads torch first (as a training or notebook process has), so encode pools with torch's
    embedding_bag; "psp-hf numpy" never imports torch (the light path of `psp embed` on a small file).
    """
    import numpy as np

    from psp_hf import PSPEncoder
    from psp_hf.data_folder import sts_sentences

    if engine == "psp-hf":
        import torch

        # Parallelism comes from encode's batch threads; one torch thread each avoids oversubscription.
        torch.set_num_threads(1)
    sentences = sts_sentences()[:n_sentences]
    encoder = PSPEncoder.from_pretrained(folder)
    if engine.startswith("psp-hf"):

        def run():
            return encoder.encode(sentences, batch_size=1024, num_threads=threads)
    else:
        from model2vec import StaticModel

        table = encoder._weights()[0]
        static = StaticModel(
            vectors=table[: encoder.tokenizer_size],
            tokenizer=encoder._backend,
            normalize=False,
            max_length=None,
        )

        def run():
            return static.encode(sentences, batch_size=1024, use_multiprocessing=threads > 1)

    out = run()  # warm-up
    assert out.shape == (len(sentences), encoder.dim) and out.dtype == np.float32
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    best = min(times)
    return {"engine": engine, "threads": threads, "sentences_per_s": len(sentences) / best, "best_s": best}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=20000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=50000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--child", nargs=3, metavar=("ENGINE", "FOLDER", "THREADS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        engine, folder, threads = args.child
        print(json.dumps(measure(engine, folder, args.sentences, args.repeats, int(threads))))
        return

    folder = build_model(args.vocab, args.dim)
    from psp_hf import PSPEncoder

    encoder = PSPEncoder.from_pretrained(folder)
    print(f"model: {encoder} from {folder}; {args.sentences} STS sentences; best of {args.repeats}")
    results = []
    for threads in (int(t) for t in args.threads.split(",")):
        env = dict(
            os.environ,
            OMP_NUM_THREADS=str(threads),
            MKL_NUM_THREADS=str(threads),
            RAYON_NUM_THREADS=str(threads),
            TOKENIZERS_PARALLELISM="true",
        )
        for engine in ("psp-hf", "psp-hf numpy", "model2vec"):
            child = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--sentences",
                    str(args.sentences),
                    "--repeats",
                    str(args.repeats),
                    "--child",
                    engine,
                    str(folder),
                    str(threads),
                ],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            results.append(json.loads(child.stdout.strip().splitlines()[-1]))
    print("\n| threads | engine | sentences/s | ratio psp-hf / model2vec |\n|---|---|---|---|")
    by_key = {(r["threads"], r["engine"]): r for r in results}
    for r in results:
        ratio = ""
        if r["engine"].startswith("psp-hf"):
            ratio = f"{r['sentences_per_s'] / by_key[(r['threads'], 'model2vec')]['sentences_per_s']:.2f}x"
        print(f"| {r['threads']} | {r['engine']} | {r['sentences_per_s']:,.0f} | {ratio} |")
    print("\n| engine | threads | speed-up over 1 thread |\n|---|---|---|")
    for r in results:
        one = by_key.get((1, r["engine"]))
        if r["threads"] > 1 and one is not None:
            print(f"| {r['engine']} | {r['threads']} | {r['sentences_per_s'] / one['sentences_per_s']:.2f}x |")
    with open("/proc/loadavg") as handle:
        print(f"\nload average (1, 5, 15 min) after the runs: {' '.join(handle.read().split()[:3])}")


if __name__ == "__main__":
    main()
