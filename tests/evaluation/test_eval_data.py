"""Evaluation data readers on the real data: every count from the data README, column order, errors."""

from __future__ import annotations

import os
import unicodedata

import pytest

from psp_hf.data_folder import data_dir as default_data_dir
from psp_hf.data_folder import existing_data_dir as default_existing
from psp_hf.errors import PSPInputError
from psp_hf.evaluation import data as eval_data


@pytest.fixture(scope="module")
def data_dir():
    path = default_data_dir()
    if not path.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"evaluation data folder {path} is missing in CI")
        pytest.skip(f"evaluation data folder {path} not present (set PSP_DATA)")
    return path


# Rows per sub-dataset, from the data README (section 1).
README_STS_ROWS = {
    "sts12": {"MSRpar": 750, "MSRvid": 750, "SMTeuroparl": 459, "OnWN": 750, "SMTnews": 399},
    "sts13": {"FNWN": 189, "headlines": 750, "OnWN": 561},
    "sts14": {"deft-forum": 450, "deft-news": 300, "headlines": 750, "images": 750, "OnWN": 750, "tweet-news": 750},
    "sts15": {"answers-forums": 375, "answers-students": 750, "belief": 375, "headlines": 750, "images": 750},
    "sts16": {"answer-answer": 254, "headlines": 249, "plagiarism": 230, "postediting": 244, "question-question": 209},
}
README_YEAR_TOTALS = {"sts12": 3108, "sts13": 1500, "sts14": 3750, "sts15": 3000, "sts16": 1186}


@pytest.mark.parametrize("task", sorted(README_STS_ROWS))
def test_sts_years_match_the_readme(data_dir, task):
    pair_sets = eval_data.read_sts_year(data_dir, task)
    assert {pairs.name: len(pairs) for pairs in pair_sets} == README_STS_ROWS[task]
    # Paper order, not file-system order.
    assert [pairs.name for pairs in pair_sets] == list(README_STS_ROWS[task])
    assert sum(len(pairs) for pairs in pair_sets) == README_YEAR_TOTALS[task]
    for pairs in pair_sets:
        assert len(pairs.sentences1) == len(pairs.sentences2) == len(pairs.gold)
        assert pairs.gold.min() >= 0 and pairs.gold.max() <= 5


def test_stsb_sick_and_mrpc_counts(data_dir):
    assert [len(eval_data.read_stsb(data_dir, split)) for split in ("train", "dev", "test")] == [5749, 1500, 1379]
    sick = [eval_data.read_sick_relatedness(data_dir, split) for split in ("train", "trial", "test")]
    assert [len(split) for split in sick] == [4500, 500, 4927]
    assert sick[2].gold.min() >= 1 and sick[2].gold.max() <= 5
    entailment = eval_data.read_sick_entailment(data_dir, "test")
    assert set(entailment.gold.tolist()) == {0, 1, 2}
    assert [len(eval_data.read_mrpc(data_dir, split)) for split in ("train", "test")] == [4076, 1725]
    # README: train 2,753 positive, test 1,147 positive.
    assert [int(eval_data.read_mrpc(data_dir, split).gold.sum()) for split in ("train", "test")] == [2753, 1147]


def _is_arabic(text: str) -> bool:
    return any(unicodedata.name(ch, "").startswith("ARABIC") for ch in text)


def test_sts17_tracks_are_reordered_to_the_pair_name(data_dir):
    for pair in eval_data.STS17_FILES:
        assert len(eval_data.read_sts17(data_dir, pair)) == 250
    # ar-en.tsv stores English first; the reader puts the Arabic side first (the pair's first language).
    ar_en = eval_data.read_sts17(data_dir, "ar-en")
    assert sum(map(_is_arabic, ar_en.sentences1)) > 240
    assert sum(map(_is_arabic, ar_en.sentences2)) < 10
    ar_ar = eval_data.read_sts17(data_dir, "ar-ar")
    assert sum(map(_is_arabic, ar_ar.sentences1)) > 240 and sum(map(_is_arabic, ar_ar.sentences2)) > 240
    with pytest.raises(PSPInputError, match="valid: ar-ar"):
        eval_data.read_sts17(data_dir, "xx-en")


