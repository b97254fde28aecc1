"""The teacher inside the training loop: distillation loss, teacher-aware negatives, settings, resume, card."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from fake_teachers import TEACHER_DIM, BagOfWordsTeacher
from safetensors.torch import load_file

from psp_hf.errors import PSPInputError
from psp_hf.teachers.labels import TeacherCache
from psp_hf.training.arguments.training_arguments import TrainingArguments
from psp_hf.training.loop.checkpoint import CheckpointStore, read_checkpoint_state
from psp_hf.training.loop.miner import NO_NEGATIVE, MegaBatchMiner
from psp_hf.training.loop.trainer import Trainer

WORD_LIST = (
    "man woman child dog cat bird horse boy girl runs walks jumps sits plays eats reads street park beach field "
    "river snow water ball bike car guitar book red blue green big small old young happy"
)
WORDS = WORD_LIST.split()


def make_sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return list(dict.fromkeys(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 7))) for _ in range(n)))


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict:
    """A tokenizer, a labelled teacher cache with a corpus report, and paraphrase-like pairs."""
    from psp_hf.data.distill_corpus import CorpusSource, build_corpus, write_corpus
    from psp_hf.tokenization.pieces import train_tokenizer

    root = tmp_path_factory.mktemp("toy")
    sentences = make_sentences(400)
    corpus = build_corpus([CorpusSource("toy-text", "CC0", "made up", lambda: iter(sentences))], {}, shuffle_seed=None)
    write_corpus(corpus, root / "distill-corpus")
    cache = root / "cache"
    TeacherCache(cache).label(corpus.sentences, BagOfWordsTeacher(), name="bag-of-words", chunk_size=128)
    tokenizer = root / "tokenizer"
    train_tokenizer(sentences * 2, vocab_size=80, output_dir=tokenizer)
    rng = random.Random(1)
    lines = ["sentence1\tsentence2"]
    for sentence in corpus.sentences[:200]:
        words = sentence.split()
        rng.shuffle(words)
        lines.append(f"{sentence}\t{' '.join(words)}")
    pairs = root / "pairs.tsv"
    pairs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"cache": cache, "tokenizer": tokenizer, "pairs": pairs, "sentences": corpus.sentences}


def args(toy: dict, out: Path, **overrides) -> TrainingArguments:
    settings = {
        "teacher_cache": str(toy["cache"]),
        "distill_weight": 1.0,
        "output_dir": str(out),
        "tokenizer": str(toy["tokenizer"]),
        "dim": 8,
        "distill_batch_size": 32,
        "batch_size": 16,
        "megabatch_size": 2,
        "megabatch_anneal": 0,
        "lr": 0.05,
        "dev": "none",
        "keep": "last",
        "threads": 1,
        "quiet": True,
        "save_every": 0,
        "log_every": 1,
        "shuffle_buffer": 50,
    }
    settings.update(overrides)
    return TrainingArguments(**settings)


def metrics(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "training" / "metrics.jsonl").read_text().splitlines()]


# ----------------------------------------------------------------------------------------------- miner
def test_teacher_aware_miner_skips_paraphrase_negatives():
    # Two pairs in the mega-batch layout: rows 0, 1 are the first sides of pairs 0, 1; rows 2, 3 their second
    # sides. For anchor 0 the only candidate besides its partner (2) is 3, which the teacher calls a paraphrase.
    embeddings = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.99, 0.1]])
    keys = torch.arange(4)
    miner = MegaBatchMiner(max_size=1, anneal=0)
    plain = miner.mine(embeddings, keys)
    assert plain.tolist() == [3, 2, 1, 0]
    teacher = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [1.0, 0.05]])
    filtered = miner.mine(embeddings, keys, teacher=teacher, teacher_threshold=0.9)
    # (0, 3) is masked both ways; 0 and 3 have nothing else left, 1 and 2 keep their negatives.
    assert filtered.tolist() == [NO_NEGATIVE, 2, 1, NO_NEGATIVE]
    assert miner.last_teacher_masked == 2
    # Without a label for sentence 3 (NaN row) nothing is filtered.
    teacher[3] = float("nan")
    assert miner.mine(embeddings, keys, teacher=teacher, teacher_threshold=0.9).tolist() == plain.tolist()
    assert miner.last_teacher_masked == 0


def test_teacher_mask_matches_a_per_row_reference():
    rng = torch.Generator().manual_seed(0)
    n = 12
    embeddings = torch.randn(2 * n, 5, generator=rng)
    teacher = torch.randn(2 * n, 4, generator=rng)
    teacher[[3, 17]] = float("nan")
    keys = torch.arange(2 * n)
    got = MegaBatchMiner(max_size=1, anneal=0, chunk_rows=5).mine(
        embeddings, keys, teacher=teacher, teacher_threshold=0.3
    )
    unit = torch.nn.functional.normalize(embeddings, dim=1)
    t_unit = torch.nn.functional.normalize(teacher, dim=1)
    for anchor in range(2 * n):
        pool = range(n, 2 * n) if anchor < n else range(n)
        partner = anchor + n if anchor < n else anchor - n
        allowed = [
            c
            for c in pool
            if c != partner
            and (
                torch.isnan(teacher[anchor]).any()
                or torch.isnan(teacher[c]).any()
                or float(t_unit[anchor] @ t_unit[c]) < 0.3
            )
        ]
        expected = max(allowed, key=lambda c: float(unit[anchor] @ unit[c])) if allowed else NO_NEGATIVE
        assert got[anchor].item() == expected, anchor


# ----------------------------------------------------------------------------------------------- settings
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"teacher_cache": None, "data": ["x.tsv"]}, "--distill-weight needs --teacher-cache"),
        ({"teacher_cache": None}, "--data is required"),
        ({"distill_weight": 0.0}, "distillation only"),
        ({"data": ["x.tsv"], "margin_weight": 0.0, "distill_weight": 0.0}, "distillation only"),
        ({"teacher_negative_threshold": 0.8}, "needs --data"),
        ({"teacher_negative_threshold": 1.5, "data": ["x.tsv"]}, "in [-1, 1]"),
        ({"init": "word-vectors"}, "--init-vectors"),
        ({"piece_weights": "learned"}, "--piece-weights must be one of"),
        ({"distill_weight": -1.0}, ">= 0"),
        ({"teacher_cache": "/nonexistent/cache"}, "no such folder"),
        ({"corpus_weights": "wiki=half"}, "SOURCE=WEIGHT pairs"),
        (
            {"corpus_weights": "w=1", "teacher_cache": None, "data": ["x.tsv"], "distill_weight": 0.0},
            "it needs --teacher",
        ),
    ],
)
def test_teacher_settings_are_validated(toy, tmp_path, overrides, message):
    with pytest.raises(PSPInputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        args(toy, tmp_path / "out", **overrides).validate()


def test_no_data_and_no_teacher_is_refused():
    with pytest.raises(PSPInputError, match="--teacher-cache"):
        TrainingArguments(output_dir="x").validate()


def test_threshold_flag_parses_as_a_float(tmp_path):
    import argparse

    from psp_hf.training.arguments.training_arguments import add_arguments, arguments_from_namespace

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    cache = tmp_path / "cache"
    cache.mkdir()
    namespace = parser.parse_args(
        [
            "--data",
            "x.tsv",
            "-o",
            "o",
            "--teacher-cache",
            str(cache),
            "--distill-weight",
            "0.5",
            "--teacher-negative-threshold",
            "0.85",
        ]
    )
    parsed = arguments_from_namespace(namespace)
    assert parsed.teacher_negative_threshold == 0.85 and parsed.distill_weight == 0.5


# ----------------------------------------------------------------------------------------------- training
def test_distillation_only_moves_the_student_toward_the_teacher(toy, tmp_path):
    out = tmp_path / "distilled"
    trainer = Trainer(args(toy, out, epochs=6))
    trainer.train()
    records = [r for r in metrics(out) if r["event"] == "train"]
    steps_per_epoch = -(-len(toy["sentences"]) // 32)
    assert records[-1]["step"] == 6 * steps_per_epoch
    first, last = records[0]["distill_loss"], records[-1]["distill_loss"]
    assert last < 0.6 * first, (first, last)
    # A projection was learned (dim 8 -> teacher 12) and saved beside the model, which is the plain table.
    assert trainer.projection is not None
    weight = load_file(out / "training" / "projection.safetensors")["weight"]
    assert weight.shape == (TEACHER_DIM, 8)
    from psp_hf import PSPEncoder

    model = PSPEncoder.from_pretrained(out)
    assert model.dim == 8
    sentences = toy["sentences"][:64]
    student = model.encode(sentences) @ weight.numpy().T
    student /= np.linalg.norm(student, axis=1, keepdims=True)
    _, target = TeacherCache(toy["cache"]).load(sentences)
    assert float((student * target).sum(1).mean()) > 0.7
    # The card names the teacher and the text.
    card = (out / "README.md").read_text()
    assert "Teacher: `bag-of-words`" in card
    assert "toy-text" in card and "CC0" in card
    assert "| margin loss weight | 0 |" in card and "margin δ" not in card  # pair settings left off


def test_combined_run_with_teacher_filter_and_sif_weights(toy, tmp_path):
    out = tmp_path / "combined"
    trainer = Trainer(
        args(
            toy,
            out,
            data=[str(toy["pairs"])],
            distill_weight=0.5,
            margin_weight=1.0,
            teacher_negative_threshold=0.6,
            piece_weights="sif",
            epochs=2,
        )
    )
    trainer.train()
    records = [r for r in metrics(out) if r["event"] == "train"]
    assert records[-1]["step"] == 2 * 13  # 200 pairs / 16 per mini-batch, 2 epochs
    assert all("margin_loss" in r and "distill_loss" in r for r in records)
    assert sum(r["teacher_masked"] for r in records) > 0
    # The distillation stream cycled through the corpus (26 batches of up to 32 sentences, the last of a pass short).
    n = len(toy["sentences"])
    passes, rest = divmod(26, -(-n // 32))
    assert records[-1]["distill_epoch"] == passes + (rest > 0) and passes >= 1
    assert records[-1]["sentences_seen"] == passes * n + min(rest * 32, n)
    # SIF weights were computed, stayed fixed, and every loader applies them.
    from transformers import AutoModel, AutoTokenizer

    from psp_hf import PSPEncoder

    model = PSPEncoder.from_pretrained(out)
    weights = model.model.piece_weights.detach()
    assert model.model.config.use_piece_weights and float(weights.min()) < 0.5 < float(weights.max())
    sentences = ["a dog runs in the park", "the happy girl reads a book"]
    auto = AutoModel.from_pretrained(out, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(out, trust_remote_code=True)
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        via_auto = auto(**batch).sentence_embedding.numpy()
    np.testing.assert_allclose(via_auto, model.encode(sentences), rtol=1e-5, atol=1e-6)
    card = (out / "README.md").read_text()
    assert "SIF weights" in card and "| distillation corpus sentences (teacher-labelled) |" in card
    assert "- Teacher: `bag-of-words` (distillation loss weight 0.5, margin loss weight 1)" in card
    info = json.loads((out / "training" / "args.json").read_text())
    assert info["teacher_cache"] == str(toy["cache"])


def test_resumed_distillation_ends_at_the_same_step_and_weights(toy, tmp_path):
    common = {
        "data": [str(toy["pairs"])],
        "distill_weight": 1.0,
        "epochs": 2,
        "save_every": 5,
        "distill_batch_size": 48,
    }
    reference = tmp_path / "reference"
    Trainer(args(toy, reference, **common)).train()
    final = metrics(reference)[-1]["step"]

    # Stop a run at a mega-batch boundary by a step limit (what a kill after a checkpoint leaves), then continue it:
    # the pair and corpus streams, projection and optimizer states resume (tests/training/test_train.py: real kill).
    killed5 = tmp_path / "stopped"
    Trainer(args(toy, killed5, **common, max_steps=6)).train()
    saved = read_checkpoint_state(killed5 / "training")
    assert saved["step"] == 6 and saved["distill_position"] == 6 * 48
    weights = load_file(CheckpointStore(killed5 / "training").folder() / "model.safetensors")
    assert "projection.weight" in weights  # the projection is part of the checkpointed module
    Trainer(args(toy, killed5, **common, resume=True)).train()
    assert metrics(killed5)[-1]["step"] == final
    expected, got = load_file(reference / "model.safetensors"), load_file(killed5 / "model.safetensors")
    assert torch.allclose(expected["embeddings.weight"], got["embeddings.weight"], atol=1e-6)
    state = read_checkpoint_state(killed5 / "training")
    reference_state = read_checkpoint_state(reference / "training")
    assert (state["distill_epoch"], state["distill_position"]) == (
        reference_state["distill_epoch"],
        reference_state["distill_position"],
    )


def test_word_vector_init_sets_the_table_before_training(toy, tmp_path):
    vectors = tmp_path / "vectors.txt"
    vectors.write_text(
        "2 8\n"
        + "".join(f"{word} {' '.join(str(float(i + j)) for j in range(8))}\n" for i, word in enumerate(["dog", "park"]))
    )
    trainer = Trainer(args(toy, tmp_path / "out", init="word-vectors", init_vectors=str(vectors)))
    trainer._setup()
    from psp_hf.training.model.initial_tables import piece_texts

    texts = piece_texts(trainer.tokenizer)
    table = trainer.model.embeddings.weight.detach()
    matched = [word for word in ("dog", "park") if word in texts]
    assert matched, "the toy vocabulary should hold a whole-word piece of the vector file"
    for word in matched:
        i = ["dog", "park"].index(word)
        assert torch.equal(table[texts.index(word)], torch.arange(8, dtype=torch.float32) + i)


# ----------------------------------------------------------------------------------------------- table
def test_init_teacher_embeds_each_piece(toy, tmp_path, monkeypatch):
    import psp_hf.teachers.labels as teacher_module
    from psp_hf.training.model.initial_tables import teacher_table

    loaded = []
    monkeypatch.setattr(
        teacher_module, "load_teacher", lambda name=None, **_: loaded.append(name) or BagOfWordsTeacher()
    )
    trainer = Trainer(args(toy, tmp_path / "out", init="teacher"))
    trainer._setup()
    assert loaded == ["bag-of-words"]  # the teacher the cache names
    expected = teacher_table(trainer.tokenizer, BagOfWordsTeacher(), 8)
    np.testing.assert_allclose(trainer.model.embeddings.weight.detach().numpy(), expected, rtol=1e-5, atol=1e-6)


def test_corpus_shards_are_equal_disjoint_and_reshuffled(toy):
    from psp_hf.training.data.teacher_corpus import TeacherCorpus

    corpora = [TeacherCorpus(toy["cache"], seed=3, rank=rank, world_size=3) for rank in range(3)]
    shards = [corpus.shard(0) for corpus in corpora]
    n = len(corpora[0])
    assert all(len(shard) == n // 3 for shard in shards)
    assert len(set(np.concatenate(shards).tolist())) == 3 * (n // 3)
    assert not np.array_equal(corpora[0].shard(1), shards[0])
    vectors = corpora[0].lookup([corpora[0].sentences[5], "not in the cache"])
    assert torch.isnan(vectors[1]).all() and not torch.isnan(vectors[0]).any()
    np.testing.assert_allclose(vectors[0].numpy(), corpora[0].vectors[5].astype(np.float32))


WORKER = """
import sys, torch
from psp_hf.training.arguments.training_arguments import TrainingArguments
from psp_hf.training.loop.trainer import Trainer

