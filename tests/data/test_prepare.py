"""Unit tests of `psp prepare`'s parts: filters, batched langid, readers (whole runs: test_prepare_runs.py)."""

from __future__ import annotations

import gzip
import re

import numpy as np
import pytest

from psp_hf.data.filters import (
    FilterChain,
    PairBatch,
    SeenHashes,
    StreamingHistogram,
    length_unit_for,
    normalize_whitespace,
    pair_hashes,
    token_count,
    trigram_overlap,
    word_tokens,
)
from psp_hf.data.readers import BadLines, PairReader, bitext_layout, paraphrase_layout
from psp_hf.errors import PSPInputError

# ------------------------------------------------------------------------------------------------ measures


def test_trigram_overlap_counts_shared_trigrams_over_the_shorter_side():
    """ParaNMT's definition, pinned on hand-computed pairs: shared word trigrams / trigrams of the shorter side."""
    # shorter side "a b c d": trigrams (a b c), (b c d); only (a b c) occurs in "a b c e f" -> 1/2
    assert trigram_overlap("a b c d", "a b c e f") == pytest.approx(0.5)
    assert trigram_overlap("a b c e f", "a b c d") == pytest.approx(0.5)  # symmetric
    # "shorter" = fewer trigrams: 1 trigram (a b c) against 6; it is shared -> 1
    assert trigram_overlap("a b c", "a b c d e f g h") == 1.0
    # occurrences count: (x y z) twice among the 4 trigrams of the shorter side, both present -> 2/4
    assert trigram_overlap("x y z x y z", "x y z w v u t") == pytest.approx(0.5)
    # 5 tokens each -> 3 trigrams each; only (a man plays) shared -> 1/3
    assert trigram_overlap("a man plays the guitar", "a man plays a violin") == pytest.approx(1 / 3)
    assert trigram_overlap("The cat sat on the mat", "the CAT sat on the mat") == 1.0  # case-insensitive
    assert trigram_overlap("x y z", "p q r") == 0.0
    assert trigram_overlap("x y z", "w x y z") == 1.0  # three tokens: one trigram
    # punctuation is its own token: "dog." is "dog", "." so both sides read a / big / dog / .
    assert trigram_overlap("a big dog.", "a big dog .") == 1.0
    # Fewer than 3 tokens on a side: no trigrams, the ratio is undefined, the overlap is 0.0 (even for equal
    # sides); the length filter (5+ tokens by default) is what removes such pairs.
    assert trigram_overlap("two words", "two words and more") == 0.0
    assert trigram_overlap("two words", "two words") == 0.0
    assert trigram_overlap("", "") == 0.0


def test_word_tokens_match_the_regex_definition():
    pattern = re.compile(r"\w+|[^\w\s]")
    samples = [
        "Hello, world!",
        "don't stop-believing",
        "snake_case and x² ½ café naïve",
        "  spaces   everywhere ",
        "中文句子，带标点。",
        "emoji 🙂 and (brackets) [x]",
        "",
    ]
    for text in samples:
        assert word_tokens(text) == pattern.findall(text), text


def test_token_count_units():
    assert token_count(normalize_whitespace("  a  b\tc  ")) == 3
    assert token_count("") == 0
    assert token_count("这是 一个测试", "chars") == 6
    assert length_unit_for("zh") == "chars" and length_unit_for("ja") == "chars"
    assert length_unit_for("de") == "words"
    with pytest.raises(ValueError):
        token_count("x", "pieces")


def test_pair_hashes_unordered_and_ordered():
    unordered = pair_hashes(["a", "b"], ["b", "a"], ordered=False)
    assert unordered.dtype == np.uint64 and unordered[0] == unordered[1]
    ordered = pair_hashes(["a", "b"], ["b", "a"], ordered=True)
    assert ordered[0] != ordered[1]


def test_seen_hashes_matches_a_python_set():
    rng = np.random.default_rng(0)
    seen = SeenHashes()
    reference: set[int] = set()
    for _ in range(40):
        batch = rng.integers(0, 5000, size=int(rng.integers(1, 400))).astype(np.uint64)
        new = seen.add(batch)
        expected = []
        for value in batch.tolist():
            expected.append(value not in reference)
            reference.add(value)
        assert new.tolist() == expected
    assert len(seen) == len(reference)
    assert seen.nbytes == 8 * len(reference)
    assert len(seen._runs) <= 2 + int(np.log2(len(reference)))


