"""Multilingual distillation with a multilingual teacher: the bitext targets, the monolingual stream, a tiny run."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from toy_bitext import EXTRA, WORDS, MultilingualWordTeacher, WordTeacher, make_bitext, translate

from psp_hf.errors import PSPInputError
from psp_hf.teachers.labels import TeacherCache
from psp_hf.training.arguments.training_arguments import TrainingArguments
from psp_hf.training.data.bitext_teacher import BitextTeacher
from psp_hf.training.data.multilingual import (
    MONO_WEIGHT,
    MULTILINGUAL_DEFAULT_TARGETS,
    read_dev_pairs,
    read_mono_sentences,
    resolved_targets,
    teacher_is_multilingual,
)
from psp_hf.training.losses.distillation import bitext_distill_loss, pair_distill_loss

NAME = "fake-multilingual"


def _unit(*values: float) -> torch.Tensor:
    return torch.nn.functional.normalize(torch.tensor([values], dtype=torch.float32), dim=1)


def test_bitext_targets_give_known_losses_and_pull_toward_the_chosen_vectors():
    teacher_xx, teacher_en = _unit(1, 0, 0), _unit(0, 1, 0)
    student_xx, student_en = _unit(0, 0, 1), _unit(0, 1, 0)  # the English side already sits on teacher(en)
    english = torch.cat([torch.cat([teacher_en, teacher_en])])[None]
    same = torch.cat([teacher_xx, teacher_en])[None]
    both = torch.stack([english[0], same[0]])
    mapped = torch.cat([student_xx, student_en])
    # cos(student(xx), target) is 0 for either target and 1 for the English side: each loss is (1 + 0) / 2.
    for targets in (english, same, both):
        assert float(bitext_distill_loss(mapped, targets)) == pytest.approx(0.5)
    assert float(bitext_distill_loss(mapped, english)) == pytest.approx(float(pair_distill_loss(mapped, teacher_en)))
    tilted = torch.cat([_unit(1, 0, 1), student_en])  # cos 0.707 with teacher(xx), 0 with teacher(en)
    assert float(bitext_distill_loss(tilted, same)) == pytest.approx((1 - 0.5**0.5) / 2, abs=1e-6)
    assert float(bitext_distill_loss(tilted, english)) == pytest.approx(0.5)
    assert float(bitext_distill_loss(tilted, both)) == pytest.approx((0.5 + (1 - 0.5**0.5) / 2) / 2, abs=1e-6)

    def descent(targets: torch.Tensor) -> torch.Tensor:
        rows = mapped.clone().requires_grad_(True)
        bitext_distill_loss(rows, targets).backward()
        return -rows.grad[0]  # the direction student(xx) moves in

    en_step, same_step, both_step = descent(english), descent(same), descent(both)
    assert float(en_step @ teacher_en[0]) > 0 and float(en_step @ teacher_xx[0]) == pytest.approx(0.0)
    assert float(same_step @ teacher_xx[0]) > 0 and float(same_step @ teacher_en[0]) == pytest.approx(0.0)
    assert float(both_step @ teacher_xx[0]) > 0 and float(both_step @ teacher_en[0]) > 0


def test_targets_are_looked_up_per_side_and_auto_follows_the_teacher(tmp_path):
    teacher = MultilingualWordTeacher()
    pairs = [("nam snurο", "man runs")]  # the first word's 'o' is Greek: not a toy word, so its own vector
    sentences = ["man runs", "nam snurο", "god stis"]
    labels = BitextTeacher.prepare(sentences, tmp_path / "cache", NAME, load=lambda name: teacher)
    targets = labels.targets([a for a, _ in pairs], [b for _, b in pairs], "both")
    en, xx = labels.lookup(["man runs"])[0], labels.lookup(["nam snurο"])[0]
    assert targets.shape == (2, 2, labels.dim)
    assert torch.equal(targets[0], torch.stack([en, en])) and torch.equal(targets[1], torch.stack([xx, en]))
    assert labels.targets(["nam snurο"], ["man runs"], "same").shape == (1, 2, labels.dim)
    assert not torch.allclose(en, xx)
    args = TrainingArguments(bitext_targets="auto")
    assert resolved_targets(args, NAME) == resolved_targets(args, "e5-small") == MULTILINGUAL_DEFAULT_TARGETS
    assert resolved_targets(args, "sentence-transformers/all-MiniLM-L6-v2") == "en"
    assert resolved_targets(TrainingArguments(bitext_targets="same"), "all-MiniLM-L6-v2") == "same"
    assert teacher_is_multilingual("intfloat/multilingual-e5-small") and not teacher_is_multilingual(None)


def test_mono_and_dev_files_are_read_with_their_faults_named(tmp_path):
    mono = tmp_path / "mono.txt.gz"
    with gzip.open(mono, "wt", encoding="utf-8") as handle:
        handle.write("eno  owt\n\neno owt\nerht\n")
    assert read_mono_sentences([mono]) == ["eno owt", "erht"]
    broken = tmp_path / "broken.txt"
    broken.write_bytes(b"fine\n\xff\xfe\n")
    with pytest.raises(PSPInputError, match=r"broken.txt:2: not UTF-8"):
        read_mono_sentences([broken])
    dev = tmp_path / "dev.tsv"
    dev.write_text("de\ten\nnam\tman\nbad line\n", encoding="utf-8")
    with pytest.raises(PSPInputError, match=r"dev.tsv:3: 1 column"):
        read_dev_pairs(dev, "de")
    with pytest.raises(PSPInputError, match=r"dev.tsv:1: the header must name fr and en"):
        read_dev_pairs(dev, "fr")
    with pytest.raises(PSPInputError, match="--mono-data is multilingual distillation"):
        TrainingArguments(output_dir=str(tmp_path / "x"), data=[str(dev)], mono_data=[str(mono)]).validate()


def _settings(tmp_path: Path, output: str, **more) -> TrainingArguments:
    settings = {
        "data": [str(tmp_path / "bitext.tsv")],
        "lang": "de",
        "teacher": NAME,
        "teacher_cache": str(tmp_path / "cache"),
        "output_dir": str(tmp_path / output),
        "vocab_size": 150,
        "dim": 8,
        "batch_size": 16,
        "megabatch_size": 2,
        "megabatch_anneal": 0,
        "mono_batch_size": 32,
        "lr": 0.05,
        "init_std": 0.1,
        "epochs": 4,
        "eval_every": 40,
        "threads": 1,
        "quiet": True,
        "save_every": 0,
        "log_every": 5,
        **more,
    }
    args = TrainingArguments(**settings)
    args.validate()
    return args


def test_tiny_run_labels_the_other_sides_and_the_mono_text_and_learns_from_both(tmp_path, monkeypatch):
    from psp_hf.training.loop.trainer import Trainer

    pairs = make_bitext(tmp_path / "bitext.tsv", 400)
    rng = random.Random(1)
    mono = sorted({translate(" ".join(rng.choice(WORDS[:8] + EXTRA) for _ in range(4))) for _ in range(300)})
    (tmp_path / "mono.txt").write_text("\n".join(mono) + "\n", encoding="utf-8")
    dev = tmp_path / "dev.tsv"
    dev.write_text("de\ten\n" + "".join(f"{a}\t{b}\n" for a, b in pairs[:60]), encoding="utf-8")
    # The cache already holds the English sides: only the other sides and the monolingual text are labelled now.
    TeacherCache(tmp_path / "cache").label([b for _, b in pairs], MultilingualWordTeacher(), name=NAME)
    teacher = MultilingualWordTeacher()
    monkeypatch.setattr("psp_hf.teachers.labels.labelling_teacher", lambda *a, **k: teacher)
    mono_file = str(tmp_path / "mono.txt")
    args = _settings(tmp_path, "run", mono_data=[mono_file], dev_bitext=str(dev), mono_weight=2, bitext_targets="both")
    folder = Trainer(args).train()
    training = {a for a, _ in pairs[60:]}  # the dev file's pairs are skipped in --data: never labelled
    assert set(teacher.labelled) == training | set(mono)
    records = [json.loads(line) for line in (folder / "training" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r.get("event") == "train"]
    assert train[-1]["mono_loss"] < 0.5 * train[0]["mono_loss"]
    assert train[-1]["distill_loss"] < 0.5 * train[0]["distill_loss"]
    assert train[-1]["sentences_seen"] > len(mono)
    scores = [r["dev_bitext_accuracy"] for r in records if "dev_bitext_accuracy" in r]
    assert scores[-1] > scores[0] + 20
    card = (folder / "README.md").read_text()
    assert "monolingual sentences labelled by the teacher" in card
    assert "| bitext distillation targets (en: teacher(English side); same: each side's own; both) | both |" in card
    # A second run over the same cache labels nothing.
    monkeypatch.setattr("psp_hf.teachers.labels.labelling_teacher", lambda *a, **k: 1 / 0)
    again = _settings(tmp_path, "again", mono_data=[mono_file], dev_bitext=str(dev), max_steps=3, bitext_targets="same")
    Trainer(again).train()


def test_an_english_only_teacher_keeps_todays_targets_and_labels_no_other_side(tmp_path):
    from psp_hf.training.loop.trainer import Trainer

    pairs = make_bitext(tmp_path / "bitext.tsv", 200)
    TeacherCache(tmp_path / "cache").label([b for _, b in pairs], WordTeacher(), name="word-teacher")
    trainer = Trainer(_settings(tmp_path, "run", teacher="word-teacher", max_steps=2))
    trainer.train()  # the cache lacks every non-English side: labelling one would need a teacher, and fail
    assert trainer.bitext_targets == "en" and trainer.corpus is None


def test_a_resumed_run_continues_the_mono_stream_exactly(tmp_path, monkeypatch):
    from safetensors.numpy import load_file

    from psp_hf.training.loop.trainer import Trainer

    pairs = make_bitext(tmp_path / "bitext.tsv", 200)
    mono = [translate(f"{a} {b} tree") for a, b in zip(WORDS, WORDS[3:], strict=False)]
    (tmp_path / "mono.txt").write_text("\n".join(mono) + "\n", encoding="utf-8")
    teacher = MultilingualWordTeacher()
    TeacherCache(tmp_path / "cache").label([s for pair in pairs for s in pair] + mono, teacher, name=NAME)
    common = {"mono_data": [str(tmp_path / "mono.txt")], "mono_batch_size": 7, "keep": "last", "dev": "none"}
    common.update(bitext_targets="same", save_every=3)
    Trainer(_settings(tmp_path, "whole", max_steps=8, **common)).train()
    Trainer(_settings(tmp_path, "parts", max_steps=4, **common)).train()
    Trainer(_settings(tmp_path, "parts", max_steps=8, resume=True, **common)).train()
    whole, parts = (load_file(tmp_path / name / "model.safetensors") for name in ("whole", "parts"))
    assert whole.keys() == parts.keys() and all(np.array_equal(whole[k], parts[k]) for k in whole)
    seen = []
    for name in ("whole", "parts"):
        lines = (tmp_path / name / "training" / "metrics.jsonl").read_text().splitlines()
        seen.append([json.loads(line) for line in lines if '"end"' in line][-1]["sentences_seen"])
    passes = [7, 7, len(mono) - 14]  # 17 sentences: two full batches and the rest, then the next pass
    assert seen == [sum((passes * 3)[:8])] * 2


def test_cards_list_only_the_multilingual_settings_a_run_used():
    from psp_hf.training.data.multilingual import card_settings

    settings = TrainingArguments().to_dict()
    english = card_settings({**settings, "teacher_cache": "cache"})
    assert "bitext_targets" not in english and "mono_weight" not in english and "distill_weight" in english
    bitext = card_settings({**settings, "lang": "de", "teacher": NAME, "bitext_targets": "same"})
    assert bitext["bitext_targets"] == "same" and "mono_batch_size" not in bitext
    mono = card_settings({**settings, "lang": "de", "teacher": NAME, "mono_data": ["m.txt"]})
    assert mono["mono_weight"] == MONO_WEIGHT and mono["mono_data"] == ["m.txt"]