pairs, cache, tokenizer, out = sys.argv[1:5]
args = TrainingArguments(data=[pairs], teacher_cache=cache, distill_weight=1.0, output_dir=out, tokenizer=tokenizer,
                         dim=8, batch_size=16, distill_batch_size=32, megabatch_size=2, megabatch_anneal=0, epochs=1,
                         dev="none", threads=1, quiet=True, keep="last", save_every=0)
trainer = Trainer(args)
trainer.train()
torch.save({"weights": trainer.model.state_dict()["embeddings.weight"], "steps": trainer.state.step,
            "projection": trainer.projection.weight.detach(), "seen": trainer.state.sentences_seen},
           f"{out}/rank{trainer.rank}.pt")
"""


@pytest.mark.slow
def test_two_cpu_processes_distil_to_identical_weights(toy, tmp_path):
    import subprocess
    import sys

    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    out = tmp_path / "out"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            str(worker),
            str(toy["pairs"]),
            str(toy["cache"]),
            str(toy["tokenizer"]),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [torch.load(out / f"rank{rank}.pt", weights_only=True) for rank in (0, 1)]
    assert ranks[0]["steps"] == ranks[1]["steps"] == 7  # 100 pairs per process in batches of 16
    shard = len(toy["sentences"]) // 2  # each process's share of a pass over the corpus
    passes, rest = divmod(7, -(-shard // 32))
    assert ranks[0]["seen"] == ranks[1]["seen"] == 2 * (passes * shard + min(rest * 32, shard))
    assert torch.equal(ranks[0]["weights"], ranks[1]["weights"])
    assert torch.equal(ranks[0]["projection"], ranks[1]["projection"])


@pytest.mark.parametrize(("transform", "shrink"), [("center", 0.1), ("whiten", 0.1), ("whiten", 1.0)])
def test_teacher_transform_distils_toward_vectors_without_their_shared_direction(toy, tmp_path, transform, shrink):
    # A teacher whose rows share one large direction: centred, the corpus's vectors average to zero and keep unit
    # norm, and the run learns the centred targets (the raw ones would be nearly one vector for every sentence).
    # They are exactly transform_rows(rows, transform, --teacher-whiten-shrink), which S changes.
    from psp_hf.teachers.combine import transform_rows

    sentences, raw = TeacherCache(toy["cache"]).load()
    shifted = tmp_path / "shifted"
    offset = np.full(TEACHER_DIM, 3.0, dtype=np.float32)
    TeacherCache(shifted).write(sentences, raw + offset, name="shifted", backend="torch")
    out = tmp_path / "centred"
    settings = dict(teacher_transform=transform, teacher_whiten_shrink=shrink)
    trainer = Trainer(args(toy, out, epochs=6, teacher_cache=str(shifted), **settings))
    trainer.train()
    vectors = trainer.corpus.vectors.astype(np.float32)
    shifted_rows = (raw + offset) / np.linalg.norm(raw + offset, axis=1, keepdims=True)
    assert np.linalg.norm(shifted_rows.mean(axis=0)) > 0.9  # raw: nearly one vector for every sentence
    assert np.linalg.norm(vectors.mean(axis=0)) < 0.1  # renormalising the rows leaves a small remainder
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=3e-3)
    records = [r for r in metrics(out) if r["event"] == "train"]
    assert records[-1]["distill_loss"] < 0.6 * records[0]["distill_loss"]
    saved = json.loads((out / "training" / "args.json").read_text())
    assert (saved["teacher_transform"], saved["teacher_whiten_shrink"]) == (transform, shrink)
    stored_sentences, stored = TeacherCache(shifted).load()  # as the run read them (float16)
    order = [stored_sentences.index(sentence) for sentence in trainer.corpus.sentences]
    np.testing.assert_allclose(vectors, transform_rows(stored, transform, shrink)[order], atol=3e-3)
    if shrink != 0.1:
        assert np.abs(vectors - transform_rows(stored, transform, 0.1)[order]).max() > 0.05


def test_bitext_teacher_transform_keeps_every_sentence_and_unit_norm():
    from psp_hf.training.data.bitext_teacher import BitextTeacher

    rng = np.random.default_rng(0)
    vectors = {f"s{i}": (rng.normal(size=6) + 4.0).astype(np.float16) for i in range(50)}
    teacher = BitextTeacher(vectors, "t", Path("."), 0)
    before = teacher.lookup(["s0", "s1"]).numpy()
    teacher.transform("center")
    after = teacher.lookup(["s0", "s1"]).numpy()
    assert float(before[0] @ before[1] / np.linalg.norm(before[0]) / np.linalg.norm(before[1])) > 0.9
    assert abs(float(after[0] @ after[1])) < 0.9 and np.allclose(np.linalg.norm(after, axis=1), 1.0, atol=3e-3)
    assert len(teacher) == 50
