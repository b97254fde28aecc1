"""`psp eval` under bad input and faults: an unwritable --output, a write failing after the run, a corrupt
model folder, data that differs from MANIFEST.tsv, and malformed evaluation files. Everything runs on a tiny
data folder and a tiny psp model built here, so no shared data is needed."""

from __future__ import annotations

import errno
import hashlib
import json
import shutil
import tempfile

import pytest

from psp_hf.cli import main
from psp_hf.errors import PSPInputError
from psp_hf.evaluation import data as eval_data

CORPUS = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "Two dogs run across the green field.",
    "The children are playing football in the park.",
    "Stocks fell sharply on Monday after the announcement.",
    "A cat sleeps on the warm windowsill.",
] * 20
STSB_HEADER = "genre\tfilename\tyear\tsid\tscore\tsentence1\tsentence2"


def _stsb_rows(offset: int) -> list[str]:
    sentences = sorted(set(CORPUS))
    rows = []
    for i in range(12):
        first, second = sentences[i % 6], sentences[(i + offset) % 6]
        score = 5.0 if first == second else (i * 7 + offset) % 5
        rows.append(f"main\tx\t2012\t{i}\t{score:.1f}\t{first}\t{second}")
    return rows


@pytest.fixture
def data_dir(tmp_path):
    """A data folder with the STS Benchmark dev and test splits and a MANIFEST.tsv that matches them."""
    root = tmp_path / "data"
    folder = root / "sts" / "stsbenchmark"
    folder.mkdir(parents=True)
    manifest = ["path\trecords\tbytes\tsha256"]
    for split, offset in (("dev", 1), ("test", 2)):
        rows = _stsb_rows(offset)
        path = folder / f"{split}.tsv"
        path.write_text("\n".join([STSB_HEADER, *rows]) + "\n", encoding="utf-8")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        manifest.append(f"sts/stsbenchmark/{split}.tsv\t{len(rows)}\t{path.stat().st_size}\t{digest}")
    (root / "MANIFEST.tsv").write_text("\n".join(manifest) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def psp_folder(tmp_path_factory):
    from psp_hf import PSPEncoder
    from psp_hf.tokenization.pieces import train_tokenizer

    folder = tmp_path_factory.mktemp("psp") / "tiny-psp"
    PSPEncoder.from_tokenizer(train_tokenizer(CORPUS, vocab_size=60), hidden_size=8, seed=1).save_pretrained(folder)
    return folder


@pytest.fixture
def no_evaluation(monkeypatch):
    """Fails the test if any model gets evaluated (for errors that must come before the work)."""
    from psp_hf.evaluation import tasks

    def refuse(*args, **kwargs):
        raise AssertionError("the evaluation ran although the error should have come first")

    monkeypatch.setattr(tasks, "evaluate_model", refuse)


def _eval(psp_folder, data_dir, *extra: str) -> list[str]:
    return ["eval", "--model", str(psp_folder), "--tasks", "stsb", "--data-dir", str(data_dir), "-q", *extra]


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("psp: error: ") and "Traceback" not in err
    return lines[0]


# ----------------------------------------------------------------------------------------------- --output
def test_unwritable_output_is_refused_before_the_work(psp_folder, data_dir, tmp_path, capsys, no_evaluation):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    assert main(_eval(psp_folder, data_dir, "-o", str(a_file / "results.json"))) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert f"--output {a_file / 'results.json'}: {a_file} is not a folder" in _one_error_line(err)

    a_dir = tmp_path / "reports"
    a_dir.mkdir()
    assert main(_eval(psp_folder, data_dir, "-o", str(a_dir))) == 2
    out, err = capsys.readouterr()
    assert out == "" and "is a directory; give the JSON file to write" in _one_error_line(err)
    assert list(a_dir.iterdir()) == []


def test_unwritable_folder_is_refused(psp_folder, data_dir, tmp_path, capsys, monkeypatch, no_evaluation):
    import os

    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    # Tests may run as root, who can write anywhere: the permission answer is what is simulated.
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path) == str(locked) else real_access(path, mode))
    assert main(_eval(psp_folder, data_dir, "-o", str(locked / "new" / "results.json"))) == 2
    assert f"cannot write in {locked}" in _one_error_line(capsys.readouterr().err)
    assert not (locked / "new").exists()


