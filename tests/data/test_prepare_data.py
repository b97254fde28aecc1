"""`psp prepare` on the real data of PSP_DATA: Flickr30k caption pairs, Multi30k and WMT bitext."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("PSP_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="module")
def data() -> Path:
    if not DATA.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"PSP_DATA={DATA} is missing in CI")
        pytest.skip(f"real data not found at {DATA} (set PSP_DATA)")
    return DATA


def _assert_counts_add_up(report: dict) -> None:
    removed = sum(step["removed"] for step in report["steps"])
    assert report["pairs_in"] == removed + report["pairs_out"]
    assert report["pairs_in"] == sum(item["pairs"] for item in report["inputs"])


@pytest.mark.slow
def test_flickr_caption_pairs_as_paraphrases(data, tmp_path):
    from datasets import load_dataset

    from psp_hf.data.prepare import load_prepared_tokenizer, prepare_paraphrases

    source = data / "paraphrase" / "en" / "flickr30k-captions" / "val.pairs.tsv.gz"
    report = prepare_paraphrases([source], tmp_path / "flickr", score_filter=False, vocab_size=2000)
    _assert_counts_add_up(report)
    assert report["pairs_in"] == 9917  # the README's row count for val
    removed = {step["name"]: step["removed"] for step in report["steps"]}
    assert removed["length"] > 0 and removed["overlap"] > 0 and removed["language"] > 0
    # Captions are English: langid rejects only a few percent (short, lowercased captions it misreads).
    assert removed["language"] < 0.05 * report["pairs_in"]
    assert report["pairs_out"] > 0.9 * report["pairs_in"]

    rows = list(load_dataset(str(tmp_path / "flickr"), split="train", streaming=True))
    assert len(rows) == report["pairs_out"]
    for row in rows:
        assert row["sentence1"] == row["sentence1"].lower()
        assert 5 <= len(row["sentence1"].split()) <= 40 and 5 <= len(row["sentence2"].split()) <= 40
        assert row["overlap"] <= 0.5
    assert len({frozenset((row["sentence1"], row["sentence2"])) for row in rows}) == len(rows)

    tokenizer = load_prepared_tokenizer(tmp_path / "flickr")
    ids = tokenizer("A dog runs through the grass.").input_ids
    assert ids and tokenizer.unk_token_id not in ids
    assert report["histograms"]["overlap"]["counts"][0] > 0


@pytest.mark.slow
def test_multi30k_and_wmt_bitext(data, tmp_path):
    from datasets import load_dataset

    from psp_hf.data.prepare import load_prepared_tokenizer, prepare_bitext

    multi30k = data / "bitext" / "multi30k" / "de-en" / "val.tsv.gz"
    wmt = data / "bitext" / "wmt-news" / "de-en.tsv.gz"
    # The Multi30k file twice: every pair of the second copy is an exact duplicate.
    report = prepare_bitext([multi30k, multi30k, wmt], "de", tmp_path / "de", limit=8000, vocab_size=3000)
    _assert_counts_add_up(report)
    removed = {step["name"]: step["removed"] for step in report["steps"]}
    with gzip.open(multi30k, "rt", encoding="utf-8") as handle:
        next(handle)
        pairs = [line.rstrip("\n").lower().split("\t") for line in handle]
    distinct_in_range = {(de, en) for de, en in pairs if 3 <= len(de.split()) <= 100 and 3 <= len(en.split()) <= 100}
    assert removed["duplicate"] >= len(distinct_in_range) > 900
    assert [item["pairs"] for item in report["inputs"]] == [1014, 1014, 8000 - 2028]
    assert report["inputs"][2]["columns"] == ["de", "en"]  # WMT's testset column is ignored

    rows = list(load_dataset(str(tmp_path / "de"), split="train", streaming=True))
    assert len(rows) == report["pairs_out"] and set(rows[0]) == {"de", "en"}
    for row in rows:
        assert 3 <= len(row["de"].split()) <= 100 and 3 <= len(row["en"].split()) <= 100
        assert row["de"] == row["de"].lower()
    # One vocabulary for both languages.
    tokenizer = load_prepared_tokenizer(tmp_path / "de")
    for sentence in ["Zwei Männer überqueren die Straße.", "Two men cross the street."]:
        assert tokenizer.unk_token_id not in tokenizer(sentence).input_ids


def test_chinese_bitext_with_language_id(data, tmp_path):
    from psp_hf.data.prepare import prepare_bitext

    source = data / "bitext" / "multi30k-nllb" / "zh-en" / "val.tsv.gz"
    report = prepare_bitext([source], "zh", tmp_path / "zh", langid=True, train_tokenizer=False)
    _assert_counts_add_up(report)
    assert report["options"]["length_unit"] == "chars"
    removed = {step["name"]: step["removed"] for step in report["steps"]}
    # Chinese sides are 3-100 characters; a words count would call every one a single token.
    assert removed["length"] < 0.05 * report["pairs_in"]
    assert removed["language"] < 0.1 * report["pairs_in"]
    assert report["pairs_out"] > 0.85 * report["pairs_in"]
