"""Start-up cost of the everyday path: psp-hf against model2vec's StaticModel on the very same table.

Both engines get the same embedding table and tokenizer (the model bench/encode.py builds; the StaticModel is
saved from it once). Each measurement is a whole fresh process, repeated; the table shows medians:

- `psp embed` of a one-line file (console script) against a model2vec script doing the same job (load the
  folder, read the file, encode, `np.save`): wall time and peak resident memory of the process;
- single-sentence `encode` latency once the model is loaded (median of 1,000 calls in each process).

    .venv/bin/python bench/startup.py [--repeats 5] [--dim 1024] [--vocab 50000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from encode import CACHE, build_model  # noqa: E402

MODEL2VEC_EMBED = """
import sys
import numpy as np
from model2vec import StaticModel
folder, source, output = sys.argv[1:4]
model = StaticModel.from_pretrained(folder)
with open(source, encoding="utf-8") as handle:
    lines = handle.read().splitlines()
np.save(output, model.encode(lines))
"""

LATENCY = """
import json, statistics, sys, time
engine, folder = sys.argv[1:3]
if engine == "psp-hf":
    import psp_hf
    model = psp_hf.load(folder)
else:
    from model2vec import StaticModel
    model = StaticModel.from_pretrained(folder)
sentence = "A man is playing a guitar on the stage tonight."
for _ in range(50):
    model.encode(sentence)
times = []
for _ in range(1000):
    start = time.perf_counter()
    model.encode(sentence)
    times.append(time.perf_counter() - start)
print(json.dumps({"latency_us": statistics.median(times) * 1e6}))
"""


def model2vec_folder(psp_folder: Path) -> Path:
    """A StaticModel saved from the psp table and tokenizer (cached beside the psp model)."""
    folder = CACHE / f"{psp_folder.name}-model2vec"
    if (folder / "model.safetensors").is_file():
        return folder
    from model2vec import StaticModel

    import psp_hf

    encoder = psp_hf.load(psp_folder)
    table = encoder.weights()[0]
    vocab = encoder._backend.get_vocab_size(with_added_tokens=True)
    StaticModel(vectors=table[:vocab], tokenizer=encoder._backend, normalize=False).save_pretrained(folder)
    return folder


def run_measured(command: list[str]) -> tuple[float, float, str]:
    """Wall seconds and peak resident MB (from wait4, this child only) of one whole child process."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        elapsed = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            raise RuntimeError(f"{command[:3]} failed: {err.read()[-2000:]}")
        # ru_maxrss is in kilobytes on Linux.
        return elapsed, usage.ru_maxrss / 1024, out.read()


def psp_command() -> list[str]:
    script = Path(sys.executable).with_name("psp")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "psp_hf.cli"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=50000)
    args = parser.parse_args()

    psp_folder = build_model(args.vocab, args.dim)
    m2v_folder = model2vec_folder(psp_folder)
    work = Path(tempfile.mkdtemp(prefix="psp-startup-"))
    source = work / "one.txt"
    source.write_text("A man is playing a guitar on the stage tonight.\n", encoding="utf-8")
    jobs = {
        "psp-hf": psp_command() + ["embed", str(source), "-m", str(psp_folder), "-o", str(work / "psp.npy"), "-q"],
        "model2vec": [sys.executable, "-c", MODEL2VEC_EMBED, str(m2v_folder), str(source), str(work / "m2v.npy")],
    }
    embed: dict[str, list[tuple[float, float]]] = {name: [] for name in jobs}
    latency: dict[str, list[float]] = {name: [] for name in jobs}
    # Interleaved, so both engines see the same machine load.
    for _ in range(args.repeats):
        for name, command in jobs.items():
            seconds, peak_mb, _ = run_measured(command)
            embed[name].append((seconds, peak_mb))
            folder = psp_folder if name == "psp-hf" else m2v_folder
            _, _, stdout = run_measured([sys.executable, "-c", LATENCY, name, str(folder)])
            latency[name].append(json.loads(stdout.strip().splitlines()[-1])["latency_us"])

    def median(values):
        return statistics.median(values)

    rows = [
        ("embed a one-line file: wall s", [median([s for s, _ in embed[n]]) for n in jobs], 2.0, "{:.2f}"),
        ("embed a one-line file: peak MB", [median([m for _, m in embed[n]]) for n in jobs], 2.0, "{:.0f}"),
        ("encode one sentence: µs", [median(latency[n]) for n in jobs], 1.2, "{:.1f}"),
    ]
    print(f"model {psp_folder} (and its StaticModel twin); medians of {args.repeats} fresh processes each\n")
    print("| measure | psp-hf | model2vec | ratio | target |\n|---|---|---|---|---|")
    for label, (psp_value, m2v_value), target, fmt in rows:
        ratio = psp_value / m2v_value
        verdict = "ok" if ratio <= target else "MISSED"
        print(f"| {label} | {fmt.format(psp_value)} | {fmt.format(m2v_value)} | {ratio:.2f}x | ≤ {target}x {verdict} |")


if __name__ == "__main__":
    main()
