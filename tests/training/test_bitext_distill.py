"""Multilingual distillation from bitext: the loss, labelling the English side through the cache, a tiny run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from toy_bitext import WORDS, WordTeacher, make_bitext, translate

from psp_hf.errors import PSPInputError
from psp_hf.teachers.labels import TeacherCache
from psp_hf.training.arguments.training_arguments import TrainingArguments
from psp_hf.training.data.bitext_teacher import BitextTeacher, mining_accuracy, pair_key, scan_bitext
from psp_hf.training.losses.distillation import pair_distill_loss


def test_pair_distill_loss_pulls_both_sides_toward_the_teachers_english_vector():
    torch.manual_seed(0)
    table = torch.nn.Embedding(8, 5)
    projection = torch.nn.Linear(5, 3, bias=False)
    xx_pieces, en_pieces = torch.tensor([0, 1, 2]), torch.tensor([3, 4])
    teacher = torch.nn.functional.normalize(torch.tensor([[0.2, -1.0, 0.5]]), dim=1)

    def cosines() -> tuple[float, float]:
        with torch.no_grad():
            xx = projection(table(xx_pieces).mean(0, keepdim=True))
            en = projection(table(en_pieces).mean(0, keepdim=True))
            return tuple(float(torch.cosine_similarity(v, teacher).item()) for v in (xx, en))

    before = cosines()
    optimizer = torch.optim.Adam([*table.parameters(), *projection.parameters()], lr=0.05)
    for _ in range(150):
        mapped = projection(torch.cat([table(xx_pieces).mean(0, keepdim=True), table(en_pieces).mean(0, keepdim=True)]))
        loss = pair_distill_loss(mapped, teacher)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after = cosines()
    assert min(before) < 0.9
    assert after[0] > 0.99 and after[1] > 0.99, (before, after)
    # The loss is the mean over both sides: zero only when both match.
    assert float(pair_distill_loss(torch.cat([teacher, -teacher]), teacher)) == pytest.approx(1.0)


def test_bitext_teacher_labels_only_what_the_cache_lacks_and_folds_case(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    teacher = WordTeacher()
    TeacherCache(cache).label(["A man runs", "the dog sits"], teacher, name="word-teacher")
    first = BitextTeacher.prepare(["A man runs", "a girl plays"], cache, "word-teacher", load=lambda name: teacher)
    assert first.labelled_now == 1 and len(first) == 2
    again = BitextTeacher.prepare(["A man runs", "a girl plays"], cache, None, load=lambda name: 1 / 0)
    assert again.labelled_now == 0  # everything was cached: no teacher is loaded
    expected = WordTeacher().encode(["a girl plays"])[0]
    assert np.allclose(again.lookup(["a girl plays"]).numpy()[0], expected, atol=2e-3)
    # A teacher that lowercases its input: a lowercased sentence reuses the original-case label.
    monkeypatch.setattr("psp_hf.training.data.bitext_teacher._teacher_lowercases", lambda name: True)
    folded = BitextTeacher.prepare(["the dog sits", "a man runs"], cache, None, load=lambda name: 1 / 0)
    assert folded.labelled_now == 0
    assert np.allclose(folded.lookup(["a man runs"]).numpy(), again.lookup(["A man runs"]).numpy())
    with pytest.raises(PSPInputError, match="holds labels of teacher 'word-teacher'"):
        BitextTeacher.prepare(["x"], cache, "another-teacher", load=lambda name: teacher)


def test_scan_holds_back_the_same_pairs_whatever_the_order(tmp_path):
    from psp_hf.training.data.pairs import PairSource

    pairs = make_bitext(tmp_path / "a.tsv", 400)
    reversed_file = tmp_path / "b.tsv"
    reversed_file.write_text("de\ten\n" + "".join(f"{a}\t{b}\n" for a, b in pairs[::-1]), encoding="utf-8")
    scans = [
        scan_bitext(PairSource([str(path)], lang="de"), 1000, True) for path in (tmp_path / "a.tsv", reversed_file)
    ]
    assert scans[0].dev and set(scans[0].dev) == set(scans[1].dev)
    assert all(pair_key(a, b) % 20 == 0 for a, b in scans[0].dev)
    assert scans[0].english == {b for a, b in pairs} - {b for _, b in scans[0].dev}


def test_tiny_bitext_run_distills_both_languages_and_picks_by_mining_accuracy(tmp_path):
    from psp_hf import load
    from psp_hf.training.loop.trainer import Trainer

    pairs = make_bitext(tmp_path / "bitext.tsv", 500)
    cache = tmp_path / "cache"
    TeacherCache(cache).label([b for _, b in pairs], WordTeacher(), name="word-teacher")
    settings = {
        "data": [str(tmp_path / "bitext.tsv")],
        "lang": "de",
        "teacher": "word-teacher",
        "teacher_cache": str(cache),
        "output_dir": str(tmp_path / "run"),
        "vocab_size": 120,
        "dim": 8,
        "batch_size": 16,
        "megabatch_size": 2,
        "megabatch_anneal": 0,
        "lr": 0.05,
        "init_std": 0.1,
        "epochs": 6,
        "eval_every": 40,
        "threads": 1,
        "quiet": True,
        "save_every": 0,
        "log_every": 5,
    }
    args = TrainingArguments(**settings)
    args.validate()
    assert args.distill_weight == 1.0 and args.resolved_dev() == "bitext" and args.pair_distill()
    folder = Trainer(args).train()
    records = [json.loads(line) for line in (folder / "training" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r.get("event") == "train"]
    assert train[-1]["distill_loss"] < 0.5 * train[0]["distill_loss"]
    scores = [r["dev_bitext_accuracy"] for r in records if "dev_bitext_accuracy" in r]
    assert scores[-1] > scores[0] + 20
    model = load(folder)
    dev = scan_bitext(
        __import__("psp_hf.training.data.pairs", fromlist=["PairSource"]).PairSource(
            [str(tmp_path / "bitext.tsv")], lang="de"
        ),
        1000,
        False,
    ).dev
    assert mining_accuracy(model, dev) > 80
    card = (folder / "README.md").read_text()
    assert "word-teacher" in card


def test_init_rows_from_copies_the_rows_of_shared_pieces(tmp_path):
    from psp_hf.encoder import PSPEncoder
    from psp_hf.tokenization.pieces import train_tokenizer
    from psp_hf.training.model.setup import copy_shared_rows

    english = [" ".join(WORDS[i : i + 4]) for i in range(len(WORDS) - 4)] * 3
    english_tokenizer = train_tokenizer(english, vocab_size=60, output_dir=tmp_path / "en")
    shared_tokenizer = train_tokenizer(
        english + [translate(s) for s in english], vocab_size=90, output_dir=tmp_path / "x"
    )
    source = PSPEncoder.from_tokenizer(english_tokenizer, hidden_size=4, seed=1)
    target = PSPEncoder.from_tokenizer(shared_tokenizer, hidden_size=4, seed=2)
    before = target.model.embeddings.weight.detach().clone()
    copied = copy_shared_rows(target, source)
    source_vocab, table = english_tokenizer.get_vocab(), source.weights()[0]
    shared = {piece: row for piece, row in shared_tokenizer.get_vocab().items() if piece in source_vocab}
    assert sorted(copied) == sorted(shared.values()) and 5 < len(copied) < len(shared_tokenizer)
    after = target.model.embeddings.weight.detach()
    for piece, row in shared.items():
        assert np.allclose(after[row].numpy(), table[source_vocab[piece]])
    others = [row for piece, row in shared_tokenizer.get_vocab().items() if piece not in source_vocab]
    assert torch.equal(after[others], before[others])
