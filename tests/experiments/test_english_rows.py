"""`psp languages --init-rows-from e5-student`: the English student of e5's "query: " labels, built once (corpus ->
label -> train), resumed step by step, and handed to every language as its row source."""

from __future__ import annotations

import json

import numpy as np
import pytest
from e5_tiny import write_tiny_e5

from psp_hf.data import distill_corpus
from psp_hf.experiments import english_rows
from psp_hf.experiments.english_rows import E5_STUDENT, english_folder, english_student
from psp_hf.experiments.languages import Settings
from psp_hf.teachers.labels import TeacherCache

WORDS = ["hello", "world", "the", "cat", "a", "dog", "runs", "jumps", "over", "green", "field", "red"]


@pytest.fixture
def tiny_pipeline(tmp_path, monkeypatch):
    """The tiny e5 as e5-small, a corpus of 300 toy sentences, and a student small enough for it."""
    write_tiny_e5(tmp_path / "tiny.bin")
    monkeypatch.setattr("psp_hf.teachers.e5_convert.packaged_e5_file", lambda: tmp_path / "tiny.bin")
    monkeypatch.setenv("PSP_TEACHERS_HOME", str(tmp_path / "home"))
    rng = np.random.default_rng(0)
    sentences = [" ".join(rng.choice(WORDS, size=6)) + f" {k}" for k in range(300)]
    built = []

    def build(out, data=None, extra_sources=()):
        built.append(out)
        report = {"total_sentences": 300, "sources": {"toy": {"license": "CC0"}}}
        result = distill_corpus.CorpusResult(sentences, ["toy"] * len(sentences), report)
        distill_corpus.write_corpus(result, out)
        return result

    monkeypatch.setattr(distill_corpus, "build_distill_corpus", build)
    monkeypatch.setattr(
        english_rows, "ENGLISH_STUDENT_SETTINGS", {**english_rows.ENGLISH_STUDENT_SETTINGS, "dim": 8, "vocab_size": 40}
    )
    return Settings(out=tmp_path / "out", data=tmp_path, threads=1), built


def test_the_student_is_built_once_from_e5_query_labels_and_resumes_step_by_step(tiny_pipeline, capsys):
    settings, built = tiny_pipeline
    model = english_student(settings, sentences=200)
    folder = english_folder(settings.out)
    assert model == folder / "model" and (model / "config.json").is_file()
    assert json.loads((model / "config.json").read_text())["hidden_size"] == 8
    labels = TeacherCache(folder / "labels")
    assert labels.meta()["teacher"] == "e5-small-query" and len(labels.labelled_sentences()) == 200
    args = json.loads((model / "training" / "args.json").read_text())
    assert (args["teacher_transform"], args["teacher_whiten_shrink"]) == ("whiten", 1.0)
    assert args["teacher_cache"] == str(folder / "labels") and args["epochs"] == 10
    assert all(
        json.loads((folder / f"done-{step}").read_text())["seconds"] >= 0 for step in ("corpus", "label", "train")
    )
    # Done: a rerun skips every step and builds nothing again.
    capsys.readouterr()
    assert english_student(settings, sentences=200) == model
    assert capsys.readouterr().err.count("done before, skipped") == 3 and len(built) == 1
    # A run stopped after labelling (no done-label yet) labels nothing twice.
    (folder / "done-label").unlink()
    (folder / "done-train").unlink()
    english_student(settings, sentences=200)
    assert json.loads((folder / "done-label").read_text())["labelled_now"] == 0
    assert json.loads((folder / "done-train").read_text())["steps"] > 0
    # What a language's card says about rows from this student: the teacher, the corpus and its sources' licences.
    described = english_rows.rows_description(settings.out, str(model))
    assert "e5-small-query" in described and "200 sentences" in described and "toy: CC0" in described
    assert english_rows.rows_description(settings.out, str(settings.out / "other")) is None


def test_the_cli_builds_the_student_after_checking_the_data_and_hands_it_to_every_language(tmp_path, monkeypatch):
    from psp_hf.cli import languages as cli
    from psp_hf.cli.flags import Parser

    calls = []
    monkeypatch.setattr(cli, "check_data", lambda code, settings: calls.append(("check", code)))
    monkeypatch.setattr(cli, "english_student", lambda settings: calls.append(("english",)) or tmp_path / "student")
    monkeypatch.setattr(cli, "build_language", lambda code, settings: calls.append((code, settings.init_rows_from)))
    monkeypatch.setattr(cli, "folder_rows", lambda out, rows: rows)
    monkeypatch.setattr(cli, "write_summary", lambda out, rows, multilingual: "")
    parser = Parser()
    cli.add_arguments(parser)
    args = parser.parse_args(["--langs", "de,tr", "-o", str(tmp_path), "--init-rows-from", E5_STUDENT])
    assert cli.run(args) == 0
    student = str(tmp_path / "student")
    assert calls == [("check", "de"), ("check", "tr"), ("english",), ("de", student), ("tr", student)]
