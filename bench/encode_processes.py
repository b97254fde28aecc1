"""Encode speed by what else the process loaded, the other ways to encode a psp folder, and `psp embed` on 1M lines.

Part 1, `psp_hf.load(folder).encode(sentences, num_threads=1 or 2)` (default arguments otherwise) on real STS
sentences, in fresh processes of five kinds: only psp_hf imported; torch imported first with its default thread
count; `torch.set_num_threads(1)`; `torch.set_num_threads(2)`; transformers and sentence-transformers imported
first. (Each runs psp's C kernels, the word look-up and pooling; `PSP_C_KERNELS=0` in the environment runs as an
install without them does: numpy's word look-up, torch's `embedding_bag` where torch is loaded, else numpy.) Beside
them, the same folder through `SentenceTransformer(folder).encode` (its sentence-transformers layout, default
arguments) and through transformers' `AutoModel` + `AutoTokenizer` (trust_remote_code, padded batches of 1024, as
the README shows it; and with `output_token_embeddings=False`), on a copy of the folder saved by this checkout (so
that its remote code and layout are the current ones). Every kind runs `--rounds` times, one fresh process per kind
per round, the kinds taking turns, so that load from other programs falls on all of them alike; each process warms
up and then times `--repeats` encodes per thread count, alternating the counts. The table gives the median of all
timed encodes of a kind and the spread of the per-process medians; "sentences/CPU-s" (CPU seconds of the whole
process) and "cores used" (CPU seconds per wall second) show what a run got from a machine that others share: a
second thread only helps when a second core is free.

Part 2, end to end (process start, read, tokenize, pool, write): `psp embed` with its default `--threads` on the
first `--wiki-lines` sentences of PSP_DATA's Wikipedia text, beside a script that does the same with model2vec's
`StaticModel.encode` (default arguments) on the folder exported by `psp export --format model2vec`. Peak RSS
is the largest resident size of the process (getrusage of a wrapper process; model2vec's worker processes, if
it starts any, are not added in).

    .venv/bin/python bench/encode_processes.py --model FOLDER [--sentences 20000] [--rounds 3] [--repeats 3]
        [--wiki-lines 1000000] [--parts processes,others,embed]
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PSP_KINDS = {
    "plain": "`import psp_hf` only",
    "torch": "`import torch` first (its default threads)",
    "torch-1": "`torch.set_num_threads(1)`",
    "torch-2": "`torch.set_num_threads(2)`",
    "hf": "`import transformers, sentence_transformers` first",
}
OTHER_KINDS = {
    "st": "`SentenceTransformer(folder).encode` (default arguments)",
    "automodel": "`AutoModel` + `AutoTokenizer`, padded batches of 1024",
    "automodel-no-tokens": "the same, `output_token_embeddings=False`",
}
THREADS = (1, 2)


# ------------------------------------------------------------------------------------------- child processes
def _set_up(kind: str) -> None:
    """The imports and settings of a process kind, before psp_hf is imported."""
    if kind.startswith("torch"):
        import torch

        if kind != "torch":
            torch.set_num_threads(int(kind.split("-")[1]))
    elif kind == "hf":
        import sentence_transformers  # noqa: F401
        import transformers  # noqa: F401


def _encoder_for(kind: str, folder: str):
    """`run(sentences, threads)` for one kind (threads only matter to psp's own encode)."""
    if kind in PSP_KINDS:
        import psp_hf

        model = psp_hf.load(folder)
        return lambda sentences, threads: model.encode(sentences, num_threads=threads)
    import torch

    if kind == "st":
        from sentence_transformers import SentenceTransformer

        st_model = SentenceTransformer(folder, device="cpu")
        return lambda sentences, threads: st_model.encode(sentences)
    from transformers import AutoModel, AutoTokenizer

    auto_model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    options = {"output_token_embeddings": False} if kind == "automodel-no-tokens" else {}

    def run(sentences, threads):
        parts = []
        with torch.inference_mode():
            for start in range(0, len(sentences), 1024):
                batch = tokenizer(sentences[start : start + 1024], padding=True, return_tensors="pt")
                parts.append(auto_model(**batch, **options).sentence_embedding.numpy())
        return parts

    return run


def measure(kind: str, folder: str, n_sentences: int, repeats: int) -> dict:
    """Runs in a fresh child process: seconds per timed encode, by thread count."""
    _set_up(kind)
    from psp_hf.data_folder import sts_sentences

    sentences = sts_sentences()[:n_sentences]
    if len(sentences) < n_sentences:
        raise SystemExit(f"only {len(sentences)} STS sentences found (is PSP_DATA set?)")
    torch = sys.modules.get("torch")
    threads_before = torch.get_num_threads() if torch else None
    run = _encoder_for(kind, folder)
    counts = THREADS if kind in PSP_KINDS else (1,)
    for threads in counts:
        run(sentences, threads)  # warm-up: word cache, lazy imports, first allocations
    seconds: dict[int, list[float]] = {threads: [] for threads in counts}
    cpu_seconds: dict[int, list[float]] = {threads: [] for threads in counts}
    for _ in range(repeats):
        for threads in counts:
            start, cpu_start = time.perf_counter(), time.process_time()
            run(sentences, threads)
            seconds[threads].append(time.perf_counter() - start)
            cpu_seconds[threads].append(time.process_time() - cpu_start)
    torch = sys.modules.get("torch")
    import numpy as np

    import psp_hf
    from psp_hf.inference import pooling

    # The same embeddings as psp's own encode (to float32 rounding), so that the rows compare like with like.
    sample = sentences[:256]
    got = run(sample, 1)
    got = np.concatenate(got) if isinstance(got, list) else np.asarray(got)
    difference = float(np.abs(got - psp_hf.load(folder).encode(sample)).max())
    return {
        "max_difference": difference,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "torch_threads_before": threads_before,
        "torch_threads_after": torch.get_num_threads() if torch else None,
        "pools_with": pooling.backend() if kind in PSP_KINDS else "torch (model)",
    }


def model2vec_embed(model_dir: str, text: str, output: str) -> None:
    """Runs in a child: what `psp embed` does, with model2vec (one sentence a line; rows to a .npy file)."""
    import numpy as np
    from model2vec import StaticModel

    model = StaticModel.from_pretrained(model_dir)
    with open(text, encoding="utf-8") as handle:
        sentences = handle.read().splitlines()
    np.save(output, model.encode(sentences))


# ------------------------------------------------------------------------------------------- the parent
def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _child(arguments: list[str]) -> dict:
    command = [sys.executable, __file__, *arguments]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


# Runs a command and prints its peak RSS (KiB on Linux) and wall seconds as JSON: a fresh process per command, so
# that RUSAGE_CHILDREN holds that command's peak alone.
_TIMED = (
    "import json, resource, subprocess, sys, time; start = time.perf_counter(); "
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); seconds = time.perf_counter() - start; "
    "print(json.dumps({'seconds': seconds, 'peak_kib': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))"
)


