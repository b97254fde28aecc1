"""`make demo`: the main job end to end on the real data in PSP_DATA.

Train a P-SP model on the Flickr30k caption pairs, evaluate it on STS, embed and score real sentences with it.
Outputs land in ./demo_out (override with PSP_DEMO_OUT); a rerun replaces the previous demo's outputs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .data_folder import REPO_ROOT, data_dir


def _run(step: str, argv: list[str]) -> None:
    print(f"\n== {step}\n$ {' '.join(argv)}", flush=True)
    start = time.perf_counter()
    result = subprocess.run(argv)
    if result.returncode:
        # The step printed its own error; a traceback from here would only bury it.
        sys.exit(result.returncode)
    print(f"   ({time.perf_counter() - start:.1f} s)", flush=True)


def main() -> int:
    data = data_dir()
    if not (data / "sts").is_dir():
        print(f"demo: the real data is missing at {data}; set PSP_DATA", file=sys.stderr)
        return 2
    out = Path(os.environ.get("PSP_DEMO_OUT", REPO_ROOT / "demo_out"))
    out.mkdir(parents=True, exist_ok=True)
    psp = [sys.executable, "-m", "psp_hf.cli"]
    model = out / "p-sp-en-flickr"
    if model.exists():
        # psp train refuses an output folder that holds a run (it would be a --resume); the demo starts afresh.
        print(f"demo: replacing the previous demo model in {model}", flush=True)
        shutil.rmtree(model)
    pairs = data / "paraphrase" / "en" / "flickr30k-captions" / "train.pairs.tsv.gz"
    _run(
        "train a P-SP model on the Flickr30k caption pairs (400 mini-batches of 128 pairs, dim 1024)",
        [*psp, "train", "--data", str(pairs), "--output-dir", str(model), *DEMO_TRAIN_FLAGS],
    )
    _run(
        "evaluate it on STS 2012-2016, STS-B, SICK-R, STS17 and Tatoeba",
        [*psp, "eval", "--model", str(model), "--tasks", *DEMO_EVAL_TASKS, "--output", str(out / "results.json")],
    )
    sentences = out / "sentences.txt"
    sts_pairs = data / "sts" / "stsbenchmark" / "test.tsv"
    with open(sts_pairs, encoding="utf-8") as handle, open(sentences, "w", encoding="utf-8") as sink:
        next(handle)
        for line in handle:
            sink.write(line.rstrip("\n").split("\t")[5] + "\n")
    embeddings = out / "sts-b.npy"
    _run("embed the STS-B test sentences", [*psp, "embed", str(sentences), "-m", str(model), "-o", str(embeddings)])
    _run(
        "score the STS-B test pairs",
        [
            *psp,
            "score",
            str(sts_pairs),
            "-m",
            str(model),
            "--columns",
            "6,7",
            "--header",
            "-o",
            str(out / "scored.tsv"),
        ],
    )
    print(f"\nDemo outputs in {out}:")
    for path in sorted(out.iterdir()):
        print(f"  {path}")
    return 0


# Kept beside main() so the README can point at one place.
DEMO_TRAIN_FLAGS = [
    "--dim",
    "1024",
    "--vocab-size",
    "20000",
    "--max-steps",
    "400",
    "--megabatch-size",
    "20",
    "--eval-every",
    "200",
]
DEMO_EVAL_TASKS = ["fast"]  # STS 2012-2016, STS-B, SICK-R, STS17, Tatoeba

if __name__ == "__main__":
    sys.exit(main())