def test_a_full_disk_under_the_atomic_writer_keeps_the_results(psp_folder, data_dir, tmp_path, capsys, monkeypatch):
    """The disk fills while the report's own files are written (not a stubbed write_outputs): the JSON is still
    saved to a temporary file named in the one error line (issue 35)."""
    from pathlib import Path as RealPath

    output = tmp_path / "out" / "results.json"
    real_write_text = RealPath.write_text

    def write_text(self, *args, **kwargs):
        if self.parent == output.parent:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(RealPath, "write_text", write_text)
    kept = tmp_path / "tmp"
    kept.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(kept))
    assert main(_eval(psp_folder, data_dir, "-o", str(output))) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert f"--output {output}: could not write the report" in line and "no space left" in line
    (saved,) = kept.glob("psp-eval-*.json")
    assert f"saved to {saved}" in line
    assert json.loads(saved.read_text(encoding="utf-8"))["models"]
    assert not any(output.parent.iterdir())  # no temporary left beside the output


def test_a_write_failing_after_the_run_keeps_the_results(psp_folder, data_dir, tmp_path, capsys, monkeypatch):
    from psp_hf.evaluation import report

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(report, "write_outputs", disk_full)
    kept = tmp_path / "tmp"
    kept.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(kept))
    output = tmp_path / "out" / "results.json"
    assert main(_eval(psp_folder, data_dir, "-o", str(output))) == 2
    out, err = capsys.readouterr()
    line = _one_error_line(err)
    assert f"--output {output}: could not write the report (No space left on device)" in line
    (saved,) = kept.glob("psp-eval-*.json")
    assert f"saved to {saved}" in line and "tables are on stdout" in line
    report_data = json.loads(saved.read_text(encoding="utf-8"))
    pearson = report_data["models"][0]["results"]["stsb"]["test"]["pearson"]
    assert f"{pearson:.1f}" in out and "STS Benchmark" in out  # the Markdown tables were printed

    # When even the temporary folder cannot take the file, the JSON goes to stdout.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing-tmp"))
    assert main(_eval(psp_folder, data_dir, "-o", str(output))) == 2
    out, err = capsys.readouterr()
    assert "printed as JSON on stdout" in _one_error_line(err)
    printed = json.loads(out[out.index("{\n") :])
    assert printed["models"][0]["results"]["stsb"]["test"]["pearson"] == pytest.approx(pearson)


