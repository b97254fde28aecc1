"""The encoder table: every encoder of the papers trained on the same English pairs, evaluated the same way.

Rows: P-SP (sentencepiece mean), WORD and TRIGRAM averaging, WORD max, WORD + projection, the recurrent WORD
encoders (LSTM, LSTM without output gate, BLSTM, GRAN; scrambling 0.3) and WORD,TRIGRAM added and concatenated
(the ParaNMT-50M release). Each row is one `psp train` run (in this process) on the first `--pairs` caption pairs
(`--recurrent-pairs` for the recurrent rows, which cost far more per pair on a CPU), one epoch, `--dim`, then
`psp eval`'s STS protocol. Columns: STS 2012–2016 average and STS-B test (Pearson x100), sentences/s on
`--threads` threads (`--speed-sentences` STS sentences), parameters, training minutes, and STS-B dev before
training (the random start) and after.

    python bench/encoders.py                       # results/encoders.md's table (about 25-40 minutes on 2 busy cores)
    python bench/encoders.py --rows word-mean,word-gran --pairs 5000 --recurrent-pairs 1000   # a quick look

The recurrent rows start from word vectors, as the papers' did (PARAGRAM-SL999 there): by default the table
of the WORD (mean) row, written as a word-vector file (`--recurrent-init random` for a random table; from
random, 6,400 pairs took an LSTM's STS-B dev from 37.7 to 5.1 here).

With `--teacher-cache DIR` (default: /work/cache/teacher-minilm when it exists), the averaging rows also get
the distillation loss (`--distill-weight 1`); the table says which rows used it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from distill_table import sentences_per_second, speed_sentences  # noqa: E402

DATA = Path("/work/shared/data/paraphrase/en/flickr30k-captions/train.pairs.tsv.gz")
DEFAULT_TEACHER = Path("/work/cache/teacher-minilm")
RECURRENT = ("lstm", "lstm_no_output_gate", "blstm", "gran")

# name -> (label, training flags)
ROWS = {
    "psp": ("P-SP (sentencepiece pieces, mean)", ["--units", "piece", "--vocab-size", "20000"]),
    "word-mean": ("WORD (mean)", ["--units", "word", "--encoder-type", "mean"]),
    "trigram-mean": ("TRIGRAM (mean)", ["--units", "trigram", "--encoder-type", "mean"]),
    "word-max": ("WORD (max)", ["--units", "word", "--encoder-type", "max"]),
    "word-projection": ("WORD + projection", ["--units", "word", "--encoder-type", "projection"]),
    "word-lstm": ("LSTM (WORD)", ["--units", "word", "--encoder-type", "lstm"]),
    "word-lstm_no_output_gate": ("LSTM, no output gate", ["--units", "word", "--encoder-type", "lstm_no_output_gate"]),
    "word-blstm": ("BLSTM (WORD)", ["--units", "word", "--encoder-type", "blstm"]),
    "word-gran": ("GRAN (WORD)", ["--units", "word", "--encoder-type", "gran"]),
    "word+trigram-add": (
        "WORD + TRIGRAM (added)",
        ["--units", "word", "--combination", "add", "--second-units", "trigram", "--encoder-type", "mean"],
    ),
    "word+trigram-concat": (
        "WORD, TRIGRAM (concatenated)",
        ["--units", "word", "--combination", "concat", "--second-units", "trigram", "--encoder-type", "mean"],
    ),
}


def write_pairs(source: Path, count: int, output: Path) -> Path:
    """The first `count` pairs of a headed caption-pairs TSV as a two-column TSV."""
    output.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rt", encoding="utf-8") as handle, open(output, "w", encoding="utf-8") as out:
        header = handle.readline().rstrip("\n").split("\t")
        first, second = header.index("sentence1"), header.index("sentence2")
        out.write("sentence1\tsentence2\n")
        for written, line in enumerate(handle):
            if written >= count:
                break
            fields = line.rstrip("\n").split("\t")
            out.write(f"{fields[first]}\t{fields[second]}\n")
    return output


def word_vectors_file(folder: Path, output: Path) -> Path:
    """The table of a WORD model folder as a word2vec text file (one word and its vector a line)."""
    import psp_hf

    encoder = psp_hf.load(folder)
    table = encoder._weights()[0]
    vocab = encoder.tokenizer.get_vocab()
    with open(output, "w", encoding="utf-8") as handle:
        handle.write(f"{len(vocab)} {table.shape[1]}\n")
        for word, index in sorted(vocab.items(), key=lambda item: item[1]):
            if word not in ("<unk>", "<pad>"):
                handle.write(word + " " + " ".join(f"{value:.5f}" for value in table[index]) + "\n")
    return output


def train_row(name: str, flags: list[str], data: Path, folder: Path, args, teacher: Path | None) -> dict:
    """Train one row with `psp train` in this process; returns the run's facts."""
    from psp_hf.cli import main

    recurrent = any(kind in flags for kind in RECURRENT)
    common = ["--data", str(data), "--output-dir", str(folder), "--dim", str(args.dim), "--epochs", "1"]
    common += ["--eval-every", "0", "--keep", "last", "--quiet", "--threads", str(args.threads), "--seed", "0"]
    common += ["--min-count", str(args.min_count), "--save-every", "0", "--init-std", str(args.init_std)]
    # Rows with a learned head (projection, recurrent) diverged at lr 0.01: WORD + projection fell from STS-B dev
    # 43.5 to -1.7 on 20,000 pairs.
    common += ["--lr", str(args.head_lr if recurrent or "projection" in flags else args.lr)]
    if recurrent:
        common += ["--scramble-rate", "0.3"]
        if args.recurrent_init == "word-mean":
            vectors = args.work / "word-mean-vectors.txt"
            if not vectors.is_file():
                if not (args.work / "word-mean" / "config.json").is_file():
                    raise SystemExit("--recurrent-init word-mean: train the word-mean row first (list it earlier)")
                word_vectors_file(args.work / "word-mean", vectors)
            common += ["--init", "word-vectors", "--init-vectors", str(vectors)]
    if teacher is not None and not recurrent:
        common += ["--teacher-cache", str(teacher), "--distill-weight", "1"]
    if not (folder / "config.json").is_file():
        start = time.perf_counter()
        code = main(["train", *common, *flags])
        if code != 0:
            raise SystemExit(f"{name}: psp train failed ({code})")
        print(f"{name}: trained in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    dev = [json.loads(line) for line in (folder / "training" / "metrics.jsonl").read_text().splitlines()]
    evals = [record for record in dev if record.get("event") == "eval"]
    end = next(record for record in dev if record.get("event") == "end")
    run = json.loads((folder / "training" / "args.json").read_text())  # what the run used (it may be reused)
    distilled = bool(run.get("teacher_cache")) and run.get("distill_weight", 0) > 0
    return {
        "untrained_dev": evals[0]["dev_stsb_pearson"],
        "trained_dev": evals[-1]["dev_stsb_pearson"],
        "train_minutes": end["train_seconds"] / 60,
        "pairs": end["pairs_seen"],
        "distilled": distilled,
        "init": "WORD (mean) vectors" if run.get("init") == "word-vectors" else "random",
    }


def evaluate_row(folder: Path, speed: list[str], threads: int) -> dict:
    """STS12-16 average, STS-B test, parameters and sentences/s of a trained folder."""
    import psp_hf
    from psp_hf.evaluation import evaluate_model, load_encoder

    report = evaluate_model(load_encoder(str(folder)), ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb"))
    encoder = psp_hf.load(folder)
    parameters = sum(p.numel() for p in encoder.model.parameters())

    class Threaded:  # encode on `threads` threads (psp's batch threads; torch ops use the same count)
        def encode(self, sentences):
            return encoder.encode(sentences, num_threads=threads)

    return {
        "sts12-16": report["summary"]["sts12-16"]["pearson_mean"],
        "stsb_test": report["results"]["stsb"]["test"]["pearson"],
        "parameters": parameters,
        "sentences_per_s": sentences_per_second(Threaded(), speed),
    }


def markdown(rows: list[dict]) -> str:
    lines = [
        "| encoder | dim | pairs | STS12-16 avg | STS-B test | sentences/s | parameters | training min "
        "| STS-B dev untrained → trained |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        mark = (" ¹" if row["distilled"] else "") + (" ²" if row.get("init", "random") != "random" else "")
        lines.append(
            f"| {row['label']}{mark} | {row['dim']} | {row['pairs']:,} | {row['sts12-16']:.2f} "
            f"| {row['stsb_test']:.2f} "
            f"| {row['sentences_per_s']:,.0f} | {row['parameters'] / 1e6:.2f}M | {row['train_minutes']:.1f} "
            f"| {row['untrained_dev']:.2f} → {row['trained_dev']:.2f} |"
        )
    if any(row["distilled"] for row in rows):
        lines.append("\n¹ trained with the distillation loss on the teacher cache as well (`--distill-weight 1`).")
    if any(row.get("init", "random") != "random" for row in rows):
        lines.append("\n² embeddings initialised from the WORD (mean) row's table (`--init word-vectors`).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="headed caption-pairs TSV (sentence1, sentence2)")
    parser.add_argument("--pairs", type=int, default=20_000, help="training pairs of the averaging rows")
    parser.add_argument("--recurrent-pairs", type=int, default=3_200, help="training pairs of the recurrent rows")
    parser.add_argument("--recurrent-init", choices=("word-mean", "random"), default="word-mean")
    parser.add_argument("--dim", type=int, default=300)
    # A small random table moves further per Adam step: on 10,000 pairs, WORD (mean) went from STS-B dev 42.7 to
    # 58.3 with these two, and to 43.6 with P-SP's N(0, 1) table and lr 0.001.
    parser.add_argument("--init-std", type=float, default=0.1, help="std of the random tables")
    parser.add_argument("--lr", type=float, default=0.01, help="Adam learning rate of the averaging rows")
    parser.add_argument("--head-lr", type=float, default=0.001, help="Adam learning rate of projection/recurrent rows")
    parser.add_argument("--min-count", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--speed-sentences", type=int, default=5_000)
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated subset of: {', '.join(ROWS)}")
    parser.add_argument("--teacher-cache", type=Path, default=DEFAULT_TEACHER if DEFAULT_TEACHER.is_dir() else None)
    parser.add_argument("--no-teacher", action="store_true", help="no distillation even if a teacher cache exists")
    parser.add_argument("--work", type=Path, default=Path("bench-encoders"), help="runs are kept (and reused) here")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    teacher = None if args.no_teacher else args.teacher_cache
    names = [name.strip() for name in args.rows.split(",") if name.strip()]
    unknown = [name for name in names if name not in ROWS]
    if unknown:
        parser.error(f"unknown rows: {', '.join(unknown)}")
    speed = speed_sentences(None, args.speed_sentences)
    rows = []
    for name in names:
        label, flags = ROWS[name]
        recurrent = any(kind in flags for kind in RECURRENT)
        count = args.recurrent_pairs if recurrent else args.pairs
        data = args.work / f"pairs-{count}.tsv"
        if not data.is_file():
            write_pairs(args.data, count, data)
        row = {"row": name, "label": label, "dim": args.dim * (2 if "concat" in flags else 1)}
        row.update(train_row(name, flags, data, args.work / name, args, teacher))
        row.update(evaluate_row(args.work / name, speed, args.threads))
        print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