def test_streaming_histogram_clips_to_the_end_bins():
    histogram = StreamingHistogram(0.0, 1.0, bins=4)
    histogram.add(np.array([-3.0, 0.1, 0.3, 0.99, 5.0, np.nan]))
    assert histogram.counts.tolist() == [2, 1, 0, 2]


# ------------------------------------------------------------------------------------------------ language ID


SENTENCES = [
    "A man is playing a guitar on the street.",
    "two dogs run through the snow",
    "Ein Mann spielt Gitarre auf der Straße.",
    "Le chat dort sur le canapé depuis ce matin.",
    "El perro corre por la playa con su dueño.",
    "Человек играет на гитаре на улице.",
    "一个男人在街上弹吉他。",
    "男が通りでギターを弾いている。",
    "Muž hraje na kytaru na ulici.",
    "",
    "ok",
    "12345 !!!",
]


@pytest.fixture(scope="module")
def langid_reference():
    """langid's own identifier (a separate object from the one psp_hf caches)."""
    from langid.langid import LanguageIdentifier as Reference
    from langid.langid import model

    return Reference.from_modelstring(model, norm_probs=False)


def test_batched_language_id_agrees_with_langid(langid_reference):
    from psp_hf.data.language_id import LanguageIdentifier

    reference = langid_reference
    ours = LanguageIdentifier()
    assert ours.classify(SENTENCES) == [reference.classify(s)[0] for s in SENTENCES]
    # Same log-probabilities, only summed in another order.
    for sentence, row in zip(SENTENCES, ours.scores(SENTENCES), strict=True):
        expected = reference.nb_classprobs(reference.instance2fv(sentence))
        np.testing.assert_allclose(row, expected, rtol=1e-9, atol=1e-6)
    assert ours.classify([])[:0] == []


def test_batched_language_id_with_candidates_matches_set_languages(langid_reference):
    from psp_hf.data.language_id import LanguageIdentifier

    reference = langid_reference
    reference.set_languages(["en", "cs", "de"])
    try:
        expected = [reference.classify(s)[0] for s in SENTENCES]
    finally:
        reference.set_languages(None)
    ours = LanguageIdentifier(["en", "cs", "de"])
    assert ours.languages == ["cs", "de", "en"]
    assert ours.classify(SENTENCES) == expected
    with pytest.raises(ValueError, match="xx"):
        LanguageIdentifier(["en", "xx"])


# ------------------------------------------------------------------------------------------------ readers


def _write(path, text: str | bytes):
    data = text.encode("utf-8") if isinstance(text, str) else text
    if str(path).endswith(".gz"):
        with gzip.open(path, "wb") as handle:
            handle.write(data)
    else:
        path.write_bytes(data)
    return path


def test_reader_paranmt_without_header_takes_the_third_column_as_score(tmp_path):
    path = _write(tmp_path / "para.txt", "a b\tc d\t0.9\ne f\tg h\t0.25\n")
    reader = PairReader(path, paraphrase_layout())
    assert reader.has_score
    assert list(reader) == [("a b", "c d", 0.9), ("e f", "g h", 0.25)]
    assert reader.stats.header is None and reader.stats.pairs == 2


def test_reader_flickr_header_picks_named_columns(tmp_path):
    path = _write(tmp_path / "pairs.tsv.gz", "image_idx\tsentence1\tsentence2\n0\tone\ttwo\n1\tthree\tfour\n")
    reader = PairReader(path, paraphrase_layout())
    assert not reader.has_score
    assert [(a, b) for a, b, _ in reader] == [("one", "two"), ("three", "four")]
    assert reader.stats.columns == ["sentence1", "sentence2"]


