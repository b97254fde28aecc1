"""Matryoshka training against plain training: STS12-16 of embeddings truncated to 64/128/256/full dims.

Two runs with the same settings (the demo's: Flickr30k caption pairs, 400 mini-batches of 128 pairs; or, with
`--teacher-cache`, the distilled English student's recipe), one with `--matryoshka-dims`; each model's table is
then cut to its first k columns (a copy of the folder with hidden_size=k: exactly what truncating the mean of rows
gives) and evaluated on STS12-16 with the papers' protocol (mean over years of the mean Pearson x100 per year).

    .venv/bin/python bench/matryoshka.py [--dim 1024] [--steps 400] [--lr 0.01] [--init-std 0.1] [--out DIR]

Prints a Markdown table; trained models are reused when their folder is complete (delete it to retrain).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from psp_hf.data_folder import data_dir


def train(folder: Path, pairs: Path, args: argparse.Namespace, matryoshka: str | None) -> None:
    """Run `psp train` into `folder` unless a finished model is there."""
    if (folder / "model.safetensors").is_file():
        print(f"reusing {folder}", file=sys.stderr)
        return
    shutil.rmtree(folder, ignore_errors=True)
    command = [
        sys.executable, "-m", "psp_hf.cli", "train", "-o", str(folder), "--dim", str(args.dim),
        "--dev", "none", "--keep", "last", "--eval-every", "0", "--save-every", "0", "--quiet",
        "--lr", str(args.lr), "--init-std", str(args.init_std),
    ]  # fmt: skip
    if args.teacher_cache:
        # The distilled English student's recipe (make distill): distillation only, 30k pieces.
        command += ["--teacher-cache", args.teacher_cache, "--distill-weight", "1", "--vocab-size", "30000",
                    "--distill-batch-size", "512", "--epochs", str(args.epochs)]  # fmt: skip
    else:
        command += ["--data", str(pairs), "--vocab-size", "20000", "--max-steps", str(args.steps),
                    "--megabatch-size", "20"]  # fmt: skip
    if matryoshka:
        command += ["--matryoshka-dims", matryoshka]
        if args.weights:
            command += ["--matryoshka-weights", args.weights]
    print("$ " + " ".join(command), file=sys.stderr, flush=True)
    start = time.perf_counter()
    subprocess.run(command, check=True)
    print(f"  trained in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)


def truncated_copy(folder: Path, k: int, target: Path) -> Path:
    """A copy of the model folder whose table keeps its first `k` columns."""
    from safetensors.numpy import load_file, save_file

    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(folder, target, ignore=shutil.ignore_patterns("training", "README.md"))
    tensors = load_file(folder / "model.safetensors")
    for name, tensor in tensors.items():
        if tensor.ndim == 2:  # the table (piece weights, if any, are 1-D and stay)
            tensors[name] = tensor[:, :k].copy()
    save_file(tensors, target / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((folder / "config.json").read_text())
    config["hidden_size"] = k
    (target / "config.json").write_text(json.dumps(config, indent=2))
    for path in target.rglob("config_sentence_transformers.json"):
        path.unlink()  # its dimension would be stale; the psp loader does not need it
    return target


def sts12_16(folder: Path) -> float:
    """STS12-16 Pearson x100, the papers' protocol."""
    from psp_hf.evaluation import evaluate_model, load_encoder

    report = evaluate_model(load_encoder(str(folder)), tasks=["sts12-16"])
    return report["summary"]["sts12-16"]["pearson_mean"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--dims", default="64,128,256", help="prefix lengths trained and evaluated")
    # A table that starts small and moves fast learns in a few hundred steps (P-SP's 1.0 and 1e-3 barely move
    # it from its random start in 400 steps, so both runs stay close to the same random table).
    parser.add_argument("--weights", default=None, help="--matryoshka-weights of the Matryoshka run")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--init-std", type=float, default=0.1)
    parser.add_argument("--out", default="bench_out/matryoshka")
    parser.add_argument(
        "--teacher-cache", default=None, help="distil from this teacher cache instead of training on caption pairs"
    )
    parser.add_argument("--epochs", type=int, default=10, help="epochs over the teacher cache (with --teacher-cache)")
    args = parser.parse_args()
    out = Path(args.out)
    pairs = data_dir() / "paraphrase" / "en" / "flickr30k-captions" / "train.pairs.tsv.gz"
    prefixes = [int(k) for k in args.dims.split(",")]
    label = f"matryoshka {args.dims}" + (f" (weights {args.weights})" if args.weights else "")
    runs = {"plain": None, label: args.dims}
    rows: dict[str, dict[int, float]] = {}
    for name, dims in runs.items():
        suffix = f"-w{args.weights.replace(',', '-')}" if args.weights else ""
        folder = out / ("plain" if dims is None else f"matryoshka{suffix}")
        train(folder, pairs, args, dims)
        rows[name] = {}
        for k in [*prefixes, args.dim]:
            model = folder if k == args.dim else truncated_copy(folder, k, out / "truncated" / f"{folder.name}-{k}")
            rows[name][k] = sts12_16(model)
            print(f"{name}: dim {k}: STS12-16 {rows[name][k]:.2f}", file=sys.stderr, flush=True)
    widths = [*prefixes, args.dim]
    recipe = (
        f"distilled from {args.teacher_cache}, {args.epochs} epochs"
        if args.teacher_cache
        else f"{args.steps} steps on Flickr30k caption pairs"
    )
    print(f"\nSTS12-16 Pearson x100 (papers' protocol), embeddings truncated to k dims; dim {args.dim}, "
          f"{recipe}, lr {args.lr}, init std {args.init_std}\n")  # fmt: skip
    print("| training | " + " | ".join(f"k={k}" if k != args.dim else f"full ({k})" for k in widths) + " |")
    print("|---|" + "---:|" * len(widths))
    for name, scores in rows.items():
        print(f"| {name} | " + " | ".join(f"{scores[k]:.2f}" for k in widths) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
