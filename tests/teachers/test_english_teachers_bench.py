"""bench/english_teachers.py's choice of students (--students) and the flags it hands every student (--train-extra)."""

from __future__ import annotations

import numpy as np
import pytest
from bench_scripts import bench_script

from psp_hf.teachers.labels import TeacherCache


def bench():
    return bench_script("english_teachers")


@pytest.fixture
def caches(tmp_path):
    sentences = [f"sentence number {i}" for i in range(12)]
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        TeacherCache(tmp_path / name).write(
            sentences, rng.normal(size=(12, 4)).astype(np.float32), name=name, backend="torch"
        )
    return tmp_path


def run(caches, monkeypatch, *extra):
    trained = []
    module = bench()
    monkeypatch.setattr(module, "train", lambda name, cache, args, out: trained.append((name, args.train_extra)))
    monkeypatch.setattr(module, "kept_dev", lambda folder: (None, None))
    monkeypatch.setattr(module, "scores", lambda *a, **k: {"sts12-16": 1.0, "stsb_test": 1.0, "sickr_test": 1.0})
    argv = ["--corpus", "C", "--tokenizer", "T", "--recipe", "demo", "--out", str(caches / "out")]
    argv += ["--labels", f"a={caches / 'a'}", "--labels", f"b={caches / 'b'}", "--combine", "concat=a,b", *extra]
    assert module.main(argv) == 0
    return trained


def test_every_row_trains_by_default_and_students_picks_some(caches, monkeypatch):
    assert sorted(name for name, _ in run(caches, monkeypatch)) == ["a", "b", "concat(a+b)"]
    picked = run(caches, monkeypatch, "--students", "concat(a+b)", "--train-extra", "--resume --max-minutes 2")
    assert picked == [("concat(a+b)", "--resume --max-minutes 2")]
    # Row files carry only letters, digits, '.', '_' and '-' in their names.
    assert sorted(p.name for p in (caches / "out").glob("row-*.json")) == [
        "row-a.json",
        "row-b.json",
        "row-concat-a-b.json",
    ]


def test_an_unknown_student_is_named_with_the_rows_there_are(caches, monkeypatch):
    with pytest.raises(SystemExit, match=r"--students: no row named nope \(rows: a, b, concat\(a\+b\)\)"):
        run(caches, monkeypatch, "--students", "a,nope")