def test_reader_wmt_and_multi30k_bitext_headers(tmp_path):
    wmt = _write(tmp_path / "de-en.tsv", "testset\tde\ten\nnt2008\tHallo Welt\tHello world\n")
    assert [(a, b) for a, b, _ in PairReader(wmt, bitext_layout("de"))] == [("Hallo Welt", "Hello world")]
    multi = _write(tmp_path / "m.tsv", "de\ten\nZwei Hunde\tTwo dogs\n")
    assert [(a, b) for a, b, _ in PairReader(multi, bitext_layout("de"))] == [("Zwei Hunde", "Two dogs")]
    with_bom = _write(tmp_path / "bom.tsv", "\ufeffde\ten\r\nZwei Hunde\tTwo dogs\r\n")
    assert [(a, b) for a, b, _ in PairReader(with_bom, bitext_layout("de"))] == [("Zwei Hunde", "Two dogs")]
    headerless = _write(tmp_path / "h.tsv", "Zwei Hunde\tTwo dogs\n")
    assert [(a, b) for a, b, _ in PairReader(headerless, bitext_layout("de"))] == [("Zwei Hunde", "Two dogs")]
    with pytest.raises(PSPInputError, match=r"m\.tsv:1: header .* no column 'fr'"):
        PairReader(multi, bitext_layout("fr"), header="yes")


def test_reader_explicit_columns_by_number_and_name(tmp_path):
    path = _write(tmp_path / "x.tsv", "id\tscore\tleft\tright\n7\t0.8\tl1\tr1\n")
    by_name = PairReader(path, paraphrase_layout(["left", "right"], "score"), header="yes")
    assert list(by_name) == [("l1", "r1", 0.8)]
    by_number = PairReader(path, paraphrase_layout([2, 3], 1), header="yes")
    assert list(by_number) == [("l1", "r1", 0.8)]
    with pytest.raises(PSPInputError, match="x.tsv:1: expected a header naming the columns 'left', 'right'"):
        PairReader(path, paraphrase_layout(["left", "right"]), header="no")
    with pytest.raises(PSPInputError, match="column 9"):
        PairReader(path, paraphrase_layout([2, 8]), header="yes")


def test_reader_bad_lines_raise_with_file_and_line(tmp_path):
    bad_utf8 = _write(tmp_path / "bad.tsv", b"sentence1\tsentence2\nfine\tpair\nbroken \xff\xfe\tpair\n")
    with pytest.raises(PSPInputError, match=r"bad\.tsv:3: not valid UTF-8"):
        list(PairReader(bad_utf8, paraphrase_layout()))
    columns = _write(tmp_path / "cols.tsv", "a\tb\nc\td\te\n")
    with pytest.raises(PSPInputError, match=r"cols\.tsv:2: expected 2 tab-separated columns, got 3"):
        list(PairReader(columns, paraphrase_layout()))
    score = _write(tmp_path / "score.tsv", "a\tb\t0.5\nc\td\thigh\n")
    with pytest.raises(PSPInputError, match=r"score\.tsv:2: score 'high' is not a number"):
        list(PairReader(score, paraphrase_layout()))


def test_reader_skip_bad_lines_counts_them(tmp_path):
    path = _write(tmp_path / "mixed.tsv", b"a\tb\n\xc3\x28\tx\nc\td\te\nf\tg\n")
    bad = BadLines()
    reader = PairReader(path, paraphrase_layout(), skip_bad_lines=True, bad_lines=bad)
    assert [(a, b) for a, b, _ in reader] == [("a", "b"), ("f", "g")]
    assert bad.count == 2 and reader.stats.bad_lines == 2
    assert bad.examples[0].startswith(f"{path}:2:") and bad.examples[1].startswith(f"{path}:3:")


# ------------------------------------------------------------------------------------------------ chain


def test_filter_chain_counts_add_up():
    from psp_hf.data.filters import DropDuplicates, DropEmpty, LengthRange, Normalize, OverlapMaximum

    chain = FilterChain(
        [Normalize(), DropEmpty(), LengthRange(2, 4), OverlapMaximum(0.5), DropDuplicates(ordered=False)]
    )
    batch = PairBatch.from_lists(
        ["One  Two three", "", "a b c d e f", "x y z", "P Q", "r s"],
        ["four five six", "x", "a b", "x y z", "r s", "P Q"],
    )
    out = chain.apply(batch)
    removed = {stats.name: stats.removed for stats in chain.stats}
    assert removed == {"lowercase": 0, "empty": 1, "length": 1, "overlap": 1, "duplicate": 1}
    assert out.first.tolist() == ["one two three", "p q"]
    assert chain.pairs_in == 6 and chain.pairs_out == 2
    assert chain.steps[0].changed == 3  # pairs that lowercasing changed
    assert out.overlap.tolist() == [0.0, 0.0]


# ------------------------------------------------------------------------------------------------ whole runs
