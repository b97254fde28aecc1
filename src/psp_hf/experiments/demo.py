"""`make demo`: the main job end to end on the real data in PSP_DATA, in about 15 minutes on 2 CPU cores.

Build the English distillation corpus (every evaluation sentence removed), label a sample of it with the teacher
(all-MiniLM-L6-v2 through ONNX Runtime, int8 weights), distil the teacher into a 384-d table, train a P-SP model on
the Flickr30k caption pairs beside it, write the untrained table as the floor, evaluate the three on STS 2012-2016,
STS-B and SICK-R in one table, then embed and score real sentences with the distilled model. Outputs land in
./demo_out (override with PSP_DEMO_OUT). The corpus and its labels are kept and reused by a rerun (labelling resumes
where a killed run stopped); the models are retrained. `PSP_DEMO_SENTENCES` sets how many corpus sentences are
labelled (`PSP_DEMO_POOL`, its name before the corpus was renamed, still works).

Each step shows the `psp` command that does it (on stderr, with the other status lines); the table of the three
models and the list of outputs are the demo's result, on stdout. The two training steps run in this process
(`TrainingArguments` and `train()`); the others run those commands, so the demo is also a walk-through of the CLI.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ..data_folder import data_dir
from ..io.reading import iter_tsv
from ..logs import write_result
from ..training.model.initial_tables import save_untrained_like

logger = logging.getLogger(__name__)


def _run(step: str, argv: list[str]) -> None:
    logger.info(f"\n== {step}\n$ {' '.join(argv)}")
    start = time.perf_counter()
    result = subprocess.run(argv)
    if result.returncode:
        # The step printed its own error; a traceback from here would only bury it.
        sys.exit(result.returncode)
    logger.info(f"   ({time.perf_counter() - start:.1f} s)")


def _train(step: str, settings: dict) -> None:
    """Train in this process (`psp_hf.training.train`), showing the `psp train` command line that does the same."""
    from ..training import TrainingArguments, train
    from ..training.arguments.command_line import command_line, with_flags

    arguments = with_flags(TrainingArguments(**settings), ())  # no flags on top: checked as psp train checks
    logger.info(f"\n== {step}\n$ psp train {' '.join(command_line(arguments))}")
    start = time.perf_counter()
    train(arguments)
    logger.info(f"   ({time.perf_counter() - start:.1f} s)")


def _fresh(model: Path) -> Path:
    if model.exists():
        # psp train refuses an output folder that holds a run (it would be a --resume); the demo starts afresh.
        logger.info(f"demo: replacing the previous demo model in {model}")
        shutil.rmtree(model)
    return model


def _print_summary(results: Path, seconds: float) -> None:
    import json

    report = json.loads(results.read_text(encoding="utf-8"))
    lines = [
        f"\n== the three models, Pearson x100 (STS12-16: the papers' protocol); demo took {seconds / 60:.1f} min\n",
        "| model | STS12-16 | STS-B test | SICK-R test |\n|---|---|---|---|",
    ]
    for entry in report["models"]:
        results_of = entry["results"]
        lines.append(
            f"| {entry['model']['name']} | {entry['summary']['sts12-16']['pearson_mean']:.2f} | "
            f"{results_of['stsb']['test']['pearson']:.2f} | {results_of['sickr']['test']['pearson']:.2f} |"
        )
    write_result("\n".join(lines))


def corpus_folder(out: Path) -> Path:
    """Where the demo keeps its distillation corpus: `OUT/distill-corpus`, or `OUT/pool`, the folder a demo of an
    earlier version built (reused, with the labels made from it, rather than built again)."""
    current, old = out / "distill-corpus", out / "pool"
    if not (current / "sentences.parquet").is_file() and (old / "sentences.parquet").is_file():
        return old
    return current


def labelled_sentences(environ: Mapping[str, str]) -> str:
    """How many corpus sentences the demo labels: $PSP_DEMO_SENTENCES, else the older $PSP_DEMO_POOL, else 150,000."""
    return environ.get("PSP_DEMO_SENTENCES") or environ.get("PSP_DEMO_POOL") or str(DEMO_LABELLED_SENTENCES)


def main() -> int:
    """Run the demo; a bad setting or input ends it with one `psp: error:` line, as the commands do."""
    from ..errors import PSPInputError
    from ..logs import show_on_stderr

    show_on_stderr()  # the in-process training steps report as `psp train` does
    try:
        return _demo()
    except PSPInputError as error:
        logger.error("psp: error: %s", error)
        return 2


def _demo() -> int:
    data = data_dir()
    if not (data / "sts").is_dir():
        logger.error(
            f"demo: no data folder at {data}. Fetch what the demo reads from the Hugging Face Hub (a few minutes, "
            f"resumable) with\n\n    psp data fetch --for demo -o {data}\n\nor set PSP_DATA to the shared data folder."
        )
        return 2
    out = Path(os.environ.get("PSP_DEMO_OUT", "demo_out"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    size = labelled_sentences(os.environ)
    psp = [sys.executable, "-m", "psp_hf.cli"]
    corpus, labels = corpus_folder(out), out / "teacher-labels"
    if not (corpus / "sentences.parquet").is_file():
        _run(
            "build the English distillation corpus: the data folder's non-evaluation text and Wikipedia, evaluation "
            "sentences removed",
            [*psp, "prepare", "distill-corpus", "-o", str(corpus), "--no-registry"],
        )
    _run(
        f"label the corpus's first {int(size):,} sentences with all-MiniLM-L6-v2 (ONNX Runtime, int8; resumable)",
        [*psp, "prepare", "label", "--corpus", str(corpus), "-o", str(labels), "--threads", "2"]
        + ["--max-sentences", size],
    )
    distilled = _fresh(out / "p-sp-en-distilled")
    _train(
        "distil the teacher into a 384-d table",
        {"teacher_cache": str(labels), "output_dir": str(distilled), **DEMO_DISTILL_SETTINGS},
    )
    captions = _fresh(out / "p-sp-en-flickr")
    pairs = data / "paraphrase" / "en" / "flickr30k-captions" / "train.pairs.tsv.gz"
    _train(
        "train a P-SP model on the Flickr30k caption pairs (300 mini-batches of 128 pairs, same tokenizer and dim)",
        {"data": [str(pairs)], "output_dir": str(captions), "tokenizer": str(distilled), **DEMO_PAIRS_SETTINGS},
    )
    untrained = out / "p-sp-en-untrained"
    shutil.rmtree(untrained, ignore_errors=True)
    save_untrained_like(distilled, untrained)
    _run(
        "evaluate the untrained table, the caption model and the distilled model on STS 2012-2016, STS-B, SICK-R",
        [*psp, "eval", "-m", str(untrained), str(captions), str(distilled), "--tasks", *DEMO_EVAL_TASKS]
        + ["--output", str(out / "results.json")],
    )
    sentences = out / "sentences.txt"
    sts_pairs = data / "sts" / "stsbenchmark" / "test.tsv"
    with open(sentences, "w", encoding="utf-8") as sink:
        sink.writelines(row[5] + "\n" for _, row in iter_tsv(sts_pairs, header=True))
    embeddings = out / "sts-b.npy"
    _run(
        "embed the STS-B test sentences with the distilled model",
        [*psp, "embed", str(sentences), "-m", str(distilled), "-o", str(embeddings)],
    )
    _run(
        "score the STS-B test pairs",
        [*psp, "score", str(sts_pairs), "-m", str(distilled), "--columns", "6,7", "--header"]
        + ["-o", str(out / "scored.tsv")],
    )
    _print_summary(out / "results.json", time.perf_counter() - started)
    write_result("\n".join([f"\nDemo outputs in {out}:", *(f"  {path}" for path in sorted(out.iterdir()))]))
    return 0


# Kept beside main() so the README can point at one place.
DEMO_LABELLED_SENTENCES = 150_000
# 75,000 pieces: STS-B dev 84.95 against 84.44 for 30,000 (results/english.md, "The demo's vocabulary").
DEMO_DISTILL_SETTINGS = {
    "dim": 384, "vocab_size": 75000, "lr": 0.01, "init_std": 0.1, "distill_weight": 1.0, "distill_batch_size": 512,
    "epochs": 10, "threads": 2,
}  # fmt: skip
DEMO_PAIRS_SETTINGS = {"dim": 384, "max_steps": 300, "megabatch_size": 10, "threads": 2}
DEMO_EVAL_TASKS = ["sts12-16", "stsb", "sickr"]

if __name__ == "__main__":
    sys.exit(main())
