"""The data folder's language sources by name: bitext, monolingual text, the PUD dev set kept out of training."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from language_data import PUD_PAIR, _gz, tiny_data_folder
from toy_bitext import make_bitext

from psp_hf.data.sources.language_sources import (
    BITEXT_SOURCES,
    DEV_SOURCE,
    MONO_SOURCES,
    XNLI_DEV,
    bitext_sources,
    mono_sources,
    prepare_mono,
    read_bitext,
    stage_bitext,
)
from psp_hf.errors import PSPInputError

DATA = Path(os.environ.get("PSP_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")).resolve()


def test_sources_are_chosen_and_weighted_by_name():
    assert [s.name for s, _ in bitext_sources("de")] == ["multi30k", "wmt-news", "xsid", "storybooks"]
    assert [s.name for s, _ in bitext_sources("ar")] == ["multi30k-nllb", "xsid", "storybooks"]
    chosen = dict((s.name, w) for s, w in bitext_sources("de", "default,mlqe-pe=0.5,python-docs,wmt-news=0"))
    # python-docs has no German; weight 0 leaves a source out
    assert chosen == {"multi30k": 1.0, "xsid": 1.0, "storybooks": 1.0, "mlqe-pe": 0.5}
    assert {s.name for s, _ in bitext_sources("fr", "all")} == {  # all: every source but the non-commercial ones
        name for name, source in BITEXT_SOURCES.items() if "fr" in source.languages and not source.non_commercial
    }
    assert "ud-pud" not in BITEXT_SOURCES  # the dev set is no training source
    with pytest.raises(PSPInputError, match="--sources: no source europarl"):
        bitext_sources("de", "default,europarl")
    with pytest.raises(PSPInputError, match=r"weight in \[0, 1\]"):
        bitext_sources("de", "multi30k=2")
    # The non-commercial Arabic news: never in default or all, refused by name without the flag.
    assert [s.name for s, _ in mono_sources("ar", "all")] == ["arz-wikipedia", "en-wikipedia"]
    with pytest.raises(PSPInputError, match="saudinewsnet is licensed for non-commercial use only"):
        mono_sources("ar", "saudinewsnet")
    assert {s.name for s, _ in mono_sources("ar", "all", non_commercial=True)} == {
        "saudinewsnet",
        "arz-wikipedia",
        "en-wikipedia",
    }
    assert MONO_SOURCES["ar"]["saudinewsnet"].non_commercial and MONO_SOURCES["de"]["commonvoice"].default


def test_staged_bitext_reads_by_header_and_keeps_an_even_fraction(tmp_path):
    pairs = make_bitext(tmp_path / "pairs.tsv", 200)
    data = tiny_data_folder(tmp_path / "data", pairs)
    staged = stage_bitext(bitext_sources("de", "wmt-news,mlqe-pe=0.25"), data, "de", tmp_path)
    assert [path.name for path in staged] == ["wmt-news.tsv", "mlqe-pe.tsv"]
    assert read_bitext(staged[0], "de") == pairs[:40]  # the testset column is dropped
    quarter = read_bitext(staged[1], "de")
    assert len(quarter) == round(0.25 * len(pairs)) and set(quarter) < set(pairs)
    assert pairs.index(quarter[-1]) > len(pairs) // 2  # drawn over the whole source, not its head
    broken = tmp_path / "broken.tsv.gz"
    _gz(broken, "de\ten\nzwei\tspalten\nnur eine\n")
    with pytest.raises(PSPInputError, match=r"broken.tsv.gz:3: 1 column"):
        read_bitext(broken, "de")


def test_mono_text_drops_evaluation_and_pud_sentences_and_records_licences(tmp_path):
    data = tiny_data_folder(tmp_path / "data", make_bitext(tmp_path / "pairs.tsv", 50))
    chosen = mono_sources("de", "default")
    report = prepare_mono(chosen, data, "de", tmp_path / "mono", limit=20)
    with gzip.open(tmp_path / "mono" / "sentences.txt.gz", "rt", encoding="utf-8") as handle:
        sentences = handle.read().splitlines()
    commonvoice, fortunes = report["sources"]["commonvoice"], report["sources"]["fortunes"]
    # The PUD sentence, the XNLI dev one and Tatoeba's (normalised: case, punctuation): dev sets are never training
    # text.
    assert commonvoice["evaluation"] == 3
    assert PUD_PAIR[0] not in sentences and "Ich habe Hunger!" not in sentences
    assert commonvoice["kept"] == 20 and fortunes == {**fortunes, "duplicates": 1, "too_long": 1, "kept": 1}
    english = report["sources"]["en-wikipedia"]  # part of every language's default text; Tatoeba's English out
    assert english == {**english, "evaluation": 1, "kept": 4} and "I am hungry." not in sentences
    assert len(sentences) == len(set(sentences)) == 25 and "ein spruch" in sentences
    assert commonvoice["license"].startswith("CC0") and not fortunes["non_commercial"]
    saved = json.loads((tmp_path / "mono" / "report.json").read_text())
    assert saved["kind"] == "mono" and saved["sentences"] == 25


def test_english_text_serves_every_language_and_is_measured_in_words(tmp_path):
    data = tiny_data_folder(tmp_path / "data", make_bitext(tmp_path / "pairs.tsv", 10))
    assert all("en-wikipedia" in MONO_SOURCES[code] for code in ("ar", "de", "es", "fr", "ru", "tr", "zh"))
    assert "en-wikipedia" in {s.name for s, _ in mono_sources("tr", "default")}
    assert "en-wikipedia" not in {s.name for s, _ in mono_sources("tr", "default,en-wikipedia=0")}
    chosen = mono_sources("zh", "en-wikipedia")
    assert [s.path(data, "zh") for s, _ in chosen] == [data / "unlabeled/en/wikipedia-2015/sentences.txt.gz"]
    report = prepare_mono(chosen, data, "zh", tmp_path / "mono", limit=10)
    # 123 characters but 23 words: zh's character count would drop them, English is counted in words.
    counts = report["sources"]["en-wikipedia"]
    assert counts == {**counts, "read": 5, "too_long": 0, "evaluation": 1, "kept": 4}
    assert "Wikipedia" in counts["license"]


def test_prepared_bitext_and_the_card_name_every_source_and_leave_pud_out(tmp_path, monkeypatch, capsys):
    from psp_hf.cli import main
    from psp_hf.training.data.multilingual import describe_mono

    pairs = make_bitext(tmp_path / "pairs.tsv", 120)
    data = tiny_data_folder(tmp_path / "data", pairs)
    monkeypatch.setenv("PSP_DATA", str(data))
    out = tmp_path / "de"
    assert main(["prepare", "bitext-sources", "--lang", "de", "-o", str(out), "--vocab-size", "80", "-q"]) == 0
    report = json.loads((out / "report" / "report.json").read_text())
    assert set(report["sources"]) == {"multi30k", "wmt-news", "xsid", "storybooks"}
    assert report["sources"]["multi30k"]["license"].startswith("research")
    card = (out / "README.md").read_text()
    assert f"| multi30k | data folder | {len(pairs) + 1} |" in card  # every pair read, the PUD one included ...
    import pyarrow.parquet as pq

    english = {s for shard in (out / "data").glob("*.parquet") for s in pq.read_table(shard).column("en").to_pylist()}
    # ... and the PUD one removed; the two everyday pairs' English beside the pairs'
    assert PUD_PAIR[1] not in english and len(english) == len({b for _, b in pairs}) + 2
    from psp_hf.cli.prepare_sources import bitext_english

    both_sides = set(bitext_english(out, other_side=True))  # what psp prepare label gives a multilingual teacher
    everyday = {"wecker für sieben uhr stellen", "der hund schläft."}  # tiny_data_folder's de sides, lowercased
    assert both_sides == english | {a for a, _ in pairs} | everyday and set(bitext_english(out)) == english
    mono = tmp_path / "ar-mono"
    args = ["prepare", "mono", "--lang", "ar", "-o", str(mono), "--sources", "all,saudinewsnet"]
    assert main(args) != 0
    assert "pass --non-commercial" in capsys.readouterr().err
    assert main([*args, "--non-commercial"]) == 0
    line = describe_mono([str(mono / "sentences.txt.gz")], 2)
    assert "saudinewsnet 1 (CC BY-NC-SA" in line and "NON-COMMERCIAL" in line and "arz-wikipedia 1" in line


def test_languages_prepares_mono_text_labels_every_side_and_trains_on_pud_dev(tmp_path, monkeypatch, capsys):
    from toy_bitext import MultilingualWordTeacher

    from psp_hf.data.distill_corpus import normalize_key
    from psp_hf.data.evaluation_filter import all_evaluation_keys
    from psp_hf.experiments.languages import Settings, _label, _prepare, _train, training_arguments
    from psp_hf.experiments.languages_data import card_training_text, mono_selection
    from psp_hf.teachers.labels import TeacherCache
    from psp_hf.training.data.multilingual import MULTILINGUAL_DEFAULT_MONO

    pairs = make_bitext(tmp_path / "pairs.tsv", 300)
    data = tiny_data_folder(tmp_path / "data", pairs)
    monkeypatch.setenv("PSP_DATA", str(data))
    cache = tmp_path / "cache"
    TeacherCache(cache).label(["unused"], MultilingualWordTeacher(), name="fake-multilingual")
    teacher = MultilingualWordTeacher()
    monkeypatch.setattr("psp_hf.teachers.labels.labelling_teacher", lambda *a, **k: teacher)
    settings = Settings(
        out=tmp_path / "out", data=data, teacher="fake-multilingual", teacher_cache=cache, dim=8, vocab_size=100,
        registry=False, epochs=1, extra=("--max-steps", "4", "--batch-size", "16", "--threads", "1"),
        mono_sources="default", bitext_targets="both", mono_fragments=60,
    )  # fmt: skip
    folder = tmp_path / "out" / "de"
    folder.mkdir(parents=True)
    prepared = _prepare("de", folder, settings)
    assert prepared["mono_sentences"] == 35  # the default monolingual sources: evaluation and PUD sentences removed
    # Short spans of the language's text join the monolingual text (--mono-fragments), none an evaluation sentence.
    assert prepared["fragments"] == {"de": 60}
    mono_report = json.loads((folder / "mono" / "report.json").read_text())
    assert mono_report["sentences"] == 35 + sum(prepared["fragments"].values())
    with gzip.open(folder / "mono" / "sentences.txt.gz", "rt", encoding="utf-8") as handle:
        spans = handle.read().splitlines()[35:]
    keys = all_evaluation_keys(data)
    assert len(spans) == mono_report["sources"]["fragments"]["kept"] and not {normalize_key(s) for s in spans} & keys
    report = json.loads((folder / "data" / "report" / "report.json").read_text())
    assert report["tokenizer"]["extra_texts"] == 35  # the vocabulary is trained on the monolingual text too
    labelled = _label("de", folder, settings)
    assert labelled["labelled_now"] == labelled["sentences"] > 2 * len(pairs)  # both sides and the mono text
    arguments = training_arguments("de", folder, settings)
    # The default dev sets: PUD and XNLI's dev split, both files (a checkpoint scored by the mean of the two).
    assert arguments.dev_bitext == [
        str(data / DEV_SOURCE.pattern.format(xx="de")),
        str(data / XNLI_DEV.pattern.format(xx="de")),
    ]
    assert arguments.bitext_targets == "both" and arguments.mono_data
    monkeypatch.setattr("psp_hf.teachers.labels.labelling_teacher", lambda *a, **k: 1 / 0)  # all cached now
    assert _train("de", folder, settings)["steps"] == 4
    text, non_commercial = card_training_text(folder, str(data / "bitext/ud-pud/de-en.tsv.gz"))
    assert "multi30k" in text and "commonvoice 30 (CC0" in text and "ud-pud (CC BY-SA 3.0" in text
    assert f"fragments {len(spans):,} (spans of the bitext" in text
    assert not non_commercial
    plain = Settings(**{**vars(settings), "mono_fragments": 0})  # 0: no spans
    assert _prepare("de", folder, plain)["fragments"] == {}
    assert "fragments" not in json.loads((folder / "mono" / "report.json").read_text())["sources"]
    default = Settings(**{**vars(settings), "mono_fragments": None})  # the language's default: none in de
    assert _prepare("de", folder, default)["fragments"] == {}
    monkeypatch.setattr("psp_hf.data.sources.fragments.FRAGMENTS", 25)  # a language that takes them: FRAGMENTS
    monkeypatch.setattr("psp_hf.data.sources.fragments.FRAGMENT_LANGUAGES", ("de",))
    assert _prepare("de", folder, default)["fragments"] == {"de": 25}
    without = Settings(**{**vars(settings), "mono_sources": "none"})
    assert _prepare("de", folder, without)["mono_sentences"] == 0 and not (folder / "mono").exists()
    assert "--mono-fragments: no monolingual text to add the spans to" in capsys.readouterr().err
    quiet = Settings(**{**vars(without), "mono_fragments": None})  # by default: no spans and nothing said
    assert _prepare("de", folder, quiet)["fragments"] == {} and "--mono-fragments" not in capsys.readouterr().err
    assert training_arguments("de", folder, without).mono_data == []  # no earlier run's text comes along
    assert mono_selection(Settings(out=tmp_path, data=data, teacher="default")) == "none"  # English-only: no mono
    assert mono_selection(Settings(out=tmp_path, data=data, teacher="e5-small")) == MULTILINGUAL_DEFAULT_MONO
    assert mono_selection(Settings(out=tmp_path, data=data, teacher="default", mono_sources="commonvoice")) != "none"


def test_the_real_data_folder_has_every_source_in_its_layout():
    """Integration: every source of the tables is where the data folder's README says (fails without it)."""
    from psp_hf.data.evaluation_filter import evaluation_keys

    assert DATA.is_dir(), f"real data not found at {DATA} (set PSP_DATA)"
    for code in ("ar", "de", "es", "fr", "ru", "tr", "zh"):
        for source, _ in bitext_sources(code, "all"):
            path = source.path(DATA, code)
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                header = handle.readline().rstrip("\n").split("\t")
            assert code in header and "en" in header, (path, header)
        for source, _ in mono_sources(code, "all", non_commercial=True):
            assert source.path(DATA, code).is_file(), source.path(DATA, code)
        pud = read_bitext(DEV_SOURCE.path(DATA, code), code)
        assert len(pud) == 1000, (code, len(pud))
    keys = evaluation_keys(DATA)
    assert len(keys["PUD"]) > 7000  # both sides of seven languages' 1,000 pairs, the shared English once