def test_tatoeba_languages_and_counts(data_dir):
    languages = eval_data.tatoeba_languages(data_dir)
    assert len(languages) == 112
    for language in eval_data.TATOEBA_DEFAULT_LANGUAGES:
        bitext = eval_data.read_tatoeba(data_dir, language)
        assert len(bitext) == len(bitext.english) == 1000
        code = eval_data.tatoeba_code(language)
        assert [path.name for path in bitext.paths] == [f"tatoeba.{code}-eng.{code}", f"tatoeba.{code}-eng.eng"]
    assert eval_data.tatoeba_code("zh") == "cmn" and eval_data.tatoeba_code("deu") == "deu"
    with pytest.raises(PSPInputError, match="present: afr"):
        eval_data.read_tatoeba(data_dir, "xx")


def test_senteval_counts(data_dir):
    readme = {"mr": 10662, "cr": 3771, "subj": 10000, "mpqa": 10603}
    for task, rows in readme.items():
        items = eval_data.read_senteval_binary(data_dir, task)
        assert len(items) == rows and set(items.labels.tolist()) == {0, 1}
    assert [len(eval_data.read_trec(data_dir, split)) for split in ("train", "test")] == [5452, 500]
    assert set(eval_data.read_trec(data_dir, "train").labels.tolist()) == set(range(6))
    sst2 = [len(eval_data.read_sst(data_dir, "sst2", split)) for split in ("train", "dev", "test")]
    sst5 = [len(eval_data.read_sst(data_dir, "sst5", split)) for split in ("train", "dev", "test")]
    assert sst2 == [67349, 872, 1821] and sst5 == [8544, 1101, 2210]


def test_checksums_match_the_manifest(data_dir):
    files = [data_dir / "sts" / "sts17" / "en-en.tsv", data_dir / "senteval" / "TREC" / "test.tsv"]
    checksums = eval_data.file_checksums(data_dir, files)
    assert set(checksums) == {"sts/sts17/en-en.tsv", "senteval/TREC/test.tsv"}
    assert all(item["matches_manifest"] for item in checksums.values())
    manifest = eval_data.read_manifest(data_dir)
    assert manifest["sts/sts17/en-en.tsv"][0] == 250


def test_malformed_files_name_file_and_line(tmp_path):
    year = tmp_path / "sts" / "en" / "STS13"
    year.mkdir(parents=True)
    (year / "FNWN.tsv").write_text("score\tsentence1\tsentence2\n1.0\ta\tb\nabc\tc\td\n", encoding="utf-8")
    with pytest.raises(PSPInputError, match=r"FNWN.tsv:3: score 'abc' is not a number"):
        eval_data.read_sts_year(tmp_path, "sts13")
    (year / "FNWN.tsv").write_text("score\tsentence1\tsentence2\n1.0\ta\n", encoding="utf-8")
    with pytest.raises(PSPInputError, match=r"FNWN.tsv:2: expected 3 tab-separated fields, got 2"):
        eval_data.read_sts_year(tmp_path, "sts13")
    with pytest.raises(PSPInputError, match=r"expected data folder .*STS12"):
        eval_data.read_sts_year(tmp_path, "sts12")
    with pytest.raises(PSPInputError, match=r"expected data file .*stsbenchmark.*test.tsv"):
        eval_data.read_stsb(tmp_path, "test")


def test_missing_data_dir_names_the_path(tmp_path):
    with pytest.raises(PSPInputError, match=r"nowhere.*--data-dir DIR or set PSP_DATA"):
        default_existing(tmp_path / "nowhere")
