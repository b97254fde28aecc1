"""The vectorised word cache: exact against the tokenizer, under hash collisions, when full, on concurrent threads;
each test with the C look-up (`_words.c`) and C Unigram search of new words (`_unigram.c`), and with the numpy steps
and the tokenizer they replace."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from psp_hf.inference import batch_words, piece_cache, sentence_bytes, unigram, word_tokenizer
from psp_hf.inference.piece_cache import WordPieceCache, plain_sentences
from psp_hf.tokenization.pieces import train_tokenizer

CORPUS = ["A man is playing a guitar.", "A woman slices an onion.", "Two dogs run in a field."] * 30


@pytest.fixture(autouse=True, params=["c", "numpy"])
def look_up(request, monkeypatch):
    """Each test runs with the C look-up of a batch's words and the C search of new words (what installs with a
    compiler get; the search from the first new word on), and without either."""
    if request.param == "numpy":
        monkeypatch.setattr(batch_words, "_words_kernel", None)
        monkeypatch.setattr(sentence_bytes, "_words_kernel", None)
        monkeypatch.setattr(unigram, "_kernel", None)
    else:
        # The install built them (CI's machines have a compiler).
        assert batch_words._words_kernel is not None and unigram._kernel is not None
        monkeypatch.setattr(word_tokenizer, "MIN_WORDS_FOR_C_SEARCH", 1)
    return request.param


def few_hash_bits(monkeypatch) -> None:
    """Hashes of a few bits: nearly every word collides with a cached one, so the byte check decides everything.
    Done on the hash table, which both look-ups read."""
    real = batch_words._hash_table
    monkeypatch.setattr(batch_words, "_hash_table", lambda positions: real(positions) & np.uint64(3))


@pytest.fixture(scope="module")
def backend():
    from psp_hf.inference.encode_inputs import private_backend

    return private_backend(train_tokenizer(CORPUS, vocab_size=60).backend_tokenizer)


def random_sentences(n: int, seed: int) -> list[str]:
    """Words of random letters (many distinct, some long, mixed case), varied spacing, empty sentences."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefgABCDEG.,'-"))
    words = ["".join(rng.choice(letters, size=rng.integers(1, 14))) for _ in range(300)] + ["x" * 300]
    out = []
    for _ in range(n):
        picked = rng.choice(words, size=rng.integers(0, 9))
        out.append(("  " if rng.random() < 0.2 else " ").join(picked) + (" " if rng.random() < 0.1 else ""))
    return out


def expected(backend, batch: list[str]) -> tuple[list[int], list[int]]:
    rows = [e.ids for e in backend.encode_batch(batch, add_special_tokens=False)]
    return [i for row in rows for i in row], [len(row) for row in rows]


def cacheable(sentence: str) -> bool:
    """The sentences the cache tries: no control character."""
    return not any(character < " " or character == "\x7f" for character in sentence)


def check(cache: WordPieceCache, backend, batch: list[str]) -> None:
    flat, lengths = cache.encode(batch)
    assert (flat.tolist(), lengths.tolist()) == expected(backend, batch)


def test_cache_equals_tokenizer_across_batches(backend, look_up):
    cache = WordPieceCache(backend)
    for seed in range(4):
        check(cache, backend, random_sentences(200, seed))
    assert len(cache) > 250
    assert (cache._words._c_search is not None) == (look_up == "c")  # which search cut the new words
    flat, lengths = cache.encode([])
    assert flat.shape == lengths.shape == (0,)


def test_hash_collisions_still_give_exact_pieces(backend, monkeypatch):
    few_hash_bits(monkeypatch)
    cache = WordPieceCache(backend)
    for seed in range(3):
        check(cache, backend, random_sentences(100, seed))


