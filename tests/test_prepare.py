"""Unit tests of `psp prepare`: filters, batched langid, readers, shards, and whole runs on crafted files."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

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

CRAFTED = [
    # sentence1, sentence2, score: what happens to the pair
    ("A man is playing a red guitar on a small stage.", "Someone plays music for a crowd tonight.", "0.8"),  # kept
    ("Two dogs are running through deep snow.", "A pair of dogs race across a snowy field.", "0.9"),  # kept
    ("", "Someone plays music for a crowd tonight.", "0.8"),  # empty side
    ("Too short.", "Also short here.", "0.8"),  # length (< 5 tokens)
    ("The cat sleeps on the warm sofa all day.", "The cat sleeps on the warm sofa all night.", "0.95"),  # overlap
    ("someone plays music for a crowd tonight.", "a man is playing a red guitar on a small stage.", "0.8"),  # duplicate
    ("Ein Mann spielt auf der Bühne eine Gitarre.", "Jemand spielt heute Abend Musik für eine Menge.", "0.8"),
    ("A child eats a red apple in the kitchen.", "A kid is having some fruit at home.", "0.3"),  # score
]


def _crafted_file(tmp_path):
    text = "".join(f"{a}\t{b}\t{s}\n" for a, b, s in CRAFTED)
    return _write(tmp_path / "paranmt.txt", text)


def test_prepare_paraphrases_crafted_rows(tmp_path):
    from datasets import load_dataset

    from psp_hf.data.prepare import prepare_paraphrases

    out = tmp_path / "prepared"
    report = prepare_paraphrases([_crafted_file(tmp_path)], out, vocab_size=60, seed=1)
    removed = {step["name"]: step["removed"] for step in report["steps"]}
    assert removed == {"lowercase": 0, "empty": 1, "length": 1, "overlap": 1, "duplicate": 1, "evaluation": 0,
                       "language": 1, "score": 1}  # fmt: skip
    assert report["pairs_in"] == 8 and report["pairs_out"] == 2
    rows = list(load_dataset(str(out), split="train", streaming=True))
    assert sorted(row["sentence1"] for row in rows) == [
        "a man is playing a red guitar on a small stage.",
        "two dogs are running through deep snow.",
    ]
    assert all(set(row) == {"sentence1", "sentence2", "score", "overlap"} for row in rows)
    assert sorted(round(row["score"], 3) for row in rows) == [0.8, 0.9]
    # report files, histograms and card
    saved = json.loads((out / "report" / "report.json").read_text())
    assert saved["pairs_out"] == 2 and saved["histograms"]["score"]["counts"]
    for name in ("score", "overlap"):
        assert (out / "report" / f"{name}_histogram.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from huggingface_hub import DatasetCard

    card = (out / "README.md").read_text()
    metadata = DatasetCard.load(out / "README.md").data
    assert metadata.configs == [
        {"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*.parquet"}]}
    ]
    assert metadata.language == ["en"] and "paraphrase" in metadata.tags
    assert "| language | langid says the sides are en and en | 1 |" in card
    # tokenizer saved with the data
    from psp_hf.data.prepare import load_prepared_tokenizer

    tokenizer = load_prepared_tokenizer(out)
    assert tokenizer is not None and tokenizer.unk_token == "<unk>"
    assert tokenizer("A man").input_ids == tokenizer("a man").input_ids  # lowercasing tokenizer


def test_prepare_switches_each_filter_off(tmp_path):
    from psp_hf.data.prepare import prepare_paraphrases

    report = prepare_paraphrases(
        [_crafted_file(tmp_path)], tmp_path / "all", langid=False, score_filter=False, overlap_filter=False,
        length_filter=False, dedupe=False, lowercase=False, train_tokenizer=False, exclude_evaluation=False,
    )  # fmt: skip
    removed = {step["name"]: step["removed"] for step in report["steps"]}
    assert removed == {"lowercase": 0, "empty": 1, "length": 0, "overlap": 0, "duplicate": 0, "evaluation": 0,
                       "language": 0, "score": 0}  # fmt: skip
    assert report["pairs_out"] == 7
    assert report["steps"][0]["changed"] == 0
    assert not (tmp_path / "all" / "tokenizer").exists()


def test_prepare_needs_a_score_source(tmp_path):
    from psp_hf.data.prepare import prepare_paraphrases

    path = _write(tmp_path / "pairs.tsv", "sentence1\tsentence2\nA b c d e\tf g h i j\n")
    with pytest.raises(PSPInputError, match=r"pairs\.tsv: no score column .*--no-score-filter"):
        prepare_paraphrases([path], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_prepare_score_model_scores_are_psp_cosines(tmp_path):
    from psp_hf import PSPEncoder
    from psp_hf.data.prepare import prepare_paraphrases
    from psp_hf.tokenizer import train_tokenizer

    sentences = [a for a, _, _ in CRAFTED] + [b for _, b, _ in CRAFTED]
    tokenizer = train_tokenizer([s for s in sentences if s] * 3, vocab_size=80)
    encoder = PSPEncoder.from_tokenizer(tokenizer, hidden_size=16, seed=0)
    encoder.save_pretrained(tmp_path / "model")
    path = _write(tmp_path / "pairs.tsv", "".join(f"{a}\t{b}\n" for a, b, _ in CRAFTED))
    report = prepare_paraphrases(
        [path], tmp_path / "out", score_model=tmp_path / "model", min_score=-1.0, max_score=1.0,
        langid=False, overlap_filter=False, train_tokenizer=False, shuffle=False,
    )  # fmt: skip
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "out" / "data").to_pylist()
    assert len(table) == report["pairs_out"] == 5  # empty side, short pair and duplicate removed
    first = [row["sentence1"] for row in table]
    second = [row["sentence2"] for row in table]
    expected = encoder.similarity_pairwise(encoder.encode(first), encoder.encode(second))
    np.testing.assert_allclose([row["score"] for row in table], expected, atol=1e-5)
    assert "psp model cosine" in report["steps"][-1]["description"]


def test_prepare_output_is_atomic(tmp_path):
    from psp_hf.data.prepare import prepare_paraphrases

    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("old")
    with pytest.raises(PSPInputError, match="already exists; pass --overwrite"):
        prepare_paraphrases([_crafted_file(tmp_path)], out, train_tokenizer=False)
    # A bad line halfway through: the old folder stays as it was and no temp folder is left behind.
    lines = [f"a b c d e {i}\tf g h i j {i}\t0.9\n".encode() for i in range(20)]
    lines[12] = b"broken \xff\tline\t0.9\n"
    bad = _write(tmp_path / "bad.txt", b"".join(lines))
    with pytest.raises(PSPInputError, match=r"bad\.txt:13: not valid UTF-8"):
        prepare_paraphrases([bad], out, overwrite=True, langid=False, batch_size=4, train_tokenizer=False)
    assert (out / "keep.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt", "out", "paranmt.txt"]
    # --skip-bad-lines: counted in the report, and the old folder is replaced.
    report = prepare_paraphrases(
        [bad], out, overwrite=True, langid=False, batch_size=4, train_tokenizer=False, skip_bad_lines=True
    )
    assert report["bad_lines"]["count"] == 1 and report["bad_lines"]["examples"][0].startswith(f"{bad}:13:")
    assert report["pairs_in"] == 19 and report["pairs_out"] == 19
    assert not (out / "keep.txt").exists()
    assert "| bad lines |" in (out / "README.md").read_text()


def test_shuffled_shards_hold_every_row_once_in_a_seeded_order(tmp_path):
    import pyarrow.parquet as pq

    from psp_hf.data.prepare import prepare_bitext

    rows = [(f"satz nummer {i} hier", f"sentence number {i} here") for i in range(500)]
    path = _write(tmp_path / "de-en.tsv", "de\ten\n" + "".join(f"{a}\t{b}\n" for a, b in rows))

    def run(name, **kwargs):
        prepare_bitext([path], "de", tmp_path / name, train_tokenizer=False, batch_size=64, **kwargs)
        shards = sorted((tmp_path / name / "data").glob("train-*.parquet"))
        return shards, [row["en"] for shard in shards for row in pq.read_table(shard).to_pylist()]

    shards, plain = run("plain", shuffle=False)
    assert plain == [b for _, b in rows] and len(shards) == 1
    shards, shuffled = run("shuffled", num_shards=3, seed=5)
    assert [s.name for s in shards] == [f"train-0000{i}-of-00003.parquet" for i in range(3)]
    assert sorted(shuffled) == sorted(plain) and shuffled != plain
    assert run("again", num_shards=3, seed=5)[1] == shuffled
    assert run("other", num_shards=3, seed=6)[1] != shuffled


def test_prepare_bitext_without_spaces_counts_characters(tmp_path):
    from psp_hf.data.prepare import prepare_bitext

    text = "zh\ten\n" + "".join(
        [
            "一个男人在街上弹吉他。\tA man plays guitar in the street.\n",  # kept
            "狗\tA dog runs.\n",  # 1 character: too short
            "两只狗在雪地里奔跑。\tTwo dogs run through the snow.\n",  # kept
            "两只狗在雪地里奔跑。\tTwo dogs run through the snow.\n",  # duplicate
            "一个男人在街上弹吉他。\tHi\n",  # English side: 1 word
        ]
    )
    path = _write(tmp_path / "zh-en.tsv", text)
    old_mask = os.umask(0o022)
    try:
        report = prepare_bitext([path], "zh", tmp_path / "out", vocab_size=40, langid=True)
    finally:
        os.umask(old_mask)
    # The folder follows the umask like any mkdir (not the 0700 of a temporary folder).
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o755
    removed = {step["name"]: step["removed"] for step in report["steps"]}
    assert removed == {"lowercase": 0, "empty": 0, "length": 2, "duplicate": 1, "evaluation": 0, "language": 0}
    assert report["columns"] == ["zh", "en"] and report["options"]["length_unit"] == "chars"
    assert report["tokenizer"]["trained_on"] == ["zh", "en"]
    card = (tmp_path / "out" / "README.md").read_text()
    assert "- zh\n- en" in card or "- en\n- zh" in card


def test_cli_prepare_reports_errors_with_file_and_line(tmp_path, capsys):
    from psp_hf.cli import main

    bad = _write(tmp_path / "bad.tsv", b"a b c d e\tf g h i j\t0.9\nx\xff\ty\t0.9\n")
    code = main(["prepare", "paraphrases", str(bad), "--out", str(tmp_path / "out"), "--no-tokenizer"])
    assert code == 2
    assert f"psp: error: {bad}:2: not valid UTF-8" in capsys.readouterr().err
    good = _crafted_file(tmp_path)
    code = main(["prepare", "paraphrases", str(good), "--out", str(tmp_path / "ok"), "--no-tokenizer",
                 "--no-langid", "--min-score", "0.5"])  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "pairs in: 8" in err and "removed by language: off" in err and "pairs out: 3" in err


@pytest.mark.slow
def test_memory_does_not_grow_with_the_input(tmp_path):
    import gc
    import tracemalloc

    from psp_hf.data.prepare import prepare_paraphrases

    def pairs_file(n: int):
        lines = (f"sentence number {i} about a dog\tanother sentence {i} about a cat\t0.8\n" for i in range(n))
        return _write(tmp_path / f"pairs-{n}.txt.gz", "".join(lines))

    def run(path) -> None:
        prepare_paraphrases(
            [path], tmp_path / "out", overwrite=True, shuffle=False, train_tokenizer=False, batch_size=500,
            langid=False,
        )  # fmt: skip

    def peak(path) -> int:
        gc.collect()  # garbage left by an earlier test must not count as this run's peak
        tracemalloc.start()
        try:
            run(path)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = pairs_file(1_000), pairs_file(10_000)
    run(small)  # warm-up outside tracemalloc: imports and caches
    growth = peak(large) - peak(small)
    # 9,000 more pairs (~1.6 MB as Python strings): only the duplicate filter's hashes (8 bytes a pair) may grow.
    assert growth < 500_000, growth


# ------------------------------------------------------------------------------------------------ bad input (CLI)


def _truncated_gz(path, lines: int = 3000):
    import random

    rng = random.Random(0)
    # Random words compress poorly, so half of the file holds only part of the lines.
    text = "".join(
        " ".join(f"w{rng.randrange(10**6)}" for _ in range(6)) + "\t" + " ".join(f"v{rng.randrange(10**6)}"
        for _ in range(6)) + "\t0.9\n"
        for _ in range(lines)
    )  # fmt: skip
    data = gzip.compress(text.encode())
    path.write_bytes(data[: len(data) // 2])
    return path


BAD_ROWS = {
    # name: (file contents, the message after FILE:LINE:)
    "short row": (b"a b c d e\tf g h i j\t0.9\nonly one field\nk l m n o\tp q r s t\t0.9\n", "2: expected 3 tab"),
    "extra column": (b"a b c d e\tf g h i j\t0.9\nk l m n o\tp q r s t\t0.9\tx\n", "2: expected 3 tab"),
    "invalid UTF-8": (b"a b c d e\tf g h i j\t0.9\nk l \xff n o\tp q r s t\t0.9\n", "2: not valid UTF-8"),
}


@pytest.mark.parametrize("name", [*BAD_ROWS, "truncated .gz"])
def test_cli_prepare_bad_rows_give_one_error_line_or_a_count(tmp_path, capsys, name):
    from psp_hf.cli import main

    if name == "truncated .gz":
        bad = _truncated_gz(tmp_path / "bad.tsv.gz")
    else:
        bad = _write(tmp_path / "bad.tsv", BAD_ROWS[name][0])
    argv = ["prepare", "paraphrases", str(bad), "--no-tokenizer", "--no-langid", "-q"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"psp: error: {bad}:") and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists() and sorted(p.name for p in tmp_path.iterdir()) == [bad.name]
    if name == "truncated .gz":
        line = int(re.match(rf"psp: error: {re.escape(str(bad))}:(\d+): cannot read further", err).group(1))
        assert 1 < line < 3000
        expected_pairs = line - 1
    else:
        assert f"{bad}:{BAD_ROWS[name][1]}" in err
        expected_pairs = len(BAD_ROWS[name][0].splitlines()) - 1
    # --skip-bad-lines: the run goes on and the report counts the bad line.
    assert main([*argv, "--out", str(tmp_path / "out"), "--skip-bad-lines", "--no-overlap-filter"]) == 0
    report = json.loads((tmp_path / "out" / "report" / "report.json").read_text())
    assert report["bad_lines"]["count"] == 1 and report["bad_lines"]["examples"][0].startswith(f"{bad}:")
    assert report["pairs_in"] == expected_pairs


def test_cli_prepare_checks_the_output_and_inputs_before_reading(tmp_path, capsys, monkeypatch):
    import psp_hf.data.checks as checks
    from psp_hf.cli import main

    good = _crafted_file(tmp_path)
    a_file = _write(tmp_path / "file.txt", "keep me\n")
    locked = tmp_path / "locked"
    locked.mkdir()
    fifo = tmp_path / "pairs.fifo"
    os.mkfifo(fifo)
    real_access = os.access
    # A permission check, not chmod: tests may run as root, who may write anywhere.
    monkeypatch.setattr(checks.os, "access", lambda path, mode: Path(path) != locked and real_access(path, mode))
    cases = [
        ([str(good), "--out", str(a_file)], f"--output {a_file}: exists and is not a folder"),
        ([str(good), "--out", str(locked / "out")], f"cannot write in {locked} (permission denied or read-only)"),
        ([str(tmp_path), "--out", str(tmp_path / "o")], f"{tmp_path}: is a folder, not a file of pairs"),
        ([str(tmp_path / "missing.tsv"), "--out", str(tmp_path / "o")], "missing.tsv: no such file"),
        ([str(good)], "give --output DIR, --push-to-hub REPO, or both"),
        (["-", "--out", str(tmp_path / "o")], "-: standard input is not supported here"),
        ([str(fifo), "--out", str(tmp_path / "o")], f"{fifo}: not a regular file (a pipe"),
        ([str(good), "--push-to-hub", "no//such repo"], "--push-to-hub 'no//such repo': not a valid repo id"),
    ]
    inside = tmp_path / "data"
    inside.mkdir()
    held = _write(inside / "pairs.txt", good.read_text())
    cases.append(([str(held), "--out", str(inside), "--overwrite"], f"holds {held}, which replacing the folder"))
    for argv, message in cases:
        assert main(["prepare", "paraphrases", *argv, "--no-tokenizer", "-q"]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("psp: error: ") and message in err and err.count("\n") == 1, err
    assert a_file.read_text() == "keep me\n" and list(locked.iterdir()) == [] and held.is_file()
    assert not (tmp_path / "o").exists()
    with pytest.raises(SystemExit):  # argparse names the argument: --batch-size 0
        main(["prepare", "paraphrases", str(good), "--out", str(tmp_path / "o"), "--batch-size", "0"])
    assert "--batch-size: expected a positive number, got 0" in capsys.readouterr().err


@pytest.mark.slow
def test_a_killed_run_leaves_the_old_folder_and_the_next_run_removes_its_staging(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from psp_hf.data.prepare import prepare_bitext

    rows = "".join(f"satz nummer {i} ist hier\tsentence number {i} is here\n" for i in range(400_000))
    source = _write(tmp_path / "de-en.tsv.gz", "de\ten\n" + rows)
    out = tmp_path / "out"
    prepare_bitext([source], "de", out, train_tokenizer=False, limit=10)
    before = sorted(p.name for p in (out / "data").iterdir())
    code = (
        "import sys; from psp_hf.data.prepare import prepare_bitext; "
        "prepare_bitext([sys.argv[1]], 'de', sys.argv[2], overwrite=True, train_tokenizer=False, batch_size=2000)"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(source), str(out)])
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(".out.tmp-*/data")) and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert child.poll() is None, "the run ended before it could be killed"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    stale = list(tmp_path.glob(".out.tmp-*"))
    assert [p.name.split("-")[1] for p in stale] == [str(child.pid)]
    assert sorted(p.name for p in (out / "data").iterdir()) == before  # the old folder is untouched
    # A staging folder of a live process (this one) is someone's run in progress: left alone.
    live = tmp_path / f".out.tmp-{os.getpid()}-x"
    live.mkdir()
    prepare_bitext([source], "de", out, overwrite=True, train_tokenizer=False, limit=20)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["de-en.tsv.gz", "out", live.name])
    assert json.loads((out / "report" / "report.json").read_text())["pairs_in"] == 20


def test_prepare_paraphrases_removes_evaluation_sentences(tmp_path):
    data = Path(os.environ.get("PSP_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
    if not data.is_dir():
        pytest.skip(f"real data not found at {data} (set PSP_DATA)")
    from psp_hf.data.prepare import prepare_paraphrases

    sick = (data / "sts" / "sick" / "test.tsv").read_text(encoding="utf-8").splitlines()[1].split("\t")[1]
    lines = [
        f"{sick.upper()}\tan entirely different sentence written for this test",
        "a first sentence that matches nothing at all\ta second sentence that matches nothing either",
    ]
    path = _write(tmp_path / "pairs.tsv", "".join(f"{line}\n" for line in lines))
    options = {"score_filter": False, "langid": False, "overlap_filter": False, "vocab_size": 40}
    report = prepare_paraphrases([path], tmp_path / "out", **options)
    step = next(step for step in report["steps"] if step["name"] == "evaluation")
    assert step["removed"] == 1 and report["pairs_out"] == 1
    kept = prepare_paraphrases([path], tmp_path / "kept", exclude_evaluation=False, **options)
    assert kept["pairs_out"] == 2
