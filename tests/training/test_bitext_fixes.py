"""What a new user of bitext tripped over: the prepared tokenizer, small vocabularies, the card's data line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toy_bitext import WordTeacher, make_bitext


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    from psp_hf.data.prepare import prepare_bitext

    root = tmp_path_factory.mktemp("bitext")
    make_bitext(root / "one.tsv", 300, seed=1)
    make_bitext(root / "two.tsv", 300, seed=2)
    report = prepare_bitext([root / "one.tsv", root / "two.tsv"], "de", root / "de-en", vocab_size=4000)
    assert [item["pairs"] for item in report["inputs"]] == [300, 300] or report["pairs_in"] > 0
    return root / "de-en"


def test_prepare_warns_when_the_vocabulary_is_smaller_than_asked(prepared, capsys):
    from psp_hf.cli.prepare_sources import print_summary

    report = json.loads((prepared / "report" / "report.json").read_text())
    pieces = report["tokenizer"]["pieces"]
    assert pieces < 4000
    assert report["tokenizer"]["warning"] == (
        f"warning: vocabulary has {pieces:,} pieces of the 4,000 asked: the text supports no more"
    )
    print_summary(report)
    assert "the text supports no more" in capsys.readouterr().err


def test_train_uses_the_tokenizer_psp_prepare_wrote(prepared, tmp_path, train_here):
    code, err = train_here(
        *[
            "--data",
            str(prepared),
            "--lang",
            "de",
            "-o",
            str(tmp_path / "run"),
            "--dim",
            "8",
            "--max-steps",
            "2",
            "--batch-size",
            "8",
            "--megabatch-size",
            "1",
            "--dev",
            "none",
            "--threads",
            "1",
        ],  # fmt: skip
    )
    assert code == 0, err
    assert "using the" in err and "tokenizer that psp prepare trained" in err
    used = json.loads((tmp_path / "run" / "tokenizer.json").read_text())["model"]["vocab"]
    written = json.loads((prepared / "tokenizer" / "tokenizer.json").read_text())["model"]["vocab"]
    assert used == written
    card = (tmp_path / "run" / "README.md").read_text()
    # The card names the data by what it is, not by this machine's path; and says how to evaluate.
    assert "bitext pairs (de–en) filtered by `psp prepare bitext` from `one.tsv`, `two.tsv`" in card
    assert str(tmp_path) not in card and "has not been evaluated yet" in card


def test_train_warns_when_its_own_vocabulary_is_smaller_than_asked(tmp_path, train_here):
    make_bitext(tmp_path / "pairs.tsv", 200)
    code, err = train_here(
        *[
            "--data",
            str(tmp_path / "pairs.tsv"),
            "--lang",
            "de",
            "-o",
            str(tmp_path / "run"),
            "--dim",
            "8",
            "--max-steps",
            "1",
            "--vocab-size",
            "5000",
            "--dev",
            "none",
            "--threads",
            "1",
            "--quiet",
        ],  # fmt: skip
    )
    assert code == 0, err
    assert "pieces of the 5,000 asked: the text supports no more" in err


def test_label_takes_the_english_side_of_a_prepared_bitext_folder(prepared, tmp_path, monkeypatch):
    from psp_hf.cli.prepare_sources import bitext_english
    from psp_hf.teachers.labels import TeacherCache

    english = bitext_english(prepared)
    assert english and all(" " in s and not s.endswith("o") for s in english[:20])
    monkeypatch.setattr("psp_hf.teachers.labels.load_teacher", lambda name, device="cpu": WordTeacher())
    from psp_hf.cli import main

    assert main(
        ["prepare", "label", "--corpus", str(prepared), "-o", str(tmp_path / "cache"), "--backend", "torch"]
    ) in (0, None)
    sentences, vectors = TeacherCache(tmp_path / "cache").load()
    assert sorted(sentences) == sorted(english) and vectors.shape == (len(english), 6)
    assert bitext_english(tmp_path / "cache") is None


def test_card_names_a_few_input_files_and_counts_the_rest(tmp_path):
    from psp_hf.hub.card import LISTED_INPUTS, describe_training_data

    folder = tmp_path / "data"
    (folder / "report").mkdir(parents=True)
    inputs = [{"path": f"/somewhere/gettext-prog{i}-ar.tsv", "pairs": 10} for i in range(LISTED_INPUTS + 5)]
    report = {"inputs": inputs, "pairs_out": 90, "kind": "bitext", "languages": ["ar", "en"]}
    (folder / "report" / "report.json").write_text(json.dumps(report), encoding="utf-8")
    text = describe_training_data(str(folder))
    assert f"`gettext-prog{LISTED_INPUTS - 1}-ar.tsv` and 5 more files" in text
    assert f"gettext-prog{LISTED_INPUTS}-ar.tsv" not in text and "/somewhere" not in text
