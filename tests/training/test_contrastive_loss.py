"""`--pair-loss contrastive`: the loss by hand, its masks, the flag, and a tiny run that learns with it."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from psp_hf.errors import PSPInputError
from psp_hf.training.arguments import TrainingArguments
from psp_hf.training.losses.contrastive import contrastive_loss
from psp_hf.training.losses.matryoshka import NestedDims, nested_loss
from psp_hf.training.trainer import Trainer


def _cross_entropy(row: list[float], target: int) -> float:
    return -row[target] + math.log(sum(math.exp(value) for value in row))


def test_contrastive_loss_matches_hand_computation():
    first = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    second = torch.tensor([[1.0, 1.0], [0.0, 1.0]])
    first_negative = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    second_negative = torch.tensor([[1.0, 0.0], [3.0, 0.0]])
    scale, r = 5.0, 2**-0.5
    # First sides over [second sides; first negatives], as cosines.
    side1 = _cross_entropy([scale * c for c in (r, 0.0, 0.0, 1.0)], 0)
    side1 += _cross_entropy([scale * c for c in (r, 1.0, 1.0, 0.0)], 1)
    side1 /= 2
    side2 = _cross_entropy([scale * c for c in (r, r, r, r)], 0)
    side2 += _cross_entropy([scale * c for c in (0.0, 1.0, 0.0, 0.0)], 1)
    side2 /= 2
    two_sided = contrastive_loss(first, second, first_negative, second_negative, scale)
    one_sided = contrastive_loss(first, second, first_negative, None, scale)
    assert two_sided.item() == pytest.approx(side1 + side2, abs=1e-5)
    assert one_sided.item() == pytest.approx(side1, abs=1e-5)


def test_rows_without_a_negative_and_repeated_partners_are_no_negatives():
    torch.manual_seed(0)
    first, second = torch.randn(3, 8), torch.randn(3, 8)
    # The trainer's stand-in for a missing negative is the partner itself: masked, it must not count.
    stand_in = second.clone()
    valid = torch.zeros(3)
    masked = contrastive_loss(first, second, stand_in, None, 10.0, valid)
    logits = 10.0 * F.normalize(first, dim=1) @ F.normalize(second, dim=1).T
    assert masked.item() == pytest.approx(F.cross_entropy(logits, torch.arange(3)).item(), abs=1e-5)
    unmasked = contrastive_loss(first, second, stand_in, None, 10.0)
    assert unmasked.item() > masked.item() + 0.5  # the partner twice among the candidates: the softmax halves it
    # Pair 1's second side is the same text as pair 0's: neither is the other's negative.
    repeated = torch.cat([second[:1], second[:1], second[2:]])
    negatives = torch.randn(3, 8)
    keys = (torch.tensor([0, 1, 2]), torch.tensor([3, 3, 4]), torch.tensor([5, 6, 7]), torch.tensor([8, 9, 10]))
    with_keys = contrastive_loss(first, repeated, negatives, None, 10.0, None, None, keys)
    candidates = F.normalize(torch.cat([repeated, negatives]), dim=1)
    logits = 10.0 * F.normalize(first, dim=1) @ candidates.T
    logits[0, 1] = logits[1, 0] = float("-inf")
    assert with_keys.item() == pytest.approx(F.cross_entropy(logits, torch.arange(3)).item(), abs=1e-5)


def test_nested_contrastive_loss_passes_the_scale_masks_and_keys():
    torch.manual_seed(0)
    a, b, n1, n2 = (torch.randn(4, 16) for _ in range(4))
    keys = tuple(torch.arange(4) + 4 * i for i in range(4))
    valid = torch.tensor([1.0, 0.0, 1.0, 1.0])
    nested = NestedDims((8, 16), (0.5, 1.0))
    got = nested_loss(contrastive_loss, [a, b, n1, n2], nested, 7.0, valid, valid, keys)
    expected = sum(
        w * contrastive_loss(a[:, :k], b[:, :k], n1[:, :k], n2[:, :k], 7.0, valid, valid, keys)
        for k, w in ((8, 0.5), (16, 1.0))
    )
    assert torch.allclose(got, expected)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"pair_loss": "hinge"}, "--pair-loss"),
        ({"pair_loss": "contrastive", "contrastive_scale": 0.0}, "--contrastive-scale"),
    ],
)
def test_bad_pair_loss_settings_are_refused(tmp_path, settings, message):
    arguments = TrainingArguments(data=["x.tsv"], output_dir=str(tmp_path), **settings)
    with pytest.raises(PSPInputError, match=message):
        arguments.validate()


WORDS = [
    "man",
    "woman",
    "child",
    "dog",
    "cat",
    "bird",
    "horse",
    "boy",
    "girl",
    "runs",
    "walks",
    "jumps",
    "sits",
    "plays",
    "eats",
    "reads",
    "street",
    "park",
    "beach",
]


def _pairs(path: Path, n: int, seed: int) -> Path:
    rng = random.Random(seed)
    lines = ["sentence1\tsentence2"]
    for _ in range(n):
        words = rng.sample(WORDS, rng.randint(4, 7))
        other = words[:]
        other[rng.randrange(len(other))] = rng.choice(WORDS)
        rng.shuffle(other)
        lines.append(f"{' '.join(words)}\t{' '.join(other)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_contrastive_run_learns_to_retrieve_paraphrases(tmp_path):
    from psp_hf import PSPEncoder
    from psp_hf.tokenizer import train_tokenizer

    tokenizer = tmp_path / "tokenizer"
    train_tokenizer([f"a {word} the {word}s" for word in WORDS] * 3, vocab_size=80, output_dir=tokenizer)
    out = Trainer(
        TrainingArguments(
            data=[str(_pairs(tmp_path / "pairs.tsv", 800, seed=0))],
            output_dir=str(tmp_path / "model"),
            tokenizer=str(tokenizer),
            pair_loss="contrastive",
            dim=64,
            batch_size=32,
            megabatch_size=3,
            megabatch_anneal=0,
            epochs=2,
            lr=0.02,
            dev="none",
            keep="last",
            save_every=0,
            threads=1,
            quiet=True,
            shuffle_buffer=200,
        )
    ).train()
    rows = [line.split("\t") for line in _pairs(tmp_path / "held.tsv", 200, seed=9).read_text().splitlines()[1:]]
    model = PSPEncoder.from_pretrained(out)
    first = model.encode([a for a, _ in rows], normalize_embeddings=True)
    second = model.encode([b for _, b in rows], normalize_embeddings=True)
    # Held-out paraphrases: the partner is the nearest of the 200 far more often than chance (0.5 %).
    accuracy = float(np.mean((first @ second.T).argmax(axis=1) == np.arange(len(rows))))
    assert accuracy > 0.5
    saved = json.loads((out / "training" / "args.json").read_text())
    assert (saved["pair_loss"], saved["contrastive_scale"]) == ("contrastive", 20.0)
