"""The distillation commands of `psp prepare` (distill-corpus, label, mine-pairs), `make demo`'s use of them and the
comparison table (bench/)."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import pytest
import torch
from bench_scripts import bench_script
from fake_teachers import BagOfWordsTeacher

from psp_hf.cli import main as psp
from psp_hf.errors import PSPInputError
from psp_hf.teachers.labels import TeacherCache

WORD_LIST = (
    "man woman child dog cat bird horse boy girl runs walks jumps sits plays eats reads street park beach field "
    "river snow water ball bike car guitar book red blue green big small old young happy"
)
WORDS = WORD_LIST.split()


def distill_table():
    return bench_script("distill_table")


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict:
    """A distillation corpus with its report, a labelled teacher cache and a tokenizer."""
    from psp_hf.data.distill_corpus import CorpusSource, build_corpus, write_corpus
    from psp_hf.tokenization.pieces import train_tokenizer

    root = tmp_path_factory.mktemp("toy")
    rng = random.Random(0)
    sentences = list(dict.fromkeys(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 7))) for _ in range(400)))
    corpus = build_corpus([CorpusSource("toy-text", "CC0", "made up", lambda: iter(sentences))], {}, shuffle_seed=None)
    write_corpus(corpus, root / "distill-corpus")
    cache = root / "cache"
    TeacherCache(cache).label(corpus.sentences, BagOfWordsTeacher(), name="bag-of-words", chunk_size=128)
    tokenizer = root / "tokenizer"
    train_tokenizer(sentences * 2, vocab_size=80, output_dir=tokenizer)
    return {"corpus": root / "distill-corpus", "cache": cache, "tokenizer": tokenizer, "sentences": corpus.sentences}


# ----------------------------------------------------------------------------------------------- psp prepare
def test_labelling_command_records_the_corpus_for_the_card(toy, tmp_path, monkeypatch):
    import psp_hf.teachers.labels as teacher_module
    from psp_hf.training.data.teacher_corpus import TeacherCorpus

    monkeypatch.setattr(teacher_module, "load_teacher", lambda name=None, **_: BagOfWordsTeacher())
    # A cache far from its corpus: the report must come from the copy the labelling command leaves in the cache.
    cache = tmp_path / "elsewhere" / "cache"
    corpus = toy["corpus"]
    argv = ["prepare", "label", "--corpus", str(corpus), "-o", str(cache), "--teacher", "bow"]
    argv += ["--backend", "torch"]
    assert psp(argv) == 0
    meta = json.loads((cache / "meta.json").read_text())
    assert meta["corpus"] == str(corpus.resolve()) and meta["label_seconds"] >= 0
    assert json.loads((cache / "corpus-report.json").read_text())["sources"]["toy-text"]["license"] == "CC0"
    info = TeacherCorpus(cache).text_info()
    assert info["teacher"] == "bow" and info["corpus_sentences"] == len(toy["sentences"])
    assert info["training_text"].startswith(f"{len(toy['sentences']):,} unlabelled English sentences: toy-text")
    # The table finds the labelling time through a trained model's args.json.
    model = tmp_path / "model"
    (model / "training").mkdir(parents=True)
    (model / "training" / "args.json").write_text(json.dumps({"teacher_cache": str(cache)}))
    assert distill_table().training_times(model) == {"label_seconds": meta["label_seconds"]}


def test_mine_pairs_command_writes_a_pairs_file(toy, tmp_path, capsys):
    out = tmp_path / "pairs.tsv"
    assert psp(["prepare", "mine-pairs", "--cache", str(toy["cache"]), "-o", str(out), "--threshold", "0.5"]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "sentence1\tsentence2\tscore" and len(lines) > 1
    corpus = set(toy["sentences"])
    for line in lines[1:]:
        first, second, score = line.split("\t")
        assert first in corpus and second in corpus and first != second and float(score) >= 0.5
    assert f"{len(lines) - 1} pairs from {len(toy['sentences'])} sentences" in capsys.readouterr().err


def test_distillation_commands_check_their_arguments_first(toy, tmp_path, capsys, monkeypatch):
    import psp_hf.teachers.labels as teacher_module

    monkeypatch.setattr(teacher_module, "load_teacher", lambda name=None, **_: BagOfWordsTeacher())
    a_file = tmp_path / "file.txt"
    a_file.write_text("x\n")
    labelled = len(TeacherCache(toy["cache"]).chunk_files())
    cases = [
        (["distill-corpus", "-o", str(a_file)], f"--output {a_file}: exists and is not a folder"),
        (["distill-corpus", "-o", str(tmp_path / "p"), "--data-dir", str(tmp_path / "no-data")], "no-data not found"),
        (
            ["label", "--corpus", str(toy["corpus"]), "-o", str(toy["cache"]), "--teacher", "other"],
            "holds labels of teacher 'bag-of-words' (dim 12, backend torch); "
            "refusing to mix in 'other' (backend onnx-int8)",
        ),
        (
            ["label", "--corpus", str(tmp_path / "nothing"), "-o", str(tmp_path / "c")],
            "no distillation corpus there",
        ),
        (["label", "--corpus", str(toy["corpus"]), "-o", str(a_file)], "exists and is not a folder"),
        (["mine-pairs", "--cache", str(tmp_path), "-o", str(tmp_path / "p.tsv")], "no teacher labels there"),
        (["mine-pairs", "--cache", str(toy["cache"]), "-o", str(tmp_path)], "is a folder; give a file name"),
    ]
    for argv, message in cases:
        assert psp(["prepare", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("psp: error: ") and message in err and err.count("\n") == 1, err
    assert a_file.read_text() == "x\n" and not (tmp_path / "p").exists()
    assert len(TeacherCache(toy["cache"]).chunk_files()) == labelled
    with pytest.raises(SystemExit):  # argparse: a threshold outside [-1, 1]
        psp(["prepare", "mine-pairs", "--cache", str(toy["cache"]), "-o", "p.tsv", "--threshold", "2"])


def test_corpus_output_in_a_read_only_folder_is_one_error_line(tmp_path, capsys, monkeypatch):
    import psp_hf.data.checks as checks

    locked = tmp_path / "locked"
    locked.mkdir()
    # A permission check, not chmod: tests may run as root, who may write anywhere.
    real_access = os.access
    monkeypatch.setattr(checks.os, "access", lambda path, mode: Path(path) != locked and real_access(path, mode))
    assert psp(["prepare", "distill-corpus", "-o", str(locked / "corpus"), "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert (
        err == f"psp: error: --output {locked / 'corpus'}: cannot write in {locked} (permission denied or read-only)\n"
    )
    assert list(locked.iterdir()) == []


def test_the_demo_reuses_a_corpus_built_under_the_old_name(tmp_path):
    from psp_hf.experiments.demo import corpus_folder, labelled_sentences

    assert corpus_folder(tmp_path) == tmp_path / "distill-corpus"  # a fresh demo builds it under the new name
    (tmp_path / "pool").mkdir()
    (tmp_path / "pool" / "sentences.parquet").write_bytes(b"")
    assert corpus_folder(tmp_path) == tmp_path / "pool"  # an earlier demo's corpus (and its labels) is reused
    (tmp_path / "distill-corpus").mkdir()
    (tmp_path / "distill-corpus" / "sentences.parquet").write_bytes(b"")
    assert corpus_folder(tmp_path) == tmp_path / "distill-corpus"
    assert labelled_sentences({}) == "150000"
    assert labelled_sentences({"PSP_DEMO_POOL": "2000"}) == "2000"  # the variable's old name
    assert labelled_sentences({"PSP_DEMO_POOL": "2000", "PSP_DEMO_SENTENCES": "3000"}) == "3000"


# ----------------------------------------------------------------------------------------------- the table
def test_comparison_table_on_tiny_models(toy, tmp_path, capsys):
    from psp_hf.data_folder import data_dir

    if not (data_dir() / "sts" / "stsbenchmark" / "test.tsv").is_file():
        if os.environ.get("CI"):
            pytest.fail(f"real data missing at {data_dir()} (set PSP_DATA)")
        pytest.skip("evaluation data not found; set PSP_DATA")
    from transformers import PreTrainedTokenizerFast

    from psp_hf import PSPEncoder

    main = distill_table().main
    tokenizer = PreTrainedTokenizerFast.from_pretrained(toy["tokenizer"])
    untrained = tmp_path / "untrained"
    PSPEncoder.from_tokenizer(tokenizer, hidden_size=8, seed=0).save_pretrained(untrained)
    distilled = tmp_path / "distilled"
    # Distillation only, through the command line (the table reads the training time `psp train` records).
    trained = psp(
        ["train", "--teacher-cache", str(toy["cache"]), "--distill-weight", "1", "-o", str(distilled),
         "--tokenizer", str(toy["tokenizer"]), "--dim", "8", "--distill-batch-size", "32", "--batch-size", "16",
         "--megabatch-size", "2", "--megabatch-anneal", "0", "--lr", "0.05", "--dev", "none", "--keep", "last",
         "--threads", "1", "--quiet", "--save-every", "0", "--epochs", "1"]
    )  # fmt: skip
    assert trained == 0
    output = tmp_path / "table.json"
    code = main(
        ["--untrained", str(untrained), "--distill", str(distilled), "--no-teacher", "--speed-sentences", "500",
         "--json", str(output)]
    )  # fmt: skip
    assert code == 0
    table = json.loads(output.read_text())
    assert [row["row"] for row in table["rows"]] == ["untrained", "distill"]
    assert {entry["row"] for entry in table["skipped"]} == {"pairs", "combined", "teacher", "model2vec"}
    for row in table["rows"]:
        assert -100 <= row["sts12-16"] <= 100 and set(row["years"]) == {"sts12", "sts13", "sts14", "sts15", "sts16"}
        assert row["sentences_per_s"] > 0
    assert table["rows"][1]["train_seconds"] is not None and "train_seconds" not in table["rows"][0]
    printed = capsys.readouterr().out
    assert "| distillation only (`distilled`) |" in printed and "Skipped: teacher (no model given)." in printed
    assert main(["--pairs", str(tmp_path / "missing"), "--no-teacher"]) == 2
    # --json naming a folder fails before any model is evaluated.
    assert main(["--distill", str(distilled), "--no-teacher", "--json", str(tmp_path)]) == 2
    assert "--json" in capsys.readouterr().err
    # --make-untrained: a random table with the vocabulary and dimension of another model.
    code = main(
        ["--make-untrained", str(tmp_path / "random"), "--untrained-like", str(distilled), "--no-teacher",
         "--speed-sentences", "0"]
    )  # fmt: skip
    assert code == 0
    random_model = PSPEncoder.from_pretrained(tmp_path / "random")
    trained_model = PSPEncoder.from_pretrained(distilled)
    assert random_model.dim == trained_model.dim and len(random_model.tokenizer) == len(trained_model.tokenizer)
    assert not torch.equal(random_model.model.embeddings.weight, trained_model.model.embeddings.weight)


def test_model2vec_helper_names_the_missing_extra(monkeypatch, tmp_path):
    make_model2vec = distill_table().make_model2vec
    monkeypatch.setitem(sys.modules, "model2vec.distill", None)  # as if the extra were not installed
    with pytest.raises(PSPInputError, match=r"model2vec\[distill\]"):
        make_model2vec(tmp_path / "m2v")


def test_the_demo_trains_in_process_and_shows_the_command_line(tmp_path, monkeypatch, capsys):
    from psp_hf.experiments import demo
    from psp_hf.training import TrainingArguments
    from psp_hf.training.arguments.command_line import with_flags
    from psp_hf.training.loop import trainer

    trained = []
    monkeypatch.setattr(trainer, "train", trained.append)
    labels = tmp_path / "labels"
    labels.mkdir()
    demo._train("distil", {"teacher_cache": str(labels), "output_dir": "m", **demo.DEMO_DISTILL_SETTINGS})
    demo._train("pairs", {"data": ["p.tsv"], "output_dir": "c", "tokenizer": "m", **demo.DEMO_PAIRS_SETTINGS})
    assert [(a.teacher_cache, a.dim, a.epochs) for a in trained] == [(str(labels), 384, 10), (None, 384, 1)]
    assert trained[1].max_steps == 300 and trained[1].data == ["p.tsv"]
    shown = [line for line in capsys.readouterr().err.splitlines() if line.startswith("$ psp train ")]
    assert len(shown) == 2
    # What the demo shows gives what it trains with.
    assert with_flags(TrainingArguments(), shown[0].split()[3:]) == trained[0]
