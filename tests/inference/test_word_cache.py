"""The vectorised word cache: exact against the tokenizer, under hash collisions, when full, on concurrent threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from psp_hf.inference import piece_cache
from psp_hf.inference.piece_cache import WordPieceCache, plain_sentences
from psp_hf.tokenizer import train_tokenizer

CORPUS = ["A man is playing a guitar.", "A woman slices an onion.", "Two dogs run in a field."] * 30


@pytest.fixture(scope="module")
def backend():
    from psp_hf.inference.encoder_helpers import private_backend

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


def check(cache: WordPieceCache, backend, batch: list[str]) -> None:
    flat, lengths = cache.encode(batch)
    assert (flat.tolist(), lengths.tolist()) == expected(backend, batch)


def test_cache_equals_tokenizer_across_batches(backend):
    cache = WordPieceCache(backend)
    for seed in range(4):
        check(cache, backend, random_sentences(200, seed))
    assert len(cache) > 250
    flat, lengths = cache.encode([])
    assert flat.shape == lengths.shape == (0,)


def test_hash_collisions_still_give_exact_pieces(backend, monkeypatch):
    # Two bits of hash: nearly every word collides with a cached one, so the byte check decides everything.
    real = piece_cache._hash_words
    monkeypatch.setattr(piece_cache, "_hash_words", lambda *args: real(*args) & np.uint64(3))
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
    real = piece_cache._hash_words
    monkeypatch.setattr(piece_cache, "_hash_words", lambda *args: real(*args) & np.uint64(3))
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
    expected_mask = [s.isascii() and s.isprintable() for s in sentences]
    assert plain_sentences(sentences).tolist() == expected_mask
    without_newline = [s for s in sentences if "\n" not in s]
    assert plain_sentences(without_newline).tolist() == [s.isascii() and s.isprintable() for s in without_newline]
    assert WordPieceCache(backend).encode(["fine", "caf\u00e9"]) is None
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
    ],
)
def test_split_plain_keeps_exactly_the_plain_sentences(sentences):
    from psp_hf.inference.piece_cache import split_plain

    plain, raw = split_plain(sentences)
    mask = [s.isascii() and s.isprintable() for s in sentences]
    assert (plain is None) == all(mask)
    assert plain is None or plain.tolist() == mask
    assert raw.tobytes().decode("ascii") == "\n".join(s for s, ok in zip(sentences, mask, strict=True) if ok)
