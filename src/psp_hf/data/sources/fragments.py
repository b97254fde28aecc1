"""Short spans of a language's training text, for the teacher to label: `psp languages --mono-fragments`.

Tatoeba's sentences are short (tr: 86 % have at most 6 words) and the students lose most of their retrieval there,
while the bitext and the monolingual text are long sentences, software strings and dictionary words
(results/multilingual-distillation.md, "Why PUD and Tatoeba part"). A multilingual teacher embeds any text, so
spans of 2-7 words (4-14 characters where the language is written without spaces) cut from the training text give
the student short inputs with the teacher's vectors. The spans are drawn at random but reproducibly (seeded), at
most one per sentence, and keep only word-like tokens: software strings' placeholders, markup and numbers would
teach nothing.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from pathlib import Path

from ..distill_corpus import normalize_key
from ..filters import length_unit_for

# Span lengths, in words or characters. Tatoeba's mean is 4.6-4.8 words in tr and ar.
WORD_SPAN = (2, 7)
CHARACTER_SPAN = (4, 14)
# Spans per language where `--mono-fragments` is not given, and the sides cut: "xx" is the language's own text, "en"
# the English text. Measured in all seven, with two seeds in ar, de, es and tr (results/multilingual-distillation.md,
# "Short spans for the teacher"): 50,000 spans of the language's text raised PUD dev, the cross-lingual dev set, in
# every run of ar, tr and zh (+0.05 to +0.55), and tied on average in de, es, fr and ru, whose PUD dev is at
# 99.7-99.9 already; STS-B dev tied (within a seed's spread). So the languages whose PUD dev rose take them. Spans of
# the English text as well tied on both dev sets and gave back part of the Tatoeba gain, so only the language's own
# text is cut.
FRAGMENTS = 50_000
FRAGMENT_LANGUAGES = ("ar", "tr", "zh")
FRAGMENT_SIDES = ("xx",)
# A token with one of these is a placeholder, markup, a path or a number, not a word.
_NOT_A_WORD = re.compile(r"[%{}<>_=/\\|@#$&*\[\]0-9]")


def default_fragments(language: str) -> int:
    """Spans of `language`'s text where `--mono-fragments` is not given: FRAGMENTS where PUD dev chose them, else 0."""
    return FRAGMENTS if language in FRAGMENT_LANGUAGES else 0


def _is_word(token: str) -> bool:
    return any(character.isalpha() for character in token) and not _NOT_A_WORD.search(token)


def draw_fragments(
    texts: Iterable[str],
    language: str,
    count: int,
    skip: Iterable[str] = (),
    evaluation_keys: set[str] = frozenset(),
    seed: int = 0,
) -> list[str]:
    """Up to `count` distinct spans of `texts` (written in `language`), each shorter than the sentence it is cut
    from, none equal to a text of `skip` and none an evaluation sentence (`evaluation_keys`: `normalize_key`s)."""
    by_characters = length_unit_for(language) == "chars"
    low, high = CHARACTER_SPAN if by_characters else WORD_SPAN
    sentences = []
    for text in dict.fromkeys(texts):
        units = list(text.replace(" ", "")) if by_characters else text.split()
        if len(units) > low:
            sentences.append(units)
    rng = random.Random(seed)
    rng.shuffle(sentences)
    skip = set(skip)
    spans: dict[str, None] = {}
    for units in sentences:
        if len(spans) >= count:
            break
        size = rng.randint(low, min(high, len(units) - 1))
        start = rng.randint(0, len(units) - size)
        span = units[start : start + size]
        if by_characters:
            if sum(not character.isalpha() for character in span) > 1:  # one mark (a comma) is still text
                continue
            text = "".join(span)
        else:
            if not all(map(_is_word, span)):
                continue
            text = " ".join(span)
        if text not in skip and normalize_key(text) not in evaluation_keys:
            spans[text] = None
    return list(spans)


def append_fragments(
    mono: Path, bitext_shards: list[Path], code: str, count: int, sides: Iterable[str], evaluation_keys: set[str]
) -> dict[str, int]:
    """Add `count` spans per side (`code` and/or `en`) to `mono/sentences.txt.gz`, as `prepare_mono` wrote it.

    A side's spans are cut from that side of the bitext (`bitext_shards`, psp prepare's parquet files), then from
    the monolingual sources written in it (the report's `language`); none is an evaluation sentence
    (`evaluation_filter.all_evaluation_keys`). The report lists them as the source `fragments`, with the licences of
    the text they are cut from. Returns the count per side."""
    import gzip
    import json

    import pyarrow.parquet as pq

    from ...io.writing import atomic_path

    report_file = mono / "report.json"
    report = json.loads(report_file.read_text(encoding="utf-8"))
    with gzip.open(mono / "sentences.txt.gz", "rt", encoding="utf-8") as handle:
        sentences = [line.rstrip("\n") for line in handle]
    by_language: dict[str, list[str]] = {}
    start = 0
    for info in report["sources"].values():  # the file holds the sources' sentences in the report's order
        by_language.setdefault("en" if info.get("language") == "en" else code, []).extend(
            sentences[start : start + info["kept"]]
        )
        start += info["kept"]
    skip = set(sentences)
    drawn: dict[str, int] = {}
    added: list[str] = []
    for side in sides:
        texts = [
            text for shard in bitext_shards for text in pq.read_table(shard, columns=[side]).column(side).to_pylist()
        ]
        spans = draw_fragments([*texts, *by_language.get(side, [])], side, count, skip, evaluation_keys)
        skip.update(spans)
        added += spans
        drawn[side] = len(spans)
    with atomic_path(mono / "sentences.txt.gz") as tmp, gzip.open(tmp, "wt", encoding="utf-8") as handle:
        handle.write("".join(f"{text}\n" for text in [*sentences, *added]))
    report["sources"]["fragments"] = {
        "kept": len(added),
        "sides": drawn,
        "license": "spans of the bitext and of the sources above (their licences)",
        "non_commercial": any(info.get("non_commercial") for info in report["sources"].values()),
    }
    report["sentences"] = len(sentences) + len(added)
    with atomic_path(report_file) as tmp:
        tmp.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return drawn
