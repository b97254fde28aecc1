"""Changes to a trained X–English model's rows after training, without retraining, and what they do on dev and test.

    python bench/rows_after_training.py --model OUT/tr/model --english OUT/english/model --lang tr \
        [--blend 0.75,0.5,0.25,0] [--blend-only-english] [--procrustes] [--centre 0,1,3] [--work DIR]

Variants (each written as a model folder under `--work`, then scored):

- `--blend A,B,...`: the rows copied from the English student at the start of training (the pieces both
  vocabularies hold, matched by text) set to `alpha * trained + (1 - alpha) * student`, for each alpha (the
  weight-space ensembling of WiSE-FT, per row). `--blend-only-english` limits it to the shared pieces that never
  occur in the language's side of the training text.
- `--procrustes`: an orthogonal map, fitted on the sentence vectors of 60,000 training pairs (X side onto English
  side), applied to the rows of the pieces that occur only on the X side of the training text.
- `--centre K,...`: every row less the mean sentence vector of 30,000 training pairs (both sides), then projected
  off their top K principal directions. A mean of rows moves with its rows, so this centres (and strips) every
  sentence vector of at least one known piece.

Scores: PUD dev mining accuracy (the checkpoint chooser of `psp languages`) and STS-B dev, then the test sets
(Tatoeba error % of the language, its STS17 tracks, English STS12-16, STS-B test) through `psp eval`. The language's
training text is read from the model's `psp languages` folder (`../data/data/*.parquet`, `../mono/`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

TASKS = ["stsb", "sts12-16", "tatoeba", "sts17"]


def training_pairs(model: Path, lang: str) -> list[dict[str, str]]:
    import pyarrow.parquet as pq

    files = sorted((model.parent / "data" / "data").glob("*.parquet"))
    if not files:
        raise SystemExit(f"no training pairs beside {model} (expected {model.parent}/data/data/*.parquet)")
    return [row for file in files for row in pq.read_table(file, columns=[lang, "en"]).to_pylist()]


def counts_in(encoder, texts: list[str]) -> np.ndarray:
    """How often each of the table's pieces occurs in `texts`."""
    from psp_hf.inference.piece_weights import piece_counts

    return piece_counts(encoder, texts, vocab_size=len(encoder.weights()[0]))


def write_variant(encoder, folder: Path, table: np.ndarray) -> Path:
    """`encoder` with another table, saved as a model folder."""
    encoder.with_table(table.astype(np.float32), encoder.weights()[1]).save_pretrained(folder)
    return folder