def _timed(command: list[str]) -> dict:
    done = subprocess.run([sys.executable, "-c", _TIMED, *command], check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _rate(n: int, seconds: list[float]) -> float:
    return n / statistics.median(seconds)


def encode_table(args: argparse.Namespace, kinds: list[str], resaved: str | None) -> list[str]:
    """Rows by kind and thread count. The other ways of encoding run with torch's default threads: they are
    compared with psp's fastest 2-thread kind (both on two cores), psp's kinds with the fastest psp kind at the
    same `num_threads`."""
    timings: dict[tuple[str, int], list[float]] = {}
    cpu: dict[tuple[str, int], list[float]] = {}
    per_process: dict[tuple[str, int], list[float]] = {}
    notes: dict[str, dict] = {}
    for _ in range(args.rounds):
        for kind in kinds:
            folder = args.model if kind in PSP_KINDS else resaved
            notes[kind] = _child(["--child", kind, folder, str(args.sentences), str(args.repeats)])
            for threads, seconds in notes[kind]["seconds"].items():
                key = (kind, int(threads) if kind in PSP_KINDS else 0)
                timings.setdefault(key, []).extend(seconds)
                cpu.setdefault(key, []).extend(notes[kind]["cpu_seconds"][threads])
                per_process.setdefault(key, []).append(_rate(args.sentences, seconds))
    rates = {key: _rate(args.sentences, seconds) for key, seconds in timings.items()}
    fastest = {}
    for threads in THREADS:
        psp_rates = [rate for (kind, count), rate in rates.items() if count == threads]
        fastest[threads] = max(psp_rates) if psp_rates else float("nan")
    fastest[0] = fastest[2]
    lines = [
        "| process | torch threads before → after | pools with | num_threads | sentences/s (median) "
        "| per-process medians | fastest psp / this | 2 threads / 1 | sentences/CPU-s | cores used |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (kind, threads), rate in rates.items():
        note = notes[kind]
        before, after = note["torch_threads_before"], note["torch_threads_after"]
        torch_threads = "not loaded" if after is None else f"{before if before is not None else '-'} → {after}"
        spread = per_process[(kind, threads)]
        scaling = f"{rate / rates[(kind, 1)]:.2f}x" if threads == 2 and (kind, 1) in rates else ""
        cells = [
            (PSP_KINDS | OTHER_KINDS)[kind],
            torch_threads,
            note["pools_with"],
            str(threads) if threads else "(torch's)",
            f"{rate:,.0f}",
            f"{min(spread):,.0f}–{max(spread):,.0f}",
            f"{fastest[threads] / rate:.2f}x",
            scaling,
            f"{_rate(args.sentences, cpu[(kind, threads)]):,.0f}",
            f"{sum(cpu[(kind, threads)]) / sum(timings[(kind, threads)]):.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        "Largest difference from psp's own embeddings (256 sentences): "
        + ", ".join(f"{kind} {notes[kind]['max_difference']:.1e}" for kind in kinds)
    )
    return lines


def embed_table(args: argparse.Namespace) -> list[str]:
    from psp_hf.data_folder import existing_data_dir

    source = Path(existing_data_dir()) / "unlabeled/en/wikipedia-2015/sentences.txt.gz"
    with tempfile.TemporaryDirectory(prefix="psp-bench-") as tmp:
        text = Path(tmp) / "sentences.txt"
        with gzip.open(source, "rt", encoding="utf-8") as handle, open(text, "w", encoding="utf-8") as sink:
            n = 0
            for line in itertools.islice(handle, args.wiki_lines):
                sink.write(line)
                n += 1
        m2v = Path(tmp) / "model2vec"
        psp = str(Path(sys.executable).with_name("psp"))
        subprocess.run([psp, "export", args.model, "-o", str(m2v), "--format", "model2vec"], check=True)
        runs = {
            "psp embed (default --threads)": [psp, "embed", str(text), "-m", args.model, "-o", f"{tmp}/psp.npy", "-q"],
            "model2vec StaticModel.encode (default arguments)": [
                sys.executable,
                __file__,
                "--model2vec-child",
                str(m2v),
                str(text),
                f"{tmp}/m2v.npy",
            ],
        }
        results = {name: [] for name in runs}
        for _ in range(args.embed_rounds):  # taking turns, as above
            for name, command in runs.items():
                results[name].append(_timed(command))
    lines = [
        "| command | sentences | seconds (median) | sentences/s | peak RSS | vs model2vec |",
        "|---|---|---|---|---|---|",
    ]
    m2v_seconds = statistics.median(r["seconds"] for r in results["model2vec StaticModel.encode (default arguments)"])
    for name, runs_of in results.items():
        seconds = statistics.median(r["seconds"] for r in runs_of)
        peak = max(r["peak_kib"] for r in runs_of) / 1024
        lines.append(
            f"| {name} | {n:,} | {seconds:.1f} | {n / seconds:,.0f} | {peak:,.0f} MiB | {m2v_seconds / seconds:.2f}x |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a psp model folder (with its sentence-transformers layout)")
    parser.add_argument("--sentences", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per kind (taking turns)")
    parser.add_argument("--repeats", type=int, default=3, help="timed encodes per thread count in each process")
    parser.add_argument("--wiki-lines", type=int, default=1_000_000)
    parser.add_argument("--embed-rounds", type=int, default=1)
    parser.add_argument("--parts", default="processes,others,embed")
    parser.add_argument("--child", nargs=4, metavar=("KIND", "FOLDER", "N", "REPEATS"), help=argparse.SUPPRESS)
    parser.add_argument("--model2vec-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, folder, n, repeats = args.child
        print(json.dumps(measure(kind, folder, int(n), int(repeats))))
        return
    if args.model2vec_child:
        model2vec_embed(*args.model2vec_child)
        return
    if not args.model:
        parser.error("--model is required")
    parts = args.parts.split(",")
    print(f"model {args.model}; {args.sentences:,} STS sentences; {os.cpu_count()} cores; load before: {_load()}")
    kinds = (list(PSP_KINDS) if "processes" in parts else []) + (list(OTHER_KINDS) if "others" in parts else [])
    with tempfile.TemporaryDirectory(prefix="psp-bench-") as tmp:
        resaved = None
        if "others" in parts:
            # The folder as this checkout writes it: the remote code and the sentence-transformers layout measured
            # are the current ones, not those of the release that saved --model (same table and tokenizer).
            from psp_hf import PSPEncoder

            resaved = str(PSPEncoder.from_pretrained(args.model).save_pretrained(Path(tmp) / "model"))
        if kinds:
            print("\n" + "\n".join(encode_table(args, kinds, resaved)))
        print(f"\nload after the encode table: {_load()}")
    if "embed" in parts:
        print("\n" + "\n".join(embed_table(args)))
        print(f"\nload after the embed table: {_load()}")


if __name__ == "__main__":
    main()