# ----------------------------------------------------------------------------------------------- model folder
@pytest.mark.parametrize(
    "damage",
    ["truncated-weights", "garbled-weights", "garbled-tokenizer", "garbled-config", "config-weights-mismatch"],
)
def test_corrupt_model_folder_is_one_error_line(psp_folder, data_dir, tmp_path, capsys, damage, no_evaluation):
    broken = tmp_path / "broken"
    shutil.copytree(psp_folder, broken)
    weights = broken / "model.safetensors"
    if damage == "truncated-weights":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif damage == "garbled-weights":
        weights.write_bytes(b"\x00garbage" * 64)
    elif damage == "garbled-tokenizer":
        (broken / "tokenizer.json").write_text('{"model": {"type": "Unigram", "vocab": [[1, 2]]', encoding="utf-8")
    elif damage == "garbled-config":
        (broken / "config.json").write_text('{"model_type": "psp", "hidden_size": ', encoding="utf-8")
    else:
        config = json.loads((broken / "config.json").read_text(encoding="utf-8"))
        config["hidden_size"] += 3
        (broken / "config.json").write_text(json.dumps(config), encoding="utf-8")
    # The good model first: a broken second model must stop the run before any work, not after the first.
    argv = ["eval", "--model", str(psp_folder), str(broken), "--tasks", "stsb", "--data-dir", str(data_dir), "-q"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert str(broken) in _one_error_line(err)


# ----------------------------------------------------------------------------------------------- MANIFEST.tsv
def test_data_matching_the_manifest_gives_no_warning(psp_folder, data_dir, tmp_path, capsys):
    output = tmp_path / "results.json"
    assert main(_eval(psp_folder, data_dir, "-o", str(output))) == 0
    assert "warning" not in capsys.readouterr().err
    data = json.loads(output.read_text(encoding="utf-8"))["data"]
    assert data["modified_files"] == [] and data["all_match_manifest"] is True
    assert "Modified data" not in output.with_suffix(".md").read_text(encoding="utf-8")


def test_modified_data_is_warned_about_and_recorded(psp_folder, data_dir, tmp_path, capsys):
    test_file = data_dir / "sts" / "stsbenchmark" / "test.tsv"
    text = test_file.read_text(encoding="utf-8")
    test_file.write_text(text.replace("\t0.0\t", "\t4.0\t", 1), encoding="utf-8")
    output = tmp_path / "results.json"
    assert main(_eval(psp_folder, data_dir, "-o", str(output))) == 0
    err = capsys.readouterr().err
    assert "psp: warning: 1 data file(s) differ from" in err and "sts/stsbenchmark/test.tsv" in err
    data = json.loads(output.read_text(encoding="utf-8"))["data"]
    assert data["modified_files"] == ["sts/stsbenchmark/test.tsv"]
    assert data["files"]["sts/stsbenchmark/dev.tsv"]["matches_manifest"] is True
    markdown = output.with_suffix(".md").read_text(encoding="utf-8")
    assert "**Modified data** (sha256 differs from MANIFEST.tsv): sts/stsbenchmark/test.tsv." in markdown


def test_help_says_what_happens_to_modified_data(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "MANIFEST.tsv" in help_text and "data.modified_files" in help_text


# ----------------------------------------------------------------------------------------------- data files
def test_malformed_evaluation_files_name_file_and_line(data_dir):
    path = data_dir / "sts" / "stsbenchmark" / "dev.tsv"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(["genre\tfile\tyear", *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(PSPInputError, match=r"dev.tsv:1: expected header genre<TAB>filename"):
        eval_data.read_stsb(data_dir, "dev")
    path.write_bytes(("\n".join(lines[:3]) + "\n").encode() + b"main\tx\t2012\t9\t1.0\t\xff bad\tok\n")
    with pytest.raises(PSPInputError, match=r"dev.tsv:4: not valid UTF-8"):
        eval_data.read_stsb(data_dir, "dev")
    path.write_text(STSB_HEADER + "\n", encoding="utf-8")
    with pytest.raises(PSPInputError, match=r"dev.tsv: no data rows"):
        eval_data.read_stsb(data_dir, "dev")

    folder = data_dir / "tatoeba" / "v1"
    folder.mkdir(parents=True)
    (folder / "tatoeba.deu-eng.deu").write_bytes(b"Hallo\n\xc3(\n")
    (folder / "tatoeba.deu-eng.eng").write_text("Hello\nBye\n", encoding="utf-8")
    with pytest.raises(PSPInputError, match=r"tatoeba.deu-eng.deu:2: not valid UTF-8"):
        eval_data.read_tatoeba(data_dir, "de")


def test_a_deleted_manifest_is_warned_about(psp_folder, data_dir, tmp_path, capsys):
    (data_dir / "MANIFEST.tsv").unlink()
    output = tmp_path / "results.json"
    assert main(_eval(psp_folder, data_dir, "-o", str(output))) == 0
    err = capsys.readouterr().err
    assert f"psp: warning: {data_dir}/MANIFEST.tsv is missing" in err
    assert json.loads(output.read_text(encoding="utf-8"))["data"]["all_match_manifest"] is None