def score(folder: Path, lang: str, pud: list[tuple[str, str]]) -> str:
    import psp_hf
    from psp_hf.training.data.bitext_teacher import mining_accuracy

    report = folder / "eval.json"
    psp = Path(sys.executable).with_name("psp")
    command = [str(psp), "eval", "-q", "-m", str(folder), "--tasks", *TASKS, "-o", str(report)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    document = json.loads(report.read_text(encoding="utf-8"))
    results = document["models"][0]["results"] if "models" in document else document["results"]
    years = sum(results[f"sts1{k}"]["pearson_mean"] for k in range(2, 7)) / 5
    tracks = ", ".join(
        f"{name} {value['pearson']:.1f}"
        for name, value in results.get("sts17", {}).items()
        if isinstance(value, dict) and lang in name
    )
    cells = [
        f"{mining_accuracy(psp_hf.load(folder), pud):.2f}",
        f"{results['stsb']['dev']['pearson']:.2f}",
        f"{results['tatoeba'][lang]['error_rate']:.2f}",
        tracks or "—",
        f"{years:.2f}",
        f"{results['stsb']['test']['pearson']:.2f}",
    ]
    return " | ".join(cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a psp languages model (OUT/xx/model)")
    parser.add_argument("--english", type=Path, required=True, help="the English student its rows came from")
    parser.add_argument("--lang", required=True)
    parser.add_argument("--blend", default="", help="alphas, comma-separated")
    parser.add_argument("--blend-only-english", action="store_true")
    parser.add_argument("--procrustes", action="store_true")
    parser.add_argument("--centre", default="", help="numbers of principal directions to remove after centring")
    parser.add_argument("--work", type=Path, default=None, help="where the variants go (default: a temporary folder)")
    args = parser.parse_args()

    from psp_hf.data.sources.language_sources import DEV_SOURCE, read_bitext
    from psp_hf.data_folder import existing_data_dir

    pud = read_bitext(DEV_SOURCE.path(Path(existing_data_dir()), args.lang), args.lang)
    import psp_hf

    work = args.work or Path(tempfile.mkdtemp(prefix="psp-rows-"))
    encoder = psp_hf.load(args.model)
    table = encoder.weights()[0]
    print(f"| variant | PUD dev | STS-B dev | Tatoeba {args.lang} error % | STS17 | STS12-16 | STS-B test |")
    print("|---|---|---|---|---|---|---|")
    print(f"| as trained | {score(write_variant(encoder, work / 'trained', table), args.lang, pud)} |", flush=True)

    pairs = training_pairs(args.model, args.lang) if args.blend_only_english or args.procrustes or args.centre else []
    own_text = [pair[args.lang] for pair in pairs]
    mono = args.model.parent / "mono" / "sentences.txt.gz"
    if args.blend_only_english and mono.is_file():
        with gzip.open(mono, "rt", encoding="utf-8") as lines:
            own_text += lines.read().splitlines()

    if args.blend:
        from psp_hf.training.model.setup import shared_rows

        english = psp_hf.load(args.english)
        rows, english_rows = shared_rows(encoder, english)
        if args.blend_only_english:
            never = counts_in(encoder, own_text)[rows] == 0
            print(f"\n({never.sum():,} of {len(rows):,} shared pieces never occur in the {args.lang} text)\n")
            rows, english_rows = rows[never], english_rows[never]
        english_table = english.weights()[0]
        for alpha in (float(value) for value in args.blend.split(",")):
            blended = table.copy()
            blended[rows] = alpha * table[rows] + (1 - alpha) * english_table[english_rows]
            folder = write_variant(encoder, work / f"blend-{alpha}", blended)
            print(f"| blend alpha {alpha} | {score(folder, args.lang, pud)} |", flush=True)

    if args.procrustes:
        from psp_hf.inference.similarity import unit_rows

        sample = [pairs[k] for k in np.random.default_rng(0).choice(len(pairs), min(60_000, len(pairs)), False)]
        own = unit_rows(encoder.encode([pair[args.lang] for pair in sample]))
        english = unit_rows(encoder.encode([pair["en"] for pair in sample]))
        left, _, right = np.linalg.svd(own.T @ english)
        rotation = left @ right
        english_counts = counts_in(encoder, [pair["en"] for pair in pairs])
        only_own = np.flatnonzero((english_counts == 0) & (counts_in(encoder, own_text) > 0))
        mapped = table.copy()
        mapped[only_own] = table[only_own] @ rotation
        before, after = float((own * english).sum(1).mean()), float(((own @ rotation) * english).sum(1).mean())
        folder = write_variant(encoder, work / "procrustes", mapped)
        print(f"| Procrustes on {len(only_own):,} rows | {score(folder, args.lang, pud)} |")
        print(f"\nmean pair cosine of the fitting pairs: {before:.3f} before the map, {after:.3f} after")
    if args.centre:
        centre_variants(args, encoder, pairs, work, pud)
    print(f"\nvariants in {work}; load average {' '.join(f'{value:.2f}' for value in os.getloadavg())}")


def centre_variants(args: argparse.Namespace, encoder, pairs: list[dict], work: Path, pud: list) -> None:
    sample = [pairs[k] for k in np.random.default_rng(0).choice(len(pairs), min(30_000, len(pairs)), False)]
    table = encoder.weights()[0]
    vectors = np.concatenate([encoder.encode([pair[side] for pair in sample]) for side in (args.lang, "en")])
    mean = vectors.mean(axis=0)
    _, _, directions = np.linalg.svd(vectors - mean, full_matrices=False)
    for count in (int(value) for value in args.centre.split(",")):
        keep = np.eye(table.shape[1]) - directions[:count].T @ directions[:count]
        folder = write_variant(encoder, work / f"centre-{count}", (table - mean) @ keep)
        print(f"| centred, {count} principal directions removed | {score(folder, args.lang, pud)} |", flush=True)


if __name__ == "__main__":
    main()
