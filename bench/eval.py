"""Wall time of `psp eval` per task for a 1024-d static (P-SP) model, against the targets.

Targets: STS + STS17 + Tatoeba under 60 s, SentEval under 600 s, on this machine. The model is a random
1024-d table over a 50k sentencepiece vocabulary (the same one bench/encode.py builds and caches): speed does
not depend on the values in the table.

    .venv/bin/python bench/eval.py [--groups fast senteval] [--model FOLDER]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

TARGETS_S = {"fast": 60.0, "senteval": 600.0}


def cached_model(vocab: int, dim: int) -> Path:
    """bench/encode.py's cached random model (built on first use)."""
    spec = importlib.util.spec_from_file_location("bench_encode", Path(__file__).resolve().parent / "encode.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_model(vocab, dim)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", nargs="+", default=["fast", "senteval"], choices=sorted(TARGETS_S))
    parser.add_argument("--model", default=None, help="model folder (default: random 1024-d P-SP model)")
    args = parser.parse_args()

    start = time.perf_counter()
    from psp_hf.evaluation import evaluate_model, load_encoder

    folder = args.model or cached_model(50000, 1024)
    encoder = load_encoder(folder)
    setup = time.perf_counter() - start
    print(f"model {encoder.name} ({encoder.kind}); imports + load {setup:.1f} s")
    rows = []
    for group in args.groups:
        group_start = time.perf_counter()
        result = evaluate_model(encoder, [group], log=print)
        wall = time.perf_counter() - group_start
        rows.append((group, wall, result["timings"]))
    print("\n| group | tasks | wall s | target s | within |\n|---|---|---|---|---|")
    for group, wall, timings in rows:
        tasks = ", ".join(f"{task} {seconds:.1f}" for task, seconds in timings.items())
        verdict = "yes" if wall < TARGETS_S[group] else "NO"
        print(f"| {group} | {tasks} | {wall:.1f} | {TARGETS_S[group]:.0f} | {verdict} |")


if __name__ == "__main__":
    main()
