"""psp prepare end to end: the recipes on crafted rows, each filter switched off, scores, atomic and shuffled
output, the command line's errors, memory, kills, and evaluation sentences removed (the parts: test_prepare.py)."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from psp_hf.errors import PSPInputError


def _write(path, text: str | bytes):
    data = text.encode("utf-8") if isinstance(text, str) else text
    if str(path).endswith(".gz"):
        with gzip.open(path, "wb") as handle:
            handle.write(data)
    else:
        path.write_bytes(data)
    return path


CRAFTED = [
    # sentence1, sentence2, score: what happens to the pair
    ("A man is playing a red guitar on a small stage.", "Someone plays music for a crowd tonight.", "0.8"),  # kept
    ("Two dogs are running through deep snow.", "A pair of dogs race across a snowy field.", "0.9"),  # kept
    ("", "Someone plays music for a crowd tonight.", "0.8"),  # empty side
    ("Too short.", "Also short here.", "0.8"),  # length (< 5 tokens)
    ("The cat sleeps on the warm sofa all day.", "The cat sleeps on the warm sofa all night.", "0.95"),  # overlap
    ("someone plays music for a crowd tonight.", "a man is playing a red guitar on a small stage.", "0.8"),  # duplicate
    ("Ein Mann spielt auf der Bühne eine Gitarre.", "Jemand spielt heute Abend Musik für eine Menge.", "0.8"),
    ("A child eats a red apple in the kitchen.", "A kid is having some fruit at home.", "0.3"),  # score
]


def _crafted_file(tmp_path):
    text = "".join(f"{a}\t{b}\t{s}\n" for a, b, s in CRAFTED)
    return _write(tmp_path / "paranmt.txt", text)


def test_prepare_paraphrases_crafted_rows(tmp_path):
    from datasets import load_dataset

    from psp_hf.data.prepare import prepare_paraphrases

    out = tmp_path / "prepared"
    report = prepare_paraphrases([_crafted_file(tmp_path)], out, vocab_size=60, seed=1)
    removed = {step["name"]: step["removed"] for step in report["steps"]}
    assert removed == {"lowercase": 0, "empty": 1, "length": 1, "overlap": 1, "duplicate": 1, "evaluation": 0,
                       "language": 1, "score": 1}  # fmt: skip
    assert report["pairs_in"] == 8 and report["pairs_out"] == 2
    rows = list(load_dataset(str(out), split="train", streaming=True))
    assert sorted(row["sentence1"] for row in rows) == [
        "a man is playing a red guitar on a small stage.",
        "two dogs are running through deep snow.",
    ]
    assert all(set(row) == {"sentence1", "sentence2", "score", "overlap"} for row in rows)
    assert sorted(round(row["score"], 3) for row in rows) == [0.8, 0.9]
    # report files, histograms and card
    saved = json.loads((out / "report" / "report.json").read_text())
    assert saved["pairs_out"] == 2 and saved["histograms"]["score"]["counts"]
    for name in ("score", "overlap"):
        assert (out / "report" / f"{name}_histogram.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from huggingface_hub import DatasetCard

    card = (out / "README.md").read_text()
    metadata = DatasetCard.load(out / "README.md").data
    assert metadata.configs == [
        {"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*.parquet"}]}
    ]
    assert metadata.language == ["en"] and "paraphrase" in metadata.tags
    assert "| language | langid says the sides are en and en | 1 |" in card
    # tokenizer saved with the data
    from psp_hf.data.prepare import load_prepared_tokenizer

    tokenizer = load_prepared_tokenizer(out)
    assert tokenizer is not None and tokenizer.unk_token == "<unk>"
    assert tokenizer("A man").input_ids == tokenizer("a man").input_ids  # lowercasing tokenizer


def test_prepare_switches_each_filter_off(tmp_path):
    from psp_hf.data.prepare import prepare_paraphrases

    report = prepare_paraphrases(
        [_crafted_file(tmp_path)], tmp_path / "all", langid=False, score_filter=False, overlap_filter=False,
        length_filter=False, dedupe=False, lowercase=False, train_tokenizer=False, exclude_evaluation=False,
    )  # fmt: skip
    removed = {step["name"]: step["removed"] for step in report["steps"]}
    assert removed == {"lowercase": 0, "empty": 1, "length": 0, "overlap": 0, "duplicate": 0, "evaluation": 0,
                       "language": 0, "score": 0}  # fmt: skip
    assert report["pairs_out"] == 7
    assert report["steps"][0]["changed"] == 0
    assert not (tmp_path / "all" / "tokenizer").exists()


def test_prepare_needs_a_score_source(tmp_path):
    from psp_hf.data.prepare import prepare_paraphrases

    path = _write(tmp_path / "pairs.tsv", "sentence1\tsentence2\nA b c d e\tf g h i j\n")
    with pytest.raises(PSPInputError, match=r"pairs\.tsv: no score column .*--no-score-filter"):
        prepare_paraphrases([path], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_prepare_score_model_scores_are_psp_cosines(tmp_path):
    from psp_hf import PSPEncoder
    from psp_hf.data.prepare import prepare_paraphrases
    from psp_hf.tokenization.pieces import train_tokenizer

    sentences = [a for a, _, _ in CRAFTED] + [b for _, b, _ in CRAFTED]
    tokenizer = train_tokenizer([s for s in sentences if s] * 3, vocab_size=80)
    encoder = PSPEncoder.from_tokenizer(tokenizer, hidden_size=16, seed=0)
    encoder.save_pretrained(tmp_path / "model")
    path = _write(tmp_path / "pairs.tsv", "".join(f"{a}\t{b}\n" for a, b, _ in CRAFTED))
    report = prepare_paraphrases(
        [path], tmp_path / "out", score_model=tmp_path / "model", min_score=-1.0, max_score=1.0,
        langid=False, overlap_filter=False, train_tokenizer=False, shuffle=False,
    )  # fmt: skip
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "out" / "data").to_pylist()
    assert len(table) == report["pairs_out"] == 5  # empty side, short pair and duplicate removed
    first = [row["sentence1"] for row in table]
    second = [row["sentence2"] for row in table]
    expected = encoder.similarity_pairwise(encoder.encode(first), encoder.encode(second))
    np.testing.assert_allclose([row["score"] for row in table], expected, atol=1e-5)
    assert "psp model cosine" in report["steps"][-1]["description"]


def test_prepare_output_is_atomic(tmp_path):
    from psp_hf.data.prepare import prepare_paraphrases

    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("old")
    with pytest.raises(PSPInputError, match="already exists; pass --overwrite"):
        prepare_paraphrases([_crafted_file(tmp_path)], out, train_tokenizer=False)
    # A bad line halfway through: the old folder stays as it was and no temp folder is left behind.
    lines = [f"a b c d e {i}\tf g h i j {i}\t0.9\n".encode() for i in range(20)]
    lines[12] = b"broken \xff\tline\t0.9\n"
    bad = _write(tmp_path / "bad.txt", b"".join(lines))
    with pytest.raises(PSPInputError, match=r"bad\.txt:13: not valid UTF-8"):
        prepare_paraphrases([bad], out, overwrite=True, langid=False, batch_size=4, train_tokenizer=False)
    assert (out / "keep.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt", "out", "paranmt.txt"]
    # --skip-bad-lines: counted in the report, and the old folder is replaced.
    report = prepare_paraphrases(
        [bad], out, overwrite=True, langid=False, batch_size=4, train_tokenizer=False, skip_bad_lines=True
    )
    assert report["bad_lines"]["count"] == 1 and report["bad_lines"]["examples"][0].startswith(f"{bad}:13:")
    assert report["pairs_in"] == 19 and report["pairs_out"] == 19
    assert not (out / "keep.txt").exists()
    assert "| bad lines |" in (out / "README.md").read_text()


def test_shuffled_shards_hold_every_row_once_in_a_seeded_order(tmp_path):
    import pyarrow.parquet as pq

    from psp_hf.data.prepare import prepare_bitext

    rows = [(f"satz nummer {i} hier", f"sentence number {i} here") for i in range(500)]
    path = _write(tmp_path / "de-en.tsv", "de\ten\n" + "".join(f"{a}\t{b}\n" for a, b in rows))

    def run(name, **kwargs):
        prepare_bitext([path], "de", tmp_path / name, train_tokenizer=False, batch_size=64, **kwargs)
        shards = sorted((tmp_path / name / "data").glob("train-*.parquet"))
        return shards, [row["en"] for shard in shards for row in pq.read_table(shard).to_pylist()]

    shards, plain = run("plain", shuffle=False)
    assert plain == [b for _, b in rows] and len(shards) == 1
    shards, shuffled = run("shuffled", num_shards=3, seed=5)
    assert [s.name for s in shards] == [f"train-0000{i}-of-00003.parquet" for i in range(3)]
    assert sorted(shuffled) == sorted(plain) and shuffled != plain
    assert run("again", num_shards=3, seed=5)[1] == shuffled
    assert run("other", num_shards=3, seed=6)[1] != shuffled


def test_prepare_bitext_without_spaces_counts_characters(tmp_path):
    from psp_hf.data.prepare import prepare_bitext

    text = "zh\ten\n" + "".join(
        [
            "一个男人在街上弹吉他。\tA man plays guitar in the street.\n",  # kept
            "狗\tA dog runs.\n",  # 1 character: too short
            "两只狗在雪地里奔跑。\tTwo dogs run through the snow.\n",  # kept
            "两只狗在雪地里奔跑。\tTwo dogs run through the snow.\n",  # duplicate
            "一个男人在街上弹吉他。\tHi\n",  # English side: 1 word
        ]
    )
    path = _write(tmp_path / "zh-en.tsv", text)
    old_mask = os.umask(0o022)
    try:
        report = prepare_bitext([path], "zh", tmp_path / "out", vocab_size=40, langid=True)
    finally:
        os.umask(old_mask)
    # The folder follows the umask like any mkdir (not the 0700 of a temporary folder).
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o755
    removed = {step["name"]: step["removed"] for step in report["steps"]}
    assert removed == {"lowercase": 0, "empty": 0, "length": 2, "duplicate": 1, "evaluation": 0, "language": 0}
    assert report["columns"] == ["zh", "en"] and report["options"]["length_unit"] == "chars"
    assert report["tokenizer"]["trained_on"] == ["zh", "en"]
    card = (tmp_path / "out" / "README.md").read_text()
    assert "- zh\n- en" in card or "- en\n- zh" in card


def test_cli_prepare_reports_errors_with_file_and_line(tmp_path, capsys):
    from psp_hf.cli import main

    bad = _write(tmp_path / "bad.tsv", b"a b c d e\tf g h i j\t0.9\nx\xff\ty\t0.9\n")
    code = main(["prepare", "paraphrases", str(bad), "-o", str(tmp_path / "out"), "--no-tokenizer"])
    assert code == 2
    assert f"psp: error: {bad}:2: not valid UTF-8" in capsys.readouterr().err
    good = _crafted_file(tmp_path)
    code = main(["prepare", "paraphrases", str(good), "-o", str(tmp_path / "ok"), "--no-tokenizer",
                 "--no-langid", "--min-score", "0.5"])  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "pairs in: 8" in err and "removed by language: off" in err and "pairs out: 3" in err


@pytest.mark.slow
def test_memory_does_not_grow_with_the_input(tmp_path):
    import gc
    import tracemalloc

    from psp_hf.data.prepare import prepare_paraphrases

    def pairs_file(n: int):
        lines = (f"sentence number {i} about a dog\tanother sentence {i} about a cat\t0.8\n" for i in range(n))
        return _write(tmp_path / f"pairs-{n}.txt.gz", "".join(lines))

    def run(path) -> None:
        prepare_paraphrases(
            [path], tmp_path / "out", overwrite=True, shuffle=False, train_tokenizer=False, batch_size=500,
            langid=False,
        )  # fmt: skip

    def peak(path) -> int:
        gc.collect()  # garbage left by an earlier test must not count as this run's peak
        tracemalloc.start()
        try:
            run(path)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = pairs_file(1_000), pairs_file(10_000)
    run(small)  # warm-up outside tracemalloc: imports and caches
    growth = peak(large) - peak(small)
    # 9,000 more pairs (~1.6 MB as Python strings): only the duplicate filter's hashes (8 bytes a pair) may grow.
    assert growth < 500_000, growth


# ------------------------------------------------------------------------------------------------ bad input (CLI)


def _truncated_gz(path, lines: int = 3000):
    import random

    rng = random.Random(0)
    # Random words compress poorly, so half of the file holds only part of the lines.
    text = "".join(
        " ".join(f"w{rng.randrange(10**6)}" for _ in range(6)) + "\t" + " ".join(f"v{rng.randrange(10**6)}"
        for _ in range(6)) + "\t0.9\n"
        for _ in range(lines)
    )  # fmt: skip
    data = gzip.compress(text.encode())
    path.write_bytes(data[: len(data) // 2])
    return path


BAD_ROWS = {
    # name: (file contents, the message after FILE:LINE:)
    "short row": (b"a b c d e\tf g h i j\t0.9\nonly one field\nk l m n o\tp q r s t\t0.9\n", "2: expected 3 tab"),
    "extra column": (b"a b c d e\tf g h i j\t0.9\nk l m n o\tp q r s t\t0.9\tx\n", "2: expected 3 tab"),
    "invalid UTF-8": (b"a b c d e\tf g h i j\t0.9\nk l \xff n o\tp q r s t\t0.9\n", "2: not valid UTF-8"),
}


@pytest.mark.parametrize("name", [*BAD_ROWS, "truncated .gz"])
def test_cli_prepare_bad_rows_give_one_error_line_or_a_count(tmp_path, capsys, name):
    from psp_hf.cli import main

    if name == "truncated .gz":
        bad = _truncated_gz(tmp_path / "bad.tsv.gz")
    else:
        bad = _write(tmp_path / "bad.tsv", BAD_ROWS[name][0])
    argv = ["prepare", "paraphrases", str(bad), "--no-tokenizer", "--no-langid", "-q"]
    assert main([*argv, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"psp: error: {bad}:") and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists() and sorted(p.name for p in tmp_path.iterdir()) == [bad.name]
    if name == "truncated .gz":
        line = int(re.match(rf"psp: error: {re.escape(str(bad))}:(\d+): cannot read further", err).group(1))
        assert 1 < line < 3000
        expected_pairs = line - 1
    else:
        assert f"{bad}:{BAD_ROWS[name][1]}" in err
        expected_pairs = len(BAD_ROWS[name][0].splitlines()) - 1
    # --skip-bad-lines: the run goes on and the report counts the bad line.
    assert main([*argv, "-o", str(tmp_path / "out"), "--skip-bad-lines", "--no-overlap-filter"]) == 0
    report = json.loads((tmp_path / "out" / "report" / "report.json").read_text())
    assert report["bad_lines"]["count"] == 1 and report["bad_lines"]["examples"][0].startswith(f"{bad}:")
    assert report["pairs_in"] == expected_pairs


def test_cli_prepare_checks_the_output_and_inputs_before_reading(tmp_path, capsys, monkeypatch):
    import psp_hf.data.checks as checks
    from psp_hf.cli import main

    good = _crafted_file(tmp_path)
    a_file = _write(tmp_path / "file.txt", "keep me\n")
    locked = tmp_path / "locked"
    locked.mkdir()
    fifo = tmp_path / "pairs.fifo"
    os.mkfifo(fifo)
    real_access = os.access
    # A permission check, not chmod: tests may run as root, who may write anywhere.
    monkeypatch.setattr(checks.os, "access", lambda path, mode: Path(path) != locked and real_access(path, mode))
    cases = [
        ([str(good), "-o", str(a_file)], f"--output {a_file}: exists and is not a folder"),
        ([str(good), "-o", str(locked / "out")], f"cannot write in {locked} (permission denied or read-only)"),
        ([str(tmp_path), "-o", str(tmp_path / "o")], f"{tmp_path}: is a folder, not a file of pairs"),
        ([str(tmp_path / "missing.tsv"), "-o", str(tmp_path / "o")], "missing.tsv: no such file"),
        ([str(good)], "give --output DIR, --push-to-hub REPO, or both"),
        (["-", "-o", str(tmp_path / "o")], "-: standard input is not supported here"),
        ([str(fifo), "-o", str(tmp_path / "o")], f"{fifo}: not a regular file (a pipe"),
        ([str(good), "--push-to-hub", "no//such repo"], "--push-to-hub 'no//such repo': not a valid repo id"),
    ]
    inside = tmp_path / "data"
    inside.mkdir()
    held = _write(inside / "pairs.txt", good.read_text())
    cases.append(([str(held), "-o", str(inside), "--overwrite"], f"holds {held}, which replacing the folder"))
    for argv, message in cases:
        assert main(["prepare", "paraphrases", *argv, "--no-tokenizer", "-q"]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("psp: error: ") and message in err and err.count("\n") == 1, err
    assert a_file.read_text() == "keep me\n" and list(locked.iterdir()) == [] and held.is_file()
    assert not (tmp_path / "o").exists()
    with pytest.raises(SystemExit):  # argparse names the argument: --batch-size 0
        main(["prepare", "paraphrases", str(good), "-o", str(tmp_path / "o"), "--batch-size", "0"])
    assert "--batch-size: expected a positive number, got 0" in capsys.readouterr().err


@pytest.mark.slow
def test_a_killed_run_leaves_the_old_folder_and_the_next_run_removes_its_staging(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from psp_hf.data.prepare import prepare_bitext

    rows = "".join(f"satz nummer {i} ist hier\tsentence number {i} is here\n" for i in range(400_000))
    source = _write(tmp_path / "de-en.tsv.gz", "de\ten\n" + rows)
    out = tmp_path / "out"
    prepare_bitext([source], "de", out, train_tokenizer=False, limit=10)
    before = sorted(p.name for p in (out / "data").iterdir())
    code = (
        "import sys; from psp_hf.data.prepare import prepare_bitext; "
        "prepare_bitext([sys.argv[1]], 'de', sys.argv[2], overwrite=True, train_tokenizer=False, batch_size=2000)"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(source), str(out)])
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(".out.tmp-*/data")) and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert child.poll() is None, "the run ended before it could be killed"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    stale = list(tmp_path.glob(".out.tmp-*"))
    assert [p.name.split("-")[1] for p in stale] == [str(child.pid)]
    assert sorted(p.name for p in (out / "data").iterdir()) == before  # the old folder is untouched
    # A staging folder of a live process (this one) is someone's run in progress: left alone.
    live = tmp_path / f".out.tmp-{os.getpid()}-x"
    live.mkdir()
    prepare_bitext([source], "de", out, overwrite=True, train_tokenizer=False, limit=20)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["de-en.tsv.gz", "out", live.name])
    assert json.loads((out / "report" / "report.json").read_text())["pairs_in"] == 20


def test_prepare_paraphrases_removes_evaluation_sentences(tmp_path):
    data = Path(os.environ.get("PSP_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))
    if not data.is_dir():
        pytest.skip(f"real data not found at {data} (set PSP_DATA)")
    from psp_hf.data.prepare import prepare_paraphrases

    sick = (data / "sts" / "sick" / "test.tsv").read_text(encoding="utf-8").splitlines()[1].split("\t")[1]
    lines = [
        f"{sick.upper()}\tan entirely different sentence written for this test",
        "a first sentence that matches nothing at all\ta second sentence that matches nothing either",
    ]
    path = _write(tmp_path / "pairs.tsv", "".join(f"{line}\n" for line in lines))
    options = {"score_filter": False, "langid": False, "overlap_filter": False, "vocab_size": 40}
    report = prepare_paraphrases([path], tmp_path / "out", **options)
    step = next(step for step in report["steps"] if step["name"] == "evaluation")
    assert step["removed"] == 1 and report["pairs_out"] == 1
    kept = prepare_paraphrases([path], tmp_path / "kept", exclude_evaluation=False, **options)
    assert kept["pairs_out"] == 2
