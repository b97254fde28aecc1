"""Training under bad input and faults: full disk, SIGTERM, stale temporaries, wrong --lang, malformed data,
torn metrics, corrupt checkpoints and unusable arguments. Each ends in one `psp: error:` line (or a clean stop)."""

import errno
import gzip
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from psp_hf.training.loop.checkpoint import CheckpointStore, read_checkpoint_state

REPO = Path(__file__).resolve().parents[2]
WORD_LIST = (
    "man woman child dog cat bird horse boy girl runs walks jumps sits plays eats reads watches holds street park "
    "beach field river snow water ball bike car guitar book red blue green big small old young happy"
)
WORDS = WORD_LIST.split()
GERMAN_LIST = (
    "der die das ein eine mann frau kind hund katze läuft spielt sitzt im auf dem strand park fluss schnee "
    "wasser ball fahrrad auto gitarre buch rot blau grün groß klein alt jung glücklich und mit"
)
GERMAN = GERMAN_LIST.split()


def english_pairs(path: Path, n: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    lines = ["sentence1\tsentence2"]
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 9))]
        other = words[:]
        rng.shuffle(other)
        lines.append(f"a {' '.join(words)}\tthe {' '.join(other)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def german_english(path: Path, n: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    lines = ["de\ten"]
    for _ in range(n):
        german = " ".join(rng.choice(GERMAN) for _ in range(rng.randint(5, 9)))
        english = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 9)))
        lines.append(f"der {german} ist schön\tthe {english} is nice")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory) -> Path:
    from psp_hf.tokenization.pieces import train_tokenizer

    folder = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer([f"a {word} the {word}s" for word in WORDS + GERMAN] * 3, vocab_size=160, output_dir=folder)
    return folder


def small_run(pairs: Path, tokenizer: Path, *extra: str) -> list[str]:
    return [
        "--data",
        str(pairs),
        "--tokenizer",
        str(tokenizer),
        "--dim",
        "16",
        "--batch-size",
        "8",
        "--megabatch-size",
        "2",
        "--megabatch-anneal",
        "2",
        "--dev",
        "none",
        "--threads",
        "1",
        "--keep",
        "last",
        "--shuffle-buffer",
        "50",
        "--log-every",
        "1",
        "--quiet",
        *extra,
    ]


def metrics(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "training" / "metrics.jsonl").read_text().splitlines()]


def one_error_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("psp: error:")]
    assert len(lines) == 1, err
    return lines[0]


# ----------------------------------------------------------------------------------- item 2: full disk
def test_full_disk_during_a_checkpoint_keeps_the_previous_one(tmp_path, tiny_tokenizer, train_here, monkeypatch):
    pairs = english_pairs(tmp_path / "pairs.tsv", 200)
    common = small_run(pairs, tiny_tokenizer, "--save-every", "4", "--epochs", "2")
    reference = tmp_path / "reference"
    assert train_here(*common, "-o", str(reference))[0] == 0

    out = tmp_path / "full"
    pointer = out / "training" / "checkpoint.json"
    real_save = torch.save

    def save_until_a_checkpoint_exists(obj, f, *args, **kwargs):
        if pointer.is_file():  # the disk fills up after the first checkpoint
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save_until_a_checkpoint_exists)
    code, err = train_here(*common, "-o", str(out))
    monkeypatch.undo()
    assert code == 2
    line = one_error_line(err)
    first = CheckpointStore(out / "training").folder()
    assert "cannot write checkpoint" in line and ".checkpoint-tmp-" in line and "No space left on device" in line
    assert f"the previous checkpoint {first} is kept" in line
    assert not list((out / "training").glob(".checkpoint-tmp-*"))  # the half-written folder is gone
    assert read_checkpoint_state(out / "training")["step"] == 4
    # The kept checkpoint continues to the same weights as an uninterrupted run.
    code, err = train_here(*common, "-o", str(out), "--resume")
    assert code == 0, err
    expected, got = load_file(reference / "model.safetensors"), load_file(out / "model.safetensors")
    assert torch.equal(expected["embeddings.weight"], got["embeddings.weight"])


