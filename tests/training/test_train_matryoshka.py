"""Matryoshka training: settings, the nested losses, and truncated embeddings that keep their quality."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from psp_hf.errors import PSPInputError
from psp_hf.training.arguments.training_arguments import TrainingArguments
from psp_hf.training.loop.trainer import Trainer
from psp_hf.training.losses.distillation import distill_loss
from psp_hf.training.losses.margin import margin_loss
from psp_hf.training.losses.matryoshka import (
    NestedDims,
    nested_distill_loss,
    nested_loss,
    nested_projections,
    parse_nested_dims,
)

WORD_LIST = (
    "man woman child dog cat bird horse boy girl runs walks jumps sits plays eats reads street park beach field "
    "river snow water ball bike car guitar book red blue green big small old young happy"
)
WORDS = WORD_LIST.split()


def test_parse_nested_dims_adds_the_full_dimension_and_orders_weights():
    assert parse_nested_dims(None, None, 64) == NestedDims((64,), (1.0,))
    assert parse_nested_dims("32, 8", None, 64) == NestedDims((8, 32, 64), (1.0, 1.0, 1.0))
    assert parse_nested_dims("32,8,64", "2,0.5,3", 64) == NestedDims((8, 32, 64), (0.5, 2.0, 3.0))
    assert not parse_nested_dims(None, None, 64).nested


@pytest.mark.parametrize(
    ("dims", "weights", "message"),
    [
        ("8,128", None, "not between 1 and --dim 64"),
        ("8,8", None, "twice"),
        ("8,x", None, "comma-separated numbers"),
        ("8,16", "1", r"1 value\(s\) for 2"),
        ("8", "-1", ">= 0"),
        (None, "1", "needs --matryoshka-dims"),
    ],
)
def test_bad_matryoshka_settings_name_the_flag(tmp_path, dims, weights, message):
    arguments = TrainingArguments(
        data=["x.tsv"], output_dir=str(tmp_path), dim=64, matryoshka_dims=dims, matryoshka_weights=weights
    )
    with pytest.raises(PSPInputError, match=message):
        arguments.validate()


def test_nested_loss_is_the_weighted_sum_over_prefixes():
    torch.manual_seed(0)
    a, b, n1, n2 = (torch.randn(5, 16) for _ in range(4))
    nested = NestedDims((4, 8, 16), (0.5, 2.0, 1.0))
    got = nested_loss(margin_loss, [a, b, n1, n2], nested, 0.4)
    expected = sum(
        w * margin_loss(a[:, :k], b[:, :k], n1[:, :k], n2[:, :k], 0.4)
        for k, w in zip((4, 8, 16), (0.5, 2, 1), strict=True)
    )
    assert torch.allclose(got, expected)
    # The plain setting is exactly the ordinary loss.
    assert torch.equal(
        nested_loss(margin_loss, [a, b, n1, None], NestedDims((16,), (1.0,)), 0.4), margin_loss(a, b, n1)
    )


def test_nested_projection_maps_the_zero_padded_prefix():
    torch.manual_seed(0)
    student = torch.randn(6, 8)
    projection = torch.nn.Linear(8, 12, bias=False)
    nested = NestedDims((2, 4, 8), (1.0, 1.0, 1.0))
    mapped = nested_projections(student, projection, nested)
    for k, tensor in zip(nested.dims, mapped, strict=True):
        padded = F.pad(student[:, :k], (0, 8 - k))
        assert torch.allclose(tensor, projection(padded), atol=1e-6)
    # Without a projection (student dim = teacher dim): the zero-padded prefix itself.
    same = nested_projections(student, None, nested)
    assert torch.equal(same[0], F.pad(student[:, :2], (0, 6)))
    assert same[-1] is student
    teacher = torch.randn(6, 8)
    total = nested_distill_loss(distill_loss, same, teacher, nested)
    assert torch.allclose(total, sum(distill_loss(m, teacher) for m in same))


def _pairs(path: Path, n: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    lines = ["sentence1\tsentence2"]
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 8))]
        other = words[:]
        # A paraphrase with one word replaced and the order changed (the same bag would be trivial).
        other[rng.randrange(len(other))] = rng.choice(WORDS)
        rng.shuffle(other)
        lines.append(f"{' '.join(words)}\t{' '.join(other)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Path:
    from psp_hf.tokenization.pieces import train_tokenizer

    folder = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer([f"a {word} the {word}s" for word in WORDS] * 3, vocab_size=100, output_dir=folder)
    return folder


def _train(tmp_path: Path, tokenizer: Path, name: str, **overrides) -> Path:
    settings = {
        "data": [str(_pairs(tmp_path / "pairs.tsv", 1200))],
        "output_dir": str(tmp_path / name),
        "tokenizer": str(tokenizer),
        "dim": 128,
        "batch_size": 32,
        "megabatch_size": 4,
        "megabatch_anneal": 0,
        "epochs": 3,
        "lr": 0.02,
        "init_std": 0.1,
        "dev": "none",
        "keep": "last",
        "save_every": 0,
        "threads": 1,
        "quiet": True,
        "shuffle_buffer": 200,
    }
    settings.update(overrides)
    return Trainer(TrainingArguments(**settings)).train()


def _prefix_gap(folder: Path, k: int, pairs: Path) -> float:
    """Mean cosine of held-out pairs minus the mean cosine of mismatched sentences, using the first k dims."""
    from psp_hf import PSPEncoder

    rows = [line.split("\t") for line in pairs.read_text().splitlines()[1:]]
    model = PSPEncoder.from_pretrained(folder)
    first = model.encode([a for a, _ in rows])[:, :k]
    second = model.encode([b for _, b in rows])[:, :k]
    first /= np.linalg.norm(first, axis=1, keepdims=True) + 1e-12
    second /= np.linalg.norm(second, axis=1, keepdims=True) + 1e-12
    cosines = first @ second.T
    return float(np.diag(cosines).mean() - (cosines.sum() - np.trace(cosines)) / (len(rows) * (len(rows) - 1)))


def test_matryoshka_run_keeps_short_prefixes_useful(tmp_path, tokenizer):
    plain = _train(tmp_path, tokenizer, "plain")
    nested = _train(tmp_path, tokenizer, "nested", matryoshka_dims="8,32")
    held_out = _pairs(tmp_path / "held.tsv", 300, seed=7)
    # Same data, seed and schedule: only the loss differs. The 8-dim prefix of the Matryoshka model ranks
    # paraphrases better than the first 8 values of the plain one.
    gaps = {
        name: [_prefix_gap(folder, k, held_out) for k in (8, 128)]
        for name, folder in (("plain", plain), ("nested", nested))
    }
    assert gaps["nested"][0] > gaps["plain"][0]
    # ... and the full embedding still separates paraphrases from other sentences.
    assert gaps["nested"][1] > 0.5 * gaps["plain"][1]
    saved = json.loads((nested / "training" / "args.json").read_text())
    assert saved["matryoshka_dims"] == "8,32"


def test_prefix_only_weights_train_only_the_prefix_columns(tmp_path, tokenizer):
    from transformers import PreTrainedTokenizerFast

    from psp_hf import PSPEncoder

    out = _train(tmp_path, tokenizer, "prefix-only", matryoshka_dims="8,128", matryoshka_weights="1,0", epochs=1)
    trained = PSPEncoder.from_pretrained(out).model.embeddings.weight.detach()
    # The run's initial table: the same tokenizer, seed and initialiser.
    start_tokenizer = PreTrainedTokenizerFast.from_pretrained(out / "training" / "tokenizer")
    initial = PSPEncoder.from_tokenizer(start_tokenizer, hidden_size=128, seed=0, initializer_range=0.1)
    initial = initial.model.embeddings.weight.detach()
    assert trained.shape == initial.shape
    # With weight 0 on the full embedding only the first 8 columns get gradients: the rest are untouched.
    assert torch.equal(trained[:, 8:], initial[:, 8:])
    assert not torch.allclose(trained[:, :8], initial[:, :8])


def test_matryoshka_with_distillation_through_a_projection(tmp_path, tokenizer):
    from psp_hf.teachers.labels import TeacherCache

    rng = np.random.default_rng(0)
    vectors = {word: rng.standard_normal(12) for word in WORDS}

    class Teacher:
        def encode(self, sentences, **kwargs):
            out = np.stack([sum(vectors[w] for w in s.split()) for s in sentences])
            return out / np.linalg.norm(out, axis=1, keepdims=True)

    sentences = list(dict.fromkeys(" ".join(random.Random(i).sample(WORDS, 5)) for i in range(300)))
    cache = tmp_path / "cache"
    TeacherCache(cache).label(sentences, Teacher(), name="toy-teacher", chunk_size=128)
    out = _train(
        tmp_path,
        tokenizer,
        "distilled",
        teacher_cache=str(cache),
        distill_weight=1.0,
        distill_batch_size=32,
        dim=16,
        epochs=1,
        log_every=1,
        matryoshka_dims="4,8",
    )
    records = [json.loads(line) for line in (out / "training" / "metrics.jsonl").read_text().splitlines()]
    train = [record for record in records if record["event"] == "train"]
    # Three prefix terms (4, 8, 16), each a 1 - cosine in [0, 2]: the first sum is well above one term's range.
    assert 1.5 < train[0]["distill_loss"] <= 6.0
    assert train[-1]["distill_loss"] < train[0]["distill_loss"]
