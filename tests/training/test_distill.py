"""Unit tests of distillation on tiny inputs: building the distillation corpus, teacher cache, initialisation,
weights, mining."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

from psp_hf.data.distill_corpus import (
    CleaningRules,
    CorpusSource,
    build_corpus,
    evaluation_sentences,
    normalize_key,
    read_corpus,
    split_sentences,
    write_corpus,
)
from psp_hf.data.filters import trigram_overlap
from psp_hf.data.mined_pairs import mine_pairs, nearest_neighbours_clustered, nearest_neighbours_exact, write_pairs
from psp_hf.data.sources.registry_text import dictd_texts, fortune_texts, wordnet_glosses
from psp_hf.errors import PSPInputError
from psp_hf.inference.piece_weights import piece_counts, sif_weights, with_piece_weights
from psp_hf.teachers.labels import TeacherCache
from psp_hf.training.model.initial_tables import (
    fit_dimension,
    piece_texts,
    read_word_vectors,
    teacher_table,
    word_vector_table,
)

DIM = 16


class FakeTeacher:
    """A deterministic bag-of-words 'teacher': sentences sharing words get similar unit vectors."""

    def __init__(self, dim: int = DIM, fail_after_calls: int | None = None):
        self.dim = dim
        self.calls = 0
        self.fail_after_calls = fail_after_calls
        self.seen: list[str] = []

    def _word(self, word: str) -> np.ndarray:
        return np.random.default_rng(zlib.crc32(word.encode())).standard_normal(self.dim)

    def encode(self, sentences, **kwargs) -> np.ndarray:
        if self.fail_after_calls is not None and self.calls >= self.fail_after_calls:
            raise KeyboardInterrupt("simulated kill")
        self.calls += 1
        self.seen += list(sentences)
        out = np.stack([sum(self._word(w) for w in s.lower().split()) + 1e-3 for s in sentences])
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _source(name: str, sentences: list[str]) -> CorpusSource:
    return CorpusSource(name, "test licence", "test", lambda: iter(sentences))


# ----------------------------------------------------------------------------------------------- corpus
def test_normalize_key_ignores_case_spacing_punctuation_and_tokenization():
    assert normalize_key("It's a  GOOD movie!") == normalize_key("it 's a good movie .")
    assert normalize_key("A man plays.") != normalize_key("A man played.")


def test_build_corpus_excludes_evaluation_sentences_dedupes_and_counts():
    first = [
        "A man is playing a guitar.",  # an evaluation sentence, differently spaced/cased below
        "A dog runs across the green field.",
        "a dog runs across the green field",  # duplicate by key
        "ok",  # too short
        "Three children are building a sandcastle.",
    ]
    other = ["Three children are building a sandcastle!", "The committee approved the budget on Monday."]
    excluded = {"STS-B": ["a man is playing a GUITAR ."], "SICK": ["Nothing in the corpus."]}
    result = build_corpus([_source("a", first), _source("b", other)], excluded, shuffle_seed=None)
    assert result.sentences == [
        "A dog runs across the green field.",
        "Three children are building a sandcastle.",
        "The committee approved the budget on Monday.",
    ]
    assert result.sources == ["a", "a", "b"]
    report = result.report["sources"]
    assert report["a"] == {
        "license": "test licence",
        "description": "test",
        "read": 5,
        "rejected_by_cleaning": 1,
        "excluded_as_evaluation": 1,
        "duplicates": 1,
        "kept": 2,
    }
    assert report["b"]["duplicates"] == 1 and report["b"]["kept"] == 1
    assert result.report["evaluation_sets"]["STS-B"] == {"distinct_sentences": 1, "corpus_sentences_matched": 1}
    assert result.report["evaluation_sets"]["SICK"]["corpus_sentences_matched"] == 0


def test_a_report_written_before_the_rename_describes_the_same_text():
    """report.json of a corpus built as a "pool" counts the evaluation matches as pool_sentences_matched."""
    from psp_hf.training.data.teacher_corpus import describe_sources

    sources = {"news": {"kept": 3, "license": "CC0"}}
    new = {"total_sentences": 3, "sources": sources, "evaluation_sets": {"STS-B": {"corpus_sentences_matched": 2}}}
    old = {"total_sentences": 3, "sources": sources, "evaluation_sets": {"STS-B": {"pool_sentences_matched": 2}}}
    text = describe_sources(new, 3, "cache")
    assert "(2 matches)" in text and describe_sources(old, 3, "cache") == text


def test_build_corpus_shuffle_is_seeded_and_keeps_source_alignment(tmp_path):
    sentences = [f"Sentence number {i} is here." for i in range(50)]
    first = build_corpus([_source("s", sentences)], {}, shuffle_seed=3)
    second = build_corpus([_source("s", sentences)], {}, shuffle_seed=3)
    assert first.sentences == second.sentences != sentences
    assert sorted(first.sentences) == sorted(sentences)
    write_corpus(first, tmp_path)
    assert read_corpus(tmp_path) == first.sentences
    assert read_corpus(tmp_path / "sentences.txt") == first.sentences
    assert (tmp_path / "report.json").is_file()


def test_cleaning_rules():
    rules = CleaningRules()
    assert rules.clean("  A   man\tis\x00 walking. ") == "A man is walking."
    assert rules.clean("1 2 3 4 5 6") is None  # no letters
    assert rules.clean("Москва слезам не верит") is None  # not Latin script
    assert rules.clean(" ".join(["word"] * 81)) is None


def test_split_sentences_keeps_abbreviations_and_initials():
    text = "Mr. Smith went to Washington. He met J. Doe there! Did it rain? Yes, e.g. Tuesday."
    assert split_sentences(text) == [
        "Mr. Smith went to Washington.",
        "He met J. Doe there!",
        "Did it rain?",
        "Yes, e.g. Tuesday.",
    ]


def test_registry_parsers_on_tiny_files(tmp_path):
    wordnet = tmp_path / "wordnet"
    wordnet.mkdir()
    (wordnet / "data.noun").write_text(
        "  1 licence header line | not a gloss\n"
        '00001 03 n 01 dog 0 000 | a domesticated carnivore; "the dog barked all night"\n'
    )
    for pos in ("verb", "adj", "adv"):
        (wordnet / f"data.{pos}").write_text("")
    assert list(wordnet_glosses(wordnet)) == ["a domesticated carnivore", "the dog barked all night"]

    fortunes = tmp_path / "fortunes"
    fortunes.mkdir()
    (fortunes / "wisdom").write_text(
        "A dream will triumph. Reality will not.\n\t\t-- Stanislaw Lem\n%\nSecond cookie.\n"
    )
    (fortunes / "wisdom.dat").write_bytes(b"\x00\x01")
    assert list(fortune_texts(fortunes)) == ["A dream will triumph.", "Reality will not.", "Second cookie."]

    import gzip

    dictd = tmp_path / "devil.dict.dz"
    with gzip.open(dictd, "wt") as handle:
        handle.write("ABSURDITY, n.  A statement manifestly inconsistent with\none's own opinion.\n\n")
        handle.write('Affect \\Af*fect"\\, v. t. [L. affectus.]\n   1. To act upon. --Milton.\n   [1913 Webster]\n')
    assert list(dictd_texts(dictd)) == ["A statement manifestly inconsistent with one's own opinion.", "To act upon."]


def test_evaluation_sentences_cover_every_set():
    root = Path(os.environ.get("PSP_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))
    if not root.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"data folder {root} missing in CI")
        pytest.skip(f"real data folder {root} not present")
    sets = evaluation_sentences(root)
    expected = {"STS12", "STS13", "STS14", "STS15", "STS16", "STS12-train", "STS17", "STS-B", "SICK", "MRPC"}
    assert expected | {"SentEval", "Tatoeba-en"} == set(sets)
    assert all(len(sentences) > 100 for sentences in sets.values())
    keys = {normalize_key(s) for s in sets["STS-B"]}
    assert normalize_key("A plane is taking off.") in keys  # the first STS-B train sentence


# ----------------------------------------------------------------------------------------------- teacher cache
def test_teacher_cache_labels_in_chunks_and_resumes_after_a_kill(tmp_path):
    sentences = [f"sentence {'word ' * (i % 7)}{i}" for i in range(23)]
    cache = TeacherCache(tmp_path / "cache")
    with pytest.raises(KeyboardInterrupt):
        cache.label(sentences, FakeTeacher(fail_after_calls=2), name="fake", chunk_size=5)
    assert len(cache.chunk_files()) == 2
    assert len(cache.labelled_sentences()) == 10
    resumed = FakeTeacher()
    assert cache.label(sentences + sentences[:3], resumed, name="fake", chunk_size=5) == 13
    assert len(resumed.seen) == 13 and not set(resumed.seen) & set(cache.labelled_sentences()) - set(resumed.seen)
    assert cache.label(sentences, FakeTeacher(), name="fake", chunk_size=5) == 0
    texts, matrix = cache.load()
    assert sorted(texts) == sorted(sentences) and matrix.shape == (23, DIM) and matrix.dtype == np.float32
    # Aligned lookup in the caller's order, float16 storage within rounding of the teacher's output.
    ordered, rows = cache.load(sentences[::-1])
    np.testing.assert_allclose(rows, FakeTeacher().encode(sentences[::-1]), atol=2e-3)
    with pytest.raises(KeyError):
        cache.load(["never labelled"])
    with pytest.raises(ValueError, match="refusing to mix"):
        cache.label(["a new sentence"], FakeTeacher(), name="another-teacher")


def test_teacher_cache_is_a_parquet_dataset(tmp_path):
    import datasets

    cache = TeacherCache(tmp_path)
    cache.label(["one two three", "four five six"], FakeTeacher(), name="fake", chunk_size=1)
    data = datasets.load_dataset("parquet", data_files=str(tmp_path / "chunk-*.parquet"), split="train")
    assert data.num_rows == 2 and len(data[0]["embedding"]) == DIM


# ----------------------------------------------------------------------------------------------- init
@pytest.fixture(scope="module")
def tiny_tokenizer():
    from psp_hf.tokenization.pieces import train_tokenizer

    text = [
        "the dog runs in the park",
        "a cat sleeps on the warm sofa",
        "children play football after school",
        "the market closed higher on monday",
    ] * 20
    return train_tokenizer(text, vocab_size=60)


def test_fit_dimension_pca_down_and_orthonormal_up():
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((200, 12)).astype(np.float32)
    down = fit_dimension(vectors, 5)
    assert down.shape == (200, 5)
    up = fit_dimension(vectors, 40)
    assert up.shape == (200, 40)
    cos = lambda m: (m / np.linalg.norm(m, axis=1, keepdims=True)) @ (m / np.linalg.norm(m, axis=1, keepdims=True)).T  # noqa: E731
    np.testing.assert_allclose(cos(up), cos(vectors), atol=1e-5)
    # PCA keeps the directions of largest variance: a dominant axis survives the reduction.
    vectors[:, 3] *= 50
    assert np.abs(np.corrcoef(fit_dimension(vectors, 1)[:, 0], vectors[:, 3])[0, 1]) > 0.99


def test_teacher_table_embeds_each_piece(tiny_tokenizer):
    teacher = FakeTeacher(dim=24)
    table = teacher_table(tiny_tokenizer, teacher, dim=8)
    assert table.shape == (len(tiny_tokenizer), 8)
    texts = piece_texts(tiny_tokenizer)
    assert texts[tiny_tokenizer.unk_token_id] == "" and sum(bool(t) for t in texts) == len(teacher.seen)


def test_word_vector_table_reports_coverage_and_bad_lines(tiny_tokenizer, tmp_path):
    texts = piece_texts(tiny_tokenizer)
    first, second = [text for text in texts if text][:2]
    vectors = tmp_path / "vectors.txt"
    vectors.write_text(f"3 4\n{first.upper()} 1 0 0 0\n{second} 0 1 0 0\nzebraqq 0 0 1 0\n")
    assert set(read_word_vectors(vectors)) == {first, second, "zebraqq"}
    init = word_vector_table(tiny_tokenizer, vectors, dim=4)
    assert init.covered == sum(t in (first, second) for t in texts) >= 2
    assert init.table.shape == (len(tiny_tokenizer), 4) and 0 < init.coverage < 1
    np.testing.assert_allclose(init.table[texts.index(first)], [1, 0, 0, 0])
    bad = tmp_path / "bad.txt"
    bad.write_text("the 1 0 0 0\ndog 0 1\n")
    with pytest.raises(PSPInputError, match="bad.txt:2"):
        read_word_vectors(bad)


# ----------------------------------------------------------------------------------------------- piece weights
def test_sif_weights_and_weighted_model_round_trip(tiny_tokenizer, tmp_path):
    from psp_hf import PSPEncoder

    encoder = PSPEncoder.from_tokenizer(tiny_tokenizer, hidden_size=6, seed=0)
    sentences = ["the dog runs in the park", "the cat sleeps"]
    counts = piece_counts(encoder, sentences)
    ids, _ = encoder.tokenize(sentences)
    assert counts.sum() == len(ids)
    weights = sif_weights(counts, a=0.01)
    frequent, rare = int(counts.argmax()), int(np.flatnonzero(counts == 1)[0])
    assert weights[frequent] < weights[rare] < 1.0 and weights[counts == 0].min() == 1.0
    weighted = with_piece_weights(encoder, weights)
    assert weighted.model.config.use_piece_weights
    one_ids, _ = weighted.tokenize(["the dog"])
    rows = encoder.model.embeddings.weight.detach()[one_ids].numpy()
    w = weights[one_ids.numpy()]
    expected = (rows * w[:, None]).sum(0) / w.sum()
    np.testing.assert_allclose(weighted.encode(["the dog"])[0], expected, rtol=1e-5, atol=1e-6)
    weighted.save_pretrained(tmp_path / "m")
    reloaded = PSPEncoder.from_pretrained(tmp_path / "m")
    np.testing.assert_allclose(reloaded.encode(["the dog"])[0], expected, rtol=1e-5, atol=1e-6)
    assert torch.equal(reloaded.model.piece_weights.detach(), torch.from_numpy(weights))


# ----------------------------------------------------------------------------------------------- mining
def test_mining_uses_the_trigram_overlap_of_psp_prepare():
    import psp_hf.data.mined_pairs as mined_pairs

    assert mined_pairs.trigram_overlap is trigram_overlap
    assert trigram_overlap("a man plays the guitar", "a man plays the guitar") == 1.0
    assert trigram_overlap("a man plays the guitar", "someone strums an instrument") == 0.0
    # 3 trigrams a side; only (a, man, plays) is shared.
    assert trigram_overlap("a man plays the guitar", "a man plays a violin") == pytest.approx(1 / 3)


def test_clustered_search_agrees_with_exact_search():
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((20, 8))
    x = (centres[rng.integers(0, 20, 600)] + 0.05 * rng.standard_normal((600, 8))).astype(np.float32)
    exact_best, exact_score = nearest_neighbours_exact(x, block_size=128)
    assert (exact_best != np.arange(600)).all()
    approx_best, approx_score = nearest_neighbours_clustered(x, nlist=10, nprobe=3)
    assert (approx_best != np.arange(600)).all()
    assert np.mean(approx_best == exact_best) > 0.95
    assert (approx_score <= exact_score + 1e-6).all()


def test_mine_pairs_threshold_and_near_copy_removal(tmp_path):
    sentences = [
        "a man is playing the guitar on stage",
        "a man is playing the guitar on stage tonight",  # near-copy of the first
        "someone strums an instrument",
        "a person plays a musical instrument",
        "the stock market fell sharply",
    ]
    vectors = np.array([[1, 0, 0], [1, 0.01, 0], [0.8, 0.6, 0], [0.82, 0.57, 0], [0, 0, 1]], dtype=np.float32)
    mined = mine_pairs(sentences, vectors, threshold=0.9, max_trigram_overlap=0.5)
    assert [{a, b} for a, b, _ in mined.pairs] == [{sentences[2], sentences[3]}]
    assert mined.near_copies == 1 and mined.below_threshold == 1 and mined.duplicates == 2
    path = write_pairs(mined.pairs, tmp_path / "pairs.tsv")
    lines = path.read_text().splitlines()
    assert lines[0] == "sentence1\tsentence2\tscore" and set(lines[1].split("\t")[:2]) == {sentences[2], sentences[3]}


# --------------------------------------------------------------------------------------------- tokenized corpus
def test_tokenized_corpus_batch_equals_direct_tokenization(tiny_tokenizer):
    from psp_hf import PSPEncoder
    from psp_hf.training.data.teacher_corpus import TokenizedCorpus

    sentences = ["the dog runs in the park", "a cat sleeps on the warm sofa", "children play football"] * 4
    encoder = PSPEncoder.from_tokenizer(tiny_tokenizer, hidden_size=12, seed=0, initializer_range=0.1)
    tokens = TokenizedCorpus.build(encoder, sentences)
    ids, offsets = tokens.batch(np.array([2, 0]))
    direct_ids, direct_offsets = encoder.tokenize([sentences[2], sentences[0]])
    assert torch.equal(ids, direct_ids) and torch.equal(offsets, direct_offsets)


NEWS = [f"news sentence number {i} about the markets" for i in range(40)]
WIKI = [f"wiki sentence number {i} about a village" for i in range(200)]


def _two_source_cache(root: Path, folder: str = "distill-corpus") -> TeacherCache:
    """Labels of a corpus of two sources (news, wiki), with the corpus recorded in the cache's meta."""
    from psp_hf.teachers.labels import record_provenance

    write_corpus(build_corpus([_source("news", NEWS), _source("wiki", WIKI)], {}), root / folder)
    cache = TeacherCache(root / "cache")
    cache.label([*NEWS, *WIKI], FakeTeacher(), name="fake")
    record_provenance(cache.directory, root / folder, 1.0)
    return cache