# ------------------------------------------------------------------------- item 3: SIGTERM and stale files
@pytest.mark.slow
def test_sigterm_during_a_checkpoint_removes_its_temporaries_and_resumes(tmp_path, tiny_tokenizer, train_here):
    pairs = english_pairs(tmp_path / "pairs.tsv", 600)
    # A wide table makes each checkpoint write take long enough to be caught in the middle.
    common = small_run(pairs, tiny_tokenizer, "--save-every", "3", "--dim", "30000", "--log-every", "50")
    out = tmp_path / "killed"
    training = out / "training"
    process = subprocess.Popen(
        [sys.executable, str(REPO / "train.py"), *common, "-o", str(out)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 240
    caught = False
    while process.poll() is None and time.time() < deadline:
        if (training / "checkpoint.json").is_file() and list(training.glob(".checkpoint-tmp-*")):
            caught = True
            break
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert caught, "no checkpoint write was caught in progress"
    assert process.returncode == 128 + signal.SIGTERM, err
    assert "stopped by SIGTERM" in err and "Traceback" not in err
    assert not list(training.glob(".checkpoint-tmp-*")) and not list(out.glob(".export-*"))
    step = read_checkpoint_state(training)["step"]
    assert step > 0

    # A SIGKILLed run leaves temporaries that nothing removes then: the next run finds them by name.
    stale = [training / ".checkpoint-tmp-99", training / "checkpoint-77", out / ".export-abcd"]
    for folder in stale:
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"x" * 1000)
    (training / ".metrics.jsonl.k2j3.tmp").write_text("{}")
    code, err = train_here(*common, "-o", str(out), "--resume", "--no-quiet", "--max-steps", str(step + 1))
    assert code == 0, err
    assert all(not path.exists() for path in stale) and not (training / ".metrics.jsonl.k2j3.tmp").exists()
    assert "left by an earlier run that was killed" in err
    assert not list(out.glob(".export-*")) and (out / "model.safetensors").is_file()


# ------------------------------------------------------------------------------------ item 4: --lang
def test_declared_language_is_checked_against_the_data(tmp_path, tiny_tokenizer, train_here):
    bitext = german_english(tmp_path / "de-en.tsv", 120)
    code, err = train_here(*small_run(bitext, tiny_tokenizer), "--lang", "fr", "-o", str(tmp_path / "fr"))
    assert code == 2
    line = one_error_line(err)
    assert "--lang fr" in line and "de, en" in line and "--lang de" in line
    assert not (tmp_path / "fr").exists()  # refused before anything was written

    english = english_pairs(tmp_path / "en.tsv", 120)
    code, err = train_here(*small_run(english, tiny_tokenizer), "--lang", "de", "-o", str(tmp_path / "de"))
    assert code == 2
    line = one_error_line(err)
    assert "--lang de" in line and "does not look like de" in line and "finds en" in line

    # The right declaration trains (and the card is the German one).
    out = tmp_path / "ok"
    code, err = train_here(*small_run(bitext, tiny_tokenizer), "--lang", "de", "--max-steps", "2", "-o", str(out))
    assert code == 0, err
    assert "p-sp-de" in (out / "README.md").read_text()


# ------------------------------------------------------------------------------ item 5: malformed data
def _with_bad_line(path: Path, bad: bytes, at: int = 30) -> Path:
    lines = english_pairs(path, 60).read_bytes().split(b"\n")
    lines.insert(at, bad)
    path.write_bytes(b"\n".join(lines))
    return path


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (b"only one field", "expected 2 tab-separated fields (as in the header), got 1"),
        (b"one\ttwo\tthree", "expected 2 tab-separated fields (as in the header), got 3"),
        (b"caf\xe9\tbad bytes", "not valid UTF-8"),
    ],
)
def test_malformed_training_lines_name_file_and_line_or_are_skipped(tmp_path, tiny_tokenizer, train_here, bad, message):
    pairs = _with_bad_line(tmp_path / "pairs.tsv", bad)
    code, err = train_here(*small_run(pairs, tiny_tokenizer), "-o", str(tmp_path / "stop"))
    assert code == 2
    assert f"{pairs}:31: {message}" in one_error_line(err)

    out = tmp_path / "skip"
    code, err = train_here(*small_run(pairs, tiny_tokenizer), "--skip-bad-lines", "-o", str(out))
    assert code == 0, err
    assert f"skipped bad line: {pairs}:31:" in err
    counted = [record for record in metrics(out) if record["event"] == "bad_lines"]
    assert counted and counted[0]["count"] == 1
    assert metrics(out)[-1]["pairs_seen"] == 60  # every good pair was trained on


