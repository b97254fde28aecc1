"""Smaller tables: STS12-16, size on disk and encoding speed for float32/float16/int8 x full/256/128/64 dimensions.

    python bench/export.py --model MODEL_FOLDER [--work DIR] [--sentences N]

Each variant is written with `PSPEncoder.save_pretrained(quantize_to=..., dimensionality=...)` (what
`psp export` does; plus, for comparison, tables cut to their first N columns, equal to `truncate_dim=N`),
evaluated with `psp eval --tasks sts12-16` (mean Pearson x100 over the five years) and timed encoding STS
sentences with the light (numpy) path. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psp_hf
from psp_hf.data_folder import data_dir
from psp_hf.persistence.smaller_tables import folder_megabytes

DTYPES = ("float32", "float16", "int8")
DIMS = (None, 256, 128, 64)


def sts_sentences(limit: int) -> list[str]:
    """STS12-16 sentences, repeated up to `limit`."""
    sentences = []
    for path in sorted((data_dir() / "sts" / "en").glob("STS1[2-6]/*.tsv")):
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            sentences.extend(line.split("\t")[1:3])
    return (sentences * (limit // len(sentences) + 1))[:limit]


def sentences_per_second(folder: Path, sentences: list[str]) -> float:
    encoder = psp_hf.load(folder)
    encoder.encode(sentences[:1000])
    start = time.perf_counter()
    encoder.encode(sentences)
    return len(sentences) / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a trained psp model folder")
    parser.add_argument("--work", default=None, help="folder for the variants (default: a temporary one)")
    parser.add_argument("--sentences", type=int, default=50_000, help="sentences encoded for the speed column")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="psp-export-bench-"))
    encoder = psp_hf.load(args.model)
    variants = []
    for dims in DIMS:
        for dtype in DTYPES:
            folder = work / f"{dtype}-{dims or 'full'}"
            if not folder.exists():
                encoder.save_pretrained(folder, quantize_to=dtype, dimensionality=dims)
            variants.append((dtype, f"{dims} PCA" if dims else str(encoder.dim), folder))
    # For comparison: the first N dimensions as they are (what encode(truncate_dim=N) gives, the pooling being
    # linear), without PCA.
    table, piece_weights = encoder.weights()
    for dims in DIMS[1:]:
        folder = work / f"float32-{dims}-first"
        if not folder.exists():
            encoder.with_table(table[:, :dims], piece_weights).save_pretrained(folder)
        variants.append(("float32", f"{dims} first (truncate_dim)", folder))
    report = work / "sts.json"
    command = [sys.executable, "-m", "psp_hf.cli", "eval", "-q", "--tasks", "sts12-16", "-o", str(report), "-m"]
    subprocess.run([*command, *(str(folder) for _, _, folder in variants)], check=True, stdout=subprocess.DEVNULL)
    scores = {
        entry["model"]["model_id"]: entry["summary"]["sts12-16"]["pearson_mean"]
        for entry in json.loads(report.read_text(encoding="utf-8"))["models"]
    }
    sentences = sts_sentences(args.sentences)
    print(f"model: {args.model}; STS12-16 = mean Pearson x100 over the years; speed: {len(sentences)} sentences\n")
    print("| table | dims | STS12-16 | model.safetensors MB | folder MB | sentences/s |")
    print("|---|---|---|---|---|---|")
    for dtype, dims, folder in variants:
        weights_mb = (folder / "model.safetensors").stat().st_size / 1e6
        speed = sentences_per_second(folder, sentences)
        print(
            f"| {dtype} | {dims} | {scores[str(folder)]:.2f} | {weights_mb:.1f} | {folder_megabytes(folder):.1f} "
            f"| {speed:,.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
