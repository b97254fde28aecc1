"""Shared pieces of the fault tests (tests/faults/test_faults_*.py, test_fuzz.py): tiny inputs, in-process CLI runs and
the one-error-line check. Imported by name (tests/ is on sys.path; see conftest.py)."""

from __future__ import annotations

import contextlib
import io
import random
from pathlib import Path

WORDS = [
    "man",
    "woman",
    "child",
    "dog",
    "cat",
    "bird",
    "horse",
    "boy",
    "girl",
    "runs",
    "walks",
    "jumps",
    "sits",
    "plays",
    "eats",
    "reads",
    "watches",
    "holds",
    "street",
    "park",
    "beach",
    "field",
    "river",
    "snow",
    "water",
    "ball",
    "bike",
    "car",
    "guitar",
    "book",
    "red",
    "blue",
    "green",
    "big",
    "small",
    "old",
    "young",
    "happy",
]


def english_pairs(path: Path, n: int, seed: int = 0, header: bool = True) -> Path:
    """A TSV of `n` paraphrase-like pairs (word shuffles), with a header line."""
    rng = random.Random(seed)
    lines = ["sentence1\tsentence2"] if header else []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 9))]
        other = words[:]
        rng.shuffle(other)
        lines.append(f"a {' '.join(words)}\tthe {' '.join(other)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def build_tokenizer(folder: Path):
    """A tiny trained tokenizer, saved in `folder` (for --tokenizer); returns the tokenizer object."""
    from psp_hf.tokenization.pieces import train_tokenizer

    return train_tokenizer([f"a {word} the {word}s" for word in WORDS] * 3, vocab_size=120, output_dir=folder)


def build_model(folder: Path) -> Path:
    """A tiny psp model folder (16 dimensions)."""
    from psp_hf import PSPEncoder

    tokenizer = build_tokenizer(folder.parent / f"{folder.name}-tok")
    PSPEncoder.from_tokenizer(tokenizer, hidden_size=16, seed=1).save_pretrained(folder)
    return folder


def small_run(pairs: Path, tokenizer: Path | None, *extra: str) -> list[str]:
    """`psp train` arguments for a run of a few seconds (no --tokenizer when `tokenizer` is None)."""
    base = ["--data", str(pairs), "--dim", "16", "--batch-size", "8", "--megabatch-size", "2"]
    base += ["--megabatch-anneal", "2", "--dev", "none", "--threads", "1", "--keep", "last"]
    base += ["--shuffle-buffer", "50", "--log-every", "1", "--quiet"]
    if tokenizer is not None:
        base += ["--tokenizer", str(tokenizer)]
    else:
        base += ["--vocab-size", "60"]
    return [*base, *extra]


def trained_run(folder: Path, tokenizer: Path, train) -> tuple[list[str], Path, Path]:
    """A 2-step training run in `folder`/run (`train`: the tests' `train_here`): its command line without `-o`, its
    output folder and its checkpoint folder."""
    from psp_hf.training.loop.checkpoint import CheckpointStore

    common = small_run(english_pairs(folder / "pairs.tsv", 40), tokenizer)
    out = folder / "run"
    assert train(*common, "-o", str(out), "--max-steps", "2")[0] == 0
    return common, out, CheckpointStore(out / "training").folder()


def run_cli(*argv: str) -> tuple[int, str, str]:
    """`psp ARGV` in this process: (exit code, stdout, stderr); a traceback escaping main() is returned as text."""
    import traceback

    from psp_hf.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exit_:  # argparse errors
            code = exit_.code if isinstance(exit_.code, int) else 1
        except BaseException:  # noqa: BLE001 - what the user would see as a traceback
            traceback.print_exc()
            code = 1
    return code, out.getvalue(), err.getvalue()


def one_error_line(err: str) -> str:
    """The single `psp: error:` line of `err` (no traceback, exactly one such line)."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("psp: error:")]
    assert len(lines) == 1, err
    return lines[0]
