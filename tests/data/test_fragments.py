"""Short spans of the training text for the teacher (`psp languages --mono-fragments`)."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq

from psp_hf.data.distill_corpus import normalize_key
from psp_hf.data.sources.fragments import (
    CHARACTER_SPAN,
    FRAGMENTS,
    WORD_SPAN,
    append_fragments,
    default_fragments,
    draw_fragments,
)

SENTENCES = [f"der hund {word} heute lange im grünen park am fluss" for word in ("schläft", "läuft", "bellt", "spielt")]
SENTENCES += [f"die katze {word} auf dem warmen dach des hauses" for word in ("liegt", "sitzt", "schläft", "wartet")]


def _is_span(span: str, sentences: list[str]) -> bool:
    words = span.split()
    return any(
        sentence.split()[start : start + len(words)] == words and len(words) < len(sentence.split())
        for sentence in sentences
        for start in range(len(sentence.split()))
    )


def test_fragments_are_shorter_spans_of_the_text_and_repeatable():
    spans = draw_fragments(SENTENCES, "de", 20)
    assert spans and len(spans) == len(set(spans)) <= 20
    assert all(WORD_SPAN[0] <= len(span.split()) <= WORD_SPAN[1] and _is_span(span, SENTENCES) for span in spans)
    assert draw_fragments(SENTENCES, "de", 20) == spans  # seeded: a rerun of prepare draws the same text
    assert draw_fragments(SENTENCES, "de", 20, seed=1) != spans
    assert len(draw_fragments(SENTENCES, "de", 3)) == 3


def test_fragments_leave_out_skipped_and_evaluation_text_and_non_words():
    first = draw_fragments(SENTENCES, "de", 20)
    evaluation = {normalize_key(first[0].upper() + "!")}  # the evaluation filter ignores case and punctuation
    again = draw_fragments(SENTENCES, "de", 20, skip={first[1]}, evaluation_keys=evaluation)
    assert first[0] not in again and first[1] not in again
    noisy = [f"open %s file {{name}} in /usr/share now {i} times" for i in range(50)]  # placeholders, paths, numbers
    spans = draw_fragments(noisy + [f"open the old file number {word} now" for word in "abcdefghij"], "en", 100)
    assert spans and not any(mark in span for span in spans for mark in "%{}/0123456789")
    assert draw_fragments(["a b", "one two"], "en", 10) == []  # nothing is longer than the shortest span


def test_default_fragments_only_where_pud_dev_chose_them():
    # PUD dev rose with the spans in ar, tr and zh, and tied in de, es, fr and ru (results/languages.md).
    assert [default_fragments(code) for code in ("ar", "tr", "zh")] == [FRAGMENTS] * 3 and FRAGMENTS > 0
    assert [default_fragments(code) for code in ("de", "es", "fr", "ru", "en")] == [0] * 5


def test_chinese_fragments_count_characters():
    text = ["我们今天下午在公园里散步然后回家吃晚饭", "他每天早上七点起床去学校上课"]
    spans = draw_fragments(text, "zh", 10)
    assert spans and all(CHARACTER_SPAN[0] <= len(span) <= CHARACTER_SPAN[1] and " " not in span for span in spans)
    assert all(any(span in sentence for sentence in text) for span in spans)


def test_append_fragments_adds_both_sides_to_the_mono_text_and_its_report(tmp_path):
    mono = tmp_path / "mono"
    mono.mkdir()
    own, english = SENTENCES[:4], ["the english wikipedia sentence number one is here today"]
    with gzip.open(mono / "sentences.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("".join(f"{text}\n" for text in own + english))
    sources = {
        "commonvoice": {"kept": 4, "language": "de", "license": "CC0 1.0", "non_commercial": False},
        "en-wikipedia": {"kept": 1, "language": "en", "license": "CC BY-SA 3.0", "non_commercial": False},
    }
    (mono / "report.json").write_text(json.dumps({"kind": "mono", "sources": sources, "sentences": 5}))
    shard = tmp_path / "train-00000.parquet"
    english_bitext = [  # no word twice: no span twice
        "cat sits on warm roof",
        "house dog runs in green",
        "park river bird sings at",
        "high noon sun",
    ]
    pq.write_table(pa.table({"de": SENTENCES[4:], "en": english_bitext}), shard)
    drawn = append_fragments(mono, [shard], "de", 6, ["de", "en"], set())
    assert drawn == {"de": 6, "en": 5}  # English: four bitext sentences and one monolingual, one span each
    lines = lines_of(mono)
    assert lines[:5] == own + english  # the sources' text stays first, unchanged
    german, added_english = lines[5:11], lines[11:]
    assert all(_is_span(span, SENTENCES) for span in german)
    assert all(_is_span(span, english_bitext + english) for span in added_english)
    report = json.loads((mono / "report.json").read_text())
    assert report["sentences"] == 16 and report["sources"]["fragments"]["kept"] == 11
    assert report["sources"]["fragments"]["sides"] == drawn and "licences" in report["sources"]["fragments"]["license"]
    (mono / "report.json").write_text(json.dumps({"kind": "mono", "sources": sources, "sentences": 5}))
    with gzip.open(mono / "sentences.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("".join(f"{text}\n" for text in own + english))
    again = append_fragments(mono, [shard], "de", 6, ["de", "en"], {normalize_key(german[0])})
    assert again["de"] == 6 and german[0] not in lines_of(mono)  # an evaluation sentence is never drawn


def lines_of(mono):
    with gzip.open(mono / "sentences.txt.gz", "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()