def test_a_full_cache_stays_exact_and_does_not_grow(backend):
    cache = WordPieceCache(backend, max_words=50)
    check(cache, backend, random_sentences(8, 0))
    stored = len(cache)
    assert 0 < stored <= 50
    for seed in range(1, 6):  # mostly words the cache has no room for, beside some it holds
        check(cache, backend, random_sentences(60, seed))
    assert stored <= len(cache) <= 50


def test_a_full_cache_under_hash_collisions_is_exact(backend, monkeypatch):
    few_hash_bits(monkeypatch)
    cache = WordPieceCache(backend, max_words=30)
    for seed in range(4):
        check(cache, backend, random_sentences(50, seed))
    assert len(cache) <= 30


def test_concurrent_threads_filling_the_cache_are_exact(backend):
    cache = WordPieceCache(backend, max_words=120)  # small: it fills while other threads read
    failures = []

    def work(seed: int) -> None:
        for round_ in range(6):
            batch = random_sentences(40, 10 * seed + round_)
            got = cache.encode(batch)
            if (got[0].tolist(), got[1].tolist()) != expected(backend, batch):
                failures.append((seed, round_))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(cache) <= 120


def test_plain_sentences_matches_the_per_sentence_rule(backend):
    sentences = ["plain text.", "", "tab\there", "new\nline", "caf\u00e9", "del\x7f", "~ ok {}", "\u2014", "  "]
    expected_mask = [cacheable(s) for s in sentences]
    assert plain_sentences(sentences).tolist() == expected_mask
    without_newline = [s for s in sentences if "\n" not in s]
    assert plain_sentences(without_newline).tolist() == [cacheable(s) for s in without_newline]
    check(WordPieceCache(backend), backend, ["fine", "caf\u00e9"])  # beyond ASCII, but no control character
    assert WordPieceCache(backend).encode(["fine", "two\nlines"]) is None


@pytest.mark.parametrize(
    "sentences",
    [
        ["a b", "caf\u00e9", ""],
        ["a b", "", "caf\u00e9"],
        ["caf\u00e9", "x"],
        ["caf\u00e9", "\u2014"],
        ["one", "two\nlines", "", "three"],
        ["", "", "\t"],
        ["all", "plain", ""],
        ["lone \ud800 surrogate", "\U0001f44d four bytes", "\u00ff two", "\u20ac three"],
        ["x" * 4096, "y" * 4097, "fine"],
        ["\u00e9" * 2048, "\u00e9" * 2049 + " z", "ok"],
        ["del\x7fete", "ok"],
    ],
)
def test_split_plain_keeps_exactly_the_sentences_without_control_characters(sentences):
    from psp_hf.inference.piece_cache import split_plain

    plain, raw = split_plain(sentences)
    mask = [cacheable(s) and max(map(len, s.encode("utf-8", "surrogatepass").split(b" "))) <= 4096 for s in sentences]
    assert (plain is None) == all(mask)
    assert plain is None or plain.tolist() == mask
    kept = "\n".join(s for s, ok in zip(sentences, mask, strict=True) if ok)
    assert raw.tobytes() == kept.encode("utf-8", "surrogatepass")


# Words beyond ASCII: each checked once against the normalizer (see psp_hf.inference.word_tokenizer). These are the
# cases where a word alone and the same word inside a sentence could be normalized or split differently.
TRICKY = [
    "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e",
    "\u039f\u0394\u039f\u03a3 \u03ba\u03b1\u03b9 \u03a3\u039f\u03a6\u039f\u03a3.",  # final sigma, decided by neighbours
    "\u0130stanbul'da \u0131\u015f\u0131k",  # dotted capital I lowercases to two characters
    # the article split off
    "\u0627\u0644\u0643\u062a\u0627\u0628 \u0648\u0627\u0644\u0642\u0644\u0645 \u0628\u0627\u0644\u0628\u064a\u062a",
    "foo\u00a0bar baz",  # a no-break space inside a word: two words for the normalizer
    "\u0301abc starts with a combining mark",
    "x \u0301y z",
    "\u2581lead mark and a \u2581 alone",
    "mid\u2581mark word",
    "zero\u200bwidth and \u200b alone",
    "emoji \U0001f44d\U0001f3fd ok \U0001f3fd",
    "\u4e2d\u6587\u53e5\u5b50\u6ca1\u6709\u7a7a\u683c",
    "\ufb01ne \u216b full\uff0dwidth \u01c5",
    "\u3000ideographic space\u3000inside",
    "prepend\u0600 x \u0600",
    "e\u0301 decomposed and \u00e9 composed",
    "  leading and trailing  spaces \u00e9 ",
    "\u00e9",
    "",
]


