"""Teachers combined from their label caches: concatenation, mean, centering, and the refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from psp_hf.errors import PSPInputError  # noqa: E402
from psp_hf.teachers.combine import combine_caches  # noqa: E402
from psp_hf.teachers.labels import TeacherCache  # noqa: E402

SENTENCES = [f"sentence number {i}" for i in range(12)]


def _cache(path, rows: np.ndarray, name: str, sentences=SENTENCES, corpus="/pool") -> TeacherCache:
    cache = TeacherCache(path)
    cache.write(sentences, rows, name=name, backend="torch", chunk_size=5)
    meta = json.loads((path / "meta.json").read_text())
    meta.update(corpus=corpus, label_seconds=10.0)
    (path / "meta.json").write_text(json.dumps(meta))
    return cache


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def two(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(len(SENTENCES), 4)).astype(np.float32)
    b = rng.normal(size=(len(SENTENCES), 6)).astype(np.float32) + 3.0  # a large shared direction, as e5 has
    # The second cache holds its rows in another order: combining goes by sentence, not by row.
    _cache(tmp_path / "a", a, "A")
    _cache(tmp_path / "b", b[::-1], "B", sentences=SENTENCES[::-1], corpus="/other")
    return tmp_path, a, b


def test_concat_is_unit_norm_and_its_cosines_are_the_mean_of_the_teachers(two):
    tmp, a, b = two
    rows, dim = combine_caches([tmp / "a", tmp / "b"], tmp / "c", how="concat")
    assert (rows, dim) == (len(SENTENCES), 10)
    sentences, c = TeacherCache(tmp / "c").load()
    assert sentences == SENTENCES
    np.testing.assert_allclose(np.linalg.norm(c, axis=1), 1.0, atol=2e-3)  # stored as float16
    expected = ((_unit(a) @ _unit(a).T) + (_unit(b) @ _unit(b).T)) / 2
    np.testing.assert_allclose(c @ c.T, expected, atol=5e-3)
    meta = json.loads((tmp / "c" / "meta.json").read_text())
    assert meta["teacher"] == "concat(A+B)" and meta["dim"] == 10 and meta["label_seconds"] == 20.0
    assert meta["corpus"] == "/pool" and [part["teacher"] for part in meta["parts"]] == ["A", "B"]


def test_mean_and_centering(tmp_path):
    rng = np.random.default_rng(1)
    a = rng.normal(size=(len(SENTENCES), 4)).astype(np.float32)
    b = rng.normal(size=(len(SENTENCES), 4)).astype(np.float32) + 5.0
    _cache(tmp_path / "a", a, "A")
    _cache(tmp_path / "b", b, "B")
    combine_caches([tmp_path / "a", tmp_path / "b"], tmp_path / "m", how="mean")
    _, m = TeacherCache(tmp_path / "m").load()
    np.testing.assert_allclose(m, _unit((_unit(a) + _unit(b)) / 2), atol=3e-3)
    # One cache centred: its rows lose their mean, so unrelated sentences are no longer all near each other.
    combine_caches([tmp_path / "b"], tmp_path / "bc", transform="center")
    _, centred = TeacherCache(tmp_path / "bc").load()
    assert (_unit(b) @ _unit(b).T).min() > 0.8
    np.testing.assert_allclose(centred, _unit(_unit(b) - _unit(b).mean(axis=0)), atol=3e-3)
    assert abs(float((centred @ centred.T)[np.triu_indices(len(SENTENCES), 1)].mean())) < 0.2
    assert json.loads((tmp_path / "bc" / "meta.json").read_text())["transform"] == "center"


def test_refusals_name_the_problem(two):
    tmp, a, _ = two
    with pytest.raises(PSPInputError, match="two or more"):
        combine_caches([tmp / "a"], tmp / "x", how="concat")
    with pytest.raises(PSPInputError, match="choose one of"):
        combine_caches([tmp / "a", tmp / "b"], tmp / "x", how="sum")
    with pytest.raises(PSPInputError, match="choose one of"):
        combine_caches([tmp / "a"], tmp / "x", transform="rotate")
    with pytest.raises(PSPInputError, match="no meta.json"):
        combine_caches([tmp / "a", tmp / "missing"], tmp / "x")
    _cache(tmp / "d", a, "D", sentences=[f"other {i}" for i in range(len(SENTENCES))])
    with pytest.raises(PSPInputError, match="no sentence in common"):
        combine_caches([tmp / "a", tmp / "d"], tmp / "x")
    combine_caches([tmp / "a", tmp / "b"], tmp / "c")
    with pytest.raises(PSPInputError, match="already holds labels"):
        combine_caches([tmp / "a", tmp / "b"], tmp / "c")


def test_write_refuses_mismatched_rows_and_another_teacher(tmp_path):
    cache = TeacherCache(tmp_path / "c")
    with pytest.raises(ValueError, match="3 sentences but 2"):
        cache.write(["a", "b", "c"], np.zeros((2, 4), np.float32), name="T", backend="torch")
    cache.write(["a", "b"], np.ones((2, 4), np.float32), name="T", backend="torch")
    with pytest.raises(PSPInputError, match="refusing to mix"):
        cache.write(["c"], np.ones((1, 4), np.float32), name="U", backend="torch")
    assert TeacherCache(tmp_path / "c").load()[0] == ["a", "b"]


def test_whitening_evens_out_the_variance_of_every_direction():
    from psp_hf.teachers.combine import whiten_rows

    rng = np.random.default_rng(2)
    # Anisotropic rows: a shared offset and two directions far stronger than the rest.
    rows = rng.normal(size=(2000, 8)) * np.array([10, 5, 1, 1, 1, 1, 1, 1]) + 20.0
    white = whiten_rows(rows.astype(np.float32), shrink=0.0)
    np.testing.assert_allclose(np.linalg.norm(white, axis=1), 1.0, atol=1e-5)
    spread = np.linalg.eigvalsh(np.cov(white.T))
    assert spread.max() / spread.min() < 2  # raw rows: > 50
    raw = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    raw_spread = np.linalg.eigvalsh(np.cov(raw.T))
    assert raw_spread.max() / max(raw_spread.min(), 1e-12) > 50
    # A direction with no variance at all (float16 rounding) is not blown up: shrinkage keeps it small.
    flat = np.concatenate([rows, np.zeros((2000, 1))], axis=1).astype(np.float32)
    assert np.abs(whiten_rows(flat)[:, -1]).max() < 1e-3
