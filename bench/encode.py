"""End-to-end encoding speed: raw strings in, float32 array out.

psp-hf against model2vec's StaticModel built from the very same embedding table and tokenizer, on 20k real
STS sentences, with 1 and 2 threads (psp-hf: `encode(num_threads=...)`, batches on a thread pool; model2vec: its
multiprocessing switch). Each engine runs in a fresh process; inside it the thread counts alternate round after
round, so a 1-thread and a 2-thread run meet the same load from other programs. The tables give the best round
of each count and the median of the per-round speed-ups, with the load average before and after. "cores used" is
CPU seconds per wall second: on a shared machine (Linux autogroups share the CPU between sessions, not threads) a
second thread only helps when a second core is free; sentences per CPU second compare code under any load.

    .venv/bin/python bench/encode.py [--sentences 20000] [--dim 1024] [--vocab 50000] [--repeats 9]
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
    from psp_hf.tokenization.pieces import train_tokenizer

    folder = CACHE / f"model-v{vocab}-d{dim}"
    if (folder / "model.safetensors").is_file():
        return folder
    tokenizer = train_tokenizer(english_training_text(), vocab_size=vocab)
    PSPEncoder.from_tokenizer(tokenizer, hidden_size=dim, seed=0).save_pretrained(folder)
    return folder


def measure(engine: str, folder: str, n_sentences: int, repeats: int, thread_counts: list[int]) -> list[dict]:
    """Runs inside a child process (one tokenizer thread: parallelism is what `num_threads` asks for).

    "psp-hf" loads torch first (as a training or notebook process has) and runs psp's C kernels (word look-up
    and pooling), as every install with a C compiler does. The two "no-C" engines run as an install without them
    (`PSP_C_KERNELS=0`): "psp-hf no-C torch" pools with torch's embedding_bag, "psp-hf no-C numpy" never imports
    torch and pools with numpy.
    """
    import numpy as np

    from psp_hf import PSPEncoder
    from psp_hf.data_folder import sts_sentences

    if engine in ("psp-hf", "psp-hf no-C torch"):
        import torch

        # Parallelism comes from encode's batch threads; one torch thread each avoids oversubscription.
        torch.set_num_threads(1)
    sentences = sts_sentences()[:n_sentences]
    if len(sentences) < n_sentences:
        raise SystemExit(f"only {len(sentences)} STS sentences found (is PSP_DATA set?)")
    encoder = PSPEncoder.from_pretrained(folder)
    if engine.startswith("psp-hf"):

        def run(threads: int):
            return encoder.encode(sentences, batch_size=1024, num_threads=threads)
    else:
        from model2vec import StaticModel

        table = encoder.weights()[0]
        static = StaticModel(
            vectors=table[: encoder.tokenizer_size],
            tokenizer=encoder._backend,
            normalize=False,
            max_length=None,
        )

        def run(threads: int):
            return static.encode(sentences, batch_size=1024, use_multiprocessing=threads > 1)

    for threads in thread_counts:  # warm-up (psp-hf's word cache fills on the first call)
        out = run(threads)
        assert out.shape == (len(sentences), encoder.dim) and out.dtype == np.float32
    times: dict[int, list[float]] = {threads: [] for threads in thread_counts}
    cpu: dict[int, float] = dict.fromkeys(thread_counts, 0.0)
    for _ in range(repeats):
        for threads in thread_counts:
            start, cpu_start = time.perf_counter(), time.process_time()
            run(threads)
            times[threads].append(time.perf_counter() - start)
            cpu[threads] += time.process_time() - cpu_start
    first = np.array(times[thread_counts[0]])
    return [
        {
            "engine": engine,
            "threads": threads,
            "sentences_per_s": len(sentences) / min(times[threads]),
            "median_speedup": float(np.median(first / np.array(times[threads]))),
            # CPU seconds per wall second over all rounds: what the run got from a machine others share too.
            "cores_used": cpu[threads] / sum(times[threads]),
            "sentences_per_cpu_s": len(sentences) * repeats / cpu[threads],
        }
        for threads in thread_counts
    ]


def load_average() -> str:
    with open("/proc/loadavg") as handle:
        return " ".join(handle.read().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=20000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=50000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--engines", default="psp-hf,psp-hf no-C torch,psp-hf no-C numpy,model2vec")
    parser.add_argument("--child", nargs=2, metavar=("ENGINE", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    thread_counts = [int(t) for t in args.threads.split(",")]
    if args.child:
        engine, folder = args.child
        print(json.dumps(measure(engine, folder, args.sentences, args.repeats, thread_counts)))
        return

    folder = build_model(args.vocab, args.dim)
    from psp_hf import PSPEncoder

    encoder = PSPEncoder.from_pretrained(folder)
    print(f"model: {encoder} from {folder}; {args.sentences} STS sentences; {args.repeats} rounds")
    print(f"load average (1, 5, 15 min) before: {load_average()}")
    # One tokenizer (rayon) and one BLAS thread: every thread that runs is one that num_threads asked for.
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", RAYON_NUM_THREADS="1")
    results = []
    for engine in args.engines.split(","):
        command = [sys.executable, __file__, "--sentences", str(args.sentences), "--repeats", str(args.repeats)]
        command += ["--threads", args.threads, "--child", engine, str(folder)]
        kernels = {"PSP_C_KERNELS": "0"} if "no-C" in engine else {}
        child = subprocess.run(command, env=env | kernels, check=True, capture_output=True, text=True)
        results += json.loads(child.stdout.strip().splitlines()[-1])
    print("\n| threads | engine | sentences/s | cores used | sentences/CPU-s | ratio psp-hf / model2vec |")
    print("|---|---|---|---|---|---|")
    by_key = {(r["threads"], r["engine"]): r for r in results}
    for r in sorted(results, key=lambda r: r["threads"]):
        ratio = ""
        if r["engine"].startswith("psp-hf") and (r["threads"], "model2vec") in by_key:
            ratio = f"{r['sentences_per_s'] / by_key[(r['threads'], 'model2vec')]['sentences_per_s']:.2f}x"
        cells = f"{r['sentences_per_s']:,.0f} | {r['cores_used']:.2f} | {r['sentences_per_cpu_s']:,.0f}"
        print(f"| {r['threads']} | {r['engine']} | {cells} | {ratio} |")
    print("\n| engine | threads | best / best 1-thread | median per-round speed-up |\n|---|---|---|---|")
    for r in results:
        one = by_key.get((thread_counts[0], r["engine"]))
        if r["threads"] != thread_counts[0] and one is not None:
            best = r["sentences_per_s"] / one["sentences_per_s"]
            print(f"| {r['engine']} | {r['threads']} | {best:.2f}x | {r['median_speedup']:.2f}x |")
    print(f"\nload average (1, 5, 15 min) after the runs: {load_average()}")


if __name__ == "__main__":
    main()