@pytest.fixture(scope="module")
def multilingual_encoder():
    from psp_hf import PSPEncoder

    corpus = CORPUS + [sentence for sentence in TRICKY if sentence.strip()] * 20
    return PSPEncoder.from_tokenizer(train_tokenizer(corpus, vocab_size=120, character_coverage=1.0), 8, seed=1)


def test_non_ascii_words_cut_as_the_tokenizer_cuts_them(multilingual_encoder):
    backend = multilingual_encoder.backend_tokenizer
    batches = [TRICKY, TRICKY[::-1], [f"{a} {b}" for a, b in zip(TRICKY, TRICKY[1:], strict=False)]]
    for batch in batches * 2:  # the second round reads the words the first one stored
        flat, offsets = multilingual_encoder.tokenize_numpy(batch)
        want_flat, want_lengths = expected(backend, batch)
        assert flat.tolist() == want_flat
        assert offsets.tolist() == np.concatenate([[0], np.cumsum(want_lengths)[:-1]]).tolist()


def test_refused_words_send_their_sentence_to_the_tokenizer(multilingual_encoder):
    from psp_hf.inference.word_tokenizer import REFUSED, WordTokenizer

    words = WordTokenizer(multilingual_encoder.backend_tokenizer)
    # A word the normalizer removes would leave two spaces in a sentence, which the normalizer then folds.
    bounds, pieces = words.tokenize([b"plain", "\u200b".encode(), "\u00e9t\u00e9".encode()])
    assert pieces[bounds[1] : bounds[2]].tolist() == [REFUSED]
    assert REFUSED not in pieces[bounds[0] : bounds[1]].tolist() + pieces[bounds[2] :].tolist()
    cache = WordPieceCache(multilingual_encoder.backend_tokenizer)
    assert cache.encode(["plain words", "x \u200b y"]) is None
    flat, lengths = cache.encode(["plain words", "\u00e9t\u00e9 caf\u00e9"])
    assert (flat.tolist(), lengths.tolist()) == expected(
        multilingual_encoder.backend_tokenizer, ["plain words", "\u00e9t\u00e9 caf\u00e9"]
    )


def test_a_split_word_keeps_all_its_pieces():
    # P-SP's Arabic normalizer splits the article off a word: one word, two parts for the pre-tokenizer.
    from psp_hf.inference.encode_inputs import private_backend
    from psp_hf.inference.word_tokenizer import WordTokenizer

    arabic = ["\u0627\u0644\u0643\u062a\u0627\u0628 \u0643\u062a\u0627\u0628 \u0648\u0627\u0644\u0642\u0644\u0645"] * 40
    backend = private_backend(train_tokenizer(CORPUS + arabic, vocab_size=60).backend_tokenizer)
    word = "\u0627\u0644\u0643\u062a\u0627\u0628"
    assert backend.normalizer.normalize_str(word).count(" ") == 1
    bounds, pieces = WordTokenizer(backend).tokenize([word.encode(), b"man", word.encode() + b"x"])
    for k, text in enumerate([word, "man", word + "x"]):
        assert pieces[bounds[k] : bounds[k + 1]].tolist() == backend.encode(text, add_special_tokens=False).ids