def test_truncated_gzip_names_the_last_good_line(tmp_path, tiny_tokenizer, train_here):
    text = english_pairs(tmp_path / "pairs.tsv", 3000).read_bytes()
    packed = gzip.compress(text)
    truncated = tmp_path / "pairs.tsv.gz"
    truncated.write_bytes(packed[: len(packed) // 2])
    code, err = train_here(*small_run(truncated, tiny_tokenizer), "-o", str(tmp_path / "gz"))
    assert code == 2
    line = one_error_line(err)
    assert f"{truncated}: truncated or corrupt after line" in line
    code, err = train_here(*small_run(truncated, tiny_tokenizer), "--skip-bad-lines", "-o", str(tmp_path / "gz-skip"))
    assert code == 0, err
    assert "the rest of the file is skipped" in err


# -------------------------------------------------------------------------- item 6: metrics and resume
def test_torn_metrics_line_and_lines_past_the_checkpoint_are_dropped_on_resume(tmp_path, tiny_tokenizer, train_here):
    pairs = english_pairs(tmp_path / "pairs.tsv", 120)
    common = small_run(pairs, tiny_tokenizer, "--save-every", "100")
    out = tmp_path / "run"
    assert train_here(*common, "-o", str(out), "--max-steps", "4")[0] == 0
    log = out / "training" / "metrics.jsonl"
    with open(log, "a", encoding="utf-8") as handle:  # what a run killed after step 4's checkpoint leaves
        handle.write(json.dumps({"event": "train", "step": 5, "loss": 9.0}) + "\n")
        handle.write('{"event": "train", "step": 6, "lo')  # killed in the middle of a write
    code, err = train_here(*common, "-o", str(out), "--resume", "--no-quiet")
    assert code == 0, err
    assert "dropped 1 torn line(s)" in err
    records = metrics(out)  # every line parses
    steps = [record["step"] for record in records if record["event"] == "train"]
    assert steps == sorted(set(steps)) and steps[-1] == records[-1]["step"]
    assert all(record.get("loss") != 9.0 for record in records)


def test_a_fresh_run_drops_the_log_of_a_run_killed_before_its_first_checkpoint(tmp_path, tiny_tokenizer, train_here):
    pairs = english_pairs(tmp_path / "pairs.tsv", 40)
    out = tmp_path / "run"
    (out / "training").mkdir(parents=True)
    (out / "training" / "metrics.jsonl").write_text('{"event": "train", "step": 1, "loss": 7.0}\n{"event": "tr')
    code, err = train_here(*small_run(pairs, tiny_tokenizer), "-o", str(out))
    assert code == 0, err
    assert all(record.get("loss") != 7.0 for record in metrics(out))


# ---------------------------------------------------------------- item 7: corrupt checkpoint, arguments
@pytest.mark.parametrize("damage", ["truncate-weights", "garble-pointer", "remove-rng"])
def test_corrupt_checkpoint_is_a_clear_error(tmp_path, tiny_tokenizer, train_here, damage):
    pairs = english_pairs(tmp_path / "pairs.tsv", 40)
    common = small_run(pairs, tiny_tokenizer)
    out = tmp_path / "run"
    assert train_here(*common, "-o", str(out), "--max-steps", "2")[0] == 0
    training = out / "training"
    folder = CheckpointStore(training).folder()
    if damage == "truncate-weights":
        weights = folder / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:100])
    elif damage == "garble-pointer":
        (training / "checkpoint.json").write_text('{"folder": ')
    else:
        (folder / "random_states_0.pkl").unlink()
    code, err = train_here(*common, "-o", str(out), "--resume")
    assert code == 2
    line = one_error_line(err)
    assert f"the checkpoint in {training} is unusable" in line and f"Remove {training}" in line


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--batch-size", "0"], "--batch-size must be at least 1, got 0"),
        (["--epochs", "0"], "--epochs must be at least 1"),
        (["--lr", "-1"], "--lr must be positive"),
        (["--save-every", "-5"], "--save-every must be >= 0"),
    ],
)
def test_bad_numbers_are_refused_before_any_work(tmp_path, tiny_tokenizer, train_here, flags, message):
    pairs = english_pairs(tmp_path / "pairs.tsv", 10)
    out = tmp_path / "never"
    code, err = train_here(*small_run(pairs, tiny_tokenizer), *flags, "-o", str(out))
    assert code == 2 and message in one_error_line(err)
    assert not out.exists()  # nothing was written