def test_corpus_weights_repeat_or_thin_each_source(tmp_path):
    from psp_hf.training.data.teacher_corpus import TeacherCorpus, parse_corpus_weights

    news, wiki = NEWS, WIKI
    cache = _two_source_cache(tmp_path)

    plain = TeacherCorpus(cache.directory, seed=3)
    assert plain.pass_rows is None and plain.shard_size == 240
    weighted = TeacherCorpus(cache.directory, seed=3, weights=parse_corpus_weights("news=2.5,wiki=0.5"))
    rows = weighted.shard(0)
    sentences = np.array(weighted.sentences, dtype=object)[rows]
    counts = {text: int((sentences == text).sum()) for text in [*news, *wiki]}
    assert all(counts[text] in (2, 3) for text in news) and all(counts[text] in (0, 1) for text in wiki)
    assert 100 < sum(counts[text] for text in news) < 100 + 40 - 10  # about half of them a third time
    assert 60 < sum(counts[text] for text in wiki) < 140
    assert weighted.shard_size == len(rows) and sorted(weighted.shard(1)) == sorted(rows)  # same draw, new order
    again = TeacherCorpus(cache.directory, seed=3, weights={"news": 2.5, "wiki": 0.5})
    np.testing.assert_array_equal(again.shard(0), rows)  # a resumed run sees the same pass
    with pytest.raises(PSPInputError, match="no source blogs in the corpus"):
        TeacherCorpus(cache.directory, weights={"blogs": 2})
    with pytest.raises(PSPInputError, match="weights >= 0"):
        parse_corpus_weights("news=-1")
    with pytest.raises(PSPInputError, match="bad: 'wiki'"):
        parse_corpus_weights("news=2,wiki")


def test_two_writers_of_one_teacher_cache_keep_each_others_chunks(tmp_path):
    first = [f"first writer sentence {i}" for i in range(12)]
    second = [f"second writer sentence {i}" for i in range(7)]

    class Interleaving(FakeTeacher):
        """Another process labels into the same cache while this one is embedding its first chunk."""

        def encode(self, sentences, **kwargs):
            if self.calls == 0:
                TeacherCache(tmp_path / "cache").label(second, FakeTeacher(), name="fake", chunk_size=5)
            return super().encode(sentences, **kwargs)

    cache = TeacherCache(tmp_path / "cache")
    assert cache.label(first, Interleaving(), name="fake", chunk_size=5) == 12
    # Both writers started at chunk 0; the later one moved on to the next free numbers instead of replacing.
    assert [path.name for path in cache.chunk_files()] == [f"chunk-{i:06d}.parquet" for i in range(5)]
    texts, rows = cache.load([*first, *second])
    np.testing.assert_allclose(rows, FakeTeacher().encode([*first, *second]), atol=2e-3)
    assert not [path for path in (tmp_path / "cache").iterdir() if path.name.startswith(".")]  # no temporaries left