def test_a_word_too_long_to_hash_sends_its_sentence_to_the_tokenizer(backend):
    from psp_hf.inference.sentence_bytes import MAX_WORD_BYTES, split_plain

    long_word = "ab" * MAX_WORD_BYTES  # text without spaces: a whole page as one word
    plain, raw = split_plain(["a man", long_word, "a dog " + long_word + " runs", "fine"])
    assert plain.tolist() == [True, False, False, True]
    assert raw.tobytes() == b"a man\nfine"
    plain, _ = split_plain(["new\nline", long_word, "ok"])  # the sentence-by-sentence path keeps the same rule
    assert plain.tolist() == [False, False, True]
    assert WordPieceCache(backend).encode(["a man", long_word]) is None


def test_the_bytes_bound_keeps_long_words_from_filling_memory(backend):
    cache = WordPieceCache(backend, max_bytes=200)
    check(cache, backend, ["a man plays", "a dog runs"])  # fits: stored
    for seed in range(4):
        check(cache, backend, random_sentences(60, seed))  # a batch's new words do not fit: exact all the same
    snapshot = cache._snapshot
    assert 0 < int(snapshot.byte_bounds[snapshot.n_words]) <= 200


@pytest.mark.parametrize("look_up", ["c"], indirect=True)  # compares the C function with the numpy steps itself
def test_the_c_look_up_gives_the_numpy_steps_arrays(backend, look_up):
    cache = WordPieceCache(backend)
    cache.encode(random_sentences(100, 7))  # some words cached, others not
    sentences = random_sentences(120, 8) + ["X" * 200 + " é Ab"]  # a word past the first hash table's positions
    _, raw = piece_cache.split_plain(sentences)
    snapshot = cache._snapshot
    words, ids = batch_words.look_up(snapshot, raw, len(sentences))
    numpy_words = batch_words._split_words(raw, len(sentences))
    numpy_ids = batch_words.verified_ids(snapshot, numpy_words, np.arange(len(numpy_words.starts)))
    for field in ("text", "chars", "starts", "ends", "hashes", "sentence_bounds"):
        np.testing.assert_array_equal(getattr(words, field), getattr(numpy_words, field), err_msg=field)
    np.testing.assert_array_equal(ids, numpy_ids)
    assert (ids >= 0).any() and (ids < 0).any()
    with pytest.raises(ValueError, match="must hold 3 sentences"):
        batch_words.look_up(snapshot, np.frombuffer(b"one\ntwo", dtype=np.uint8), 3)


def test_the_c_functions_refuse_what_they_cannot_read():
    from psp_hf.inference import _words

    ids, bounds = np.array([0, 5], dtype=np.int64), np.array([0, 2], dtype=np.int64)
    piece_bounds, pieces = np.array([0, 1, 3], dtype=np.int64), np.array([7, 8, 9], dtype=np.int64)
    lengths = np.empty(1, dtype=np.int64)
    with pytest.raises(ValueError, match="word 1 has id 5, not a cached word"):
        _words.gather_pieces(ids, bounds, piece_bounds, pieces, lengths, None)
    ids[1] = 1
    with pytest.raises(ValueError, match="flat holds 2 pieces, 3 needed"):
        _words.gather_pieces(ids, bounds, piece_bounds, pieces, lengths, np.empty(2, dtype=np.int64))
    flat = np.empty(3, dtype=np.int64)
    assert _words.gather_pieces(ids, bounds, piece_bounds, pieces, lengths, flat) == 3 and flat.tolist() == [7, 8, 9]
    # join_plain: a list or a tuple of str, else None (the Python steps then say what is wrong).
    assert _words.join_plain(("a b", "\u00e9"), 4096) == "a b\n\u00e9".encode()
    assert _words.join_plain(["a", 3], 4096) is None and _words.join_plain(["a\tb"], 4096) is None
    with pytest.raises(TypeError, match="join_plain takes a list or a tuple"):
        _words.join_plain("abc", 4096)