def test_unwritable_output_dir_is_refused_before_any_work(tmp_path, tiny_tokenizer, train_here):
    pairs = english_pairs(tmp_path / "pairs.tsv", 10)
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    code, err = train_here(*small_run(pairs, tiny_tokenizer), "-o", str(a_file))
    assert code == 2 and "exists and is not a folder" in one_error_line(err)
    code, err = train_here(*small_run(pairs, tiny_tokenizer), "-o", str(a_file / "model"))
    assert code == 2 and f"--output {a_file / 'model'}: cannot write there ({a_file} is not a folder)" in (
        one_error_line(err)
    )
    assert a_file.read_text() == "x"


def test_a_checkpoint_of_the_earlier_format_is_named(tmp_path, tiny_tokenizer, train_here):
    pairs = english_pairs(tmp_path / "pairs.tsv", 10)
    out = tmp_path / "old"
    (out / "training").mkdir(parents=True)
    (out / "training" / "checkpoint.pt").write_bytes(b"an earlier single-file checkpoint")
    code, err = train_here(*small_run(pairs, tiny_tokenizer), "-o", str(out), "--resume")
    assert code == 2 and "earlier psp-hf version, which cannot be resumed" in one_error_line(err)
    code, err = train_here(*small_run(pairs, tiny_tokenizer), "-o", str(out))
    assert code == 2 and "already holds a training run" in one_error_line(err)


def test_full_disk_while_logging_is_one_error_line(tmp_path, tiny_tokenizer, train_here, monkeypatch):
    import builtins

    pairs = english_pairs(tmp_path / "pairs.tsv", 40)
    out = tmp_path / "run"
    real_open = builtins.open

    def open_without_space(file, mode="r", *args, **kwargs):
        if str(file).endswith("metrics.jsonl") and "a" in mode:
            raise OSError(errno.ENOSPC, "No space left on device", str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", open_without_space)
    code, err = train_here(*small_run(pairs, tiny_tokenizer), "-o", str(out))
    monkeypatch.undo()
    assert code == 2
    assert f"cannot write {out / 'training' / 'metrics.jsonl'}: No space left on device" in one_error_line(err)


def test_issue_reproductions_on_the_real_data(tmp_path, train_here):
    from psp_hf.data_folder import data_dir

    root = data_dir()
    bitext = root / "bitext" / "multi30k" / "de-en" / "train.tsv.gz"
    captions = root / "paraphrase" / "en" / "flickr30k-captions" / "train.pairs.tsv.gz"
    if not (bitext.is_file() and captions.is_file()):
        pytest.skip(f"real data not found at {root}; set PSP_DATA to the shared data folder")
    code, err = train_here("--data", str(bitext), "--lang", "fr", "-o", str(tmp_path / "fr"), "--quiet")
    assert code == 2 and "--lang fr" in one_error_line(err) and "de" in one_error_line(err)
    assert not (tmp_path / "fr" / "README.md").exists()
    code, err = train_here("--data", str(captions), "--lang", "de", "-o", str(tmp_path / "de"), "--quiet")
    assert code == 2 and "does not look like de" in one_error_line(err) and "finds en" in one_error_line(err)
