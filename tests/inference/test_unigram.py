"""The C Unigram search of the word cache's new words (src/psp_hf/inference/_unigram.c, unigram.py): the same pieces
as the `tokenizers` library on real text and on the corner cases of its search (unknown characters, fused runs,
ties), used only where it cannot differ, and mixed with the library word by word."""

from __future__ import annotations

import gzip
import itertools
import os
import subprocess
import sys

import numpy as np
import pytest
from tokenizers import Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import BPE, Unigram

from psp_hf.data_folder import existing_data_dir
from psp_hf.inference import unigram, word_tokenizer
from psp_hf.inference.unigram import UnigramWords
from psp_hf.inference.word_tokenizer import WordTokenizer
from psp_hf.tokenization.pieces import train_tokenizer


def library_pieces(backend, words: list[bytes]) -> list[list[int]]:
    """Each word's pieces as the library cuts the word alone."""
    encodings = backend.encode_batch([word.decode() for word in words], add_special_tokens=False)
    return [encoding.ids for encoding in encodings]


def c_pieces(search: UnigramWords, words: list[bytes]) -> list[list[int]]:
    bounds, pieces = search.segment(words)
    return [pieces[bounds[k] : bounds[k + 1]].tolist() for k in range(len(words))]


def hand_made(vocab: list[tuple[str, float]], prepend_scheme: str = "always", byte_fallback: bool = False):
    """A Unigram tokenizer with these pieces (id 0 is <unk>) behind a Metaspace pre-tokenizer, no normalizer."""
    backend = Tokenizer(Unigram([("<unk>", 0.0), *vocab], unk_id=0, byte_fallback=byte_fallback))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=prepend_scheme)
    return backend


def distinct_words(lines, limit: int) -> list[bytes]:
    words: dict[bytes, None] = {}
    for line in itertools.islice(lines, limit):
        for word in line.lower().split():
            words.setdefault(word.encode(), None)
    return list(words)


@pytest.fixture(scope="module")
def wikipedia() -> list[str]:
    path = existing_data_dir() / "unlabeled" / "en" / "wikipedia-2015" / "sentences.txt.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return list(itertools.islice(handle, 60_000))


def test_the_c_search_cuts_every_real_word_as_the_library_does(wikipedia):
    # A vocabulary trained on a little of the text, so that many of the other words need several pieces, and some
    # characters have none (unknown pieces, fused runs).
    backend = train_tokenizer(wikipedia[:5_000], vocab_size=2_000).backend_tokenizer
    search = UnigramWords.for_backend(backend)
    assert search is not None
    words = distinct_words(wikipedia, 60_000)
    eligible = search.eligible(words)
    chosen = [word for word, ok in zip(words, eligible.tolist(), strict=True) if ok]
    assert len(words) > 100_000 and len(chosen) > 0.9 * len(words)
    assert c_pieces(search, chosen) == library_pieces(backend, chosen)
    # The words it leaves to the library are those beyond printable ASCII or holding an added token's first byte.
    left = [word for word, ok in zip(words, eligible.tolist(), strict=True) if not ok]
    assert all(not word.isascii() or b"<" in word for word in left)


@pytest.mark.parametrize(
    "words",
    [
        [b"qz", b"aqza", b"qqq", b"aq", b"zzaqq"],  # characters without a piece: unknown, runs of them fused
        [b"ab", b"abab", b"aab", b"ba", b"b"],  # ties: "ab" against "a" + "b" at the same score
        [b"a", b"aaaa", b"ac", b"cab"],
    ],
)
def test_unknown_characters_fused_runs_and_ties_as_the_library(words):
    backend = hand_made([("\u2581", -1.0), ("a", -2.0), ("b", -2.0), ("ab", -4.0), ("\u2581a", -2.5), ("c", -9.0)])
    search = UnigramWords.for_backend(backend)
    assert c_pieces(search, words) == library_pieces(backend, words)
    # "\u2581" (id 1), then one unknown piece for the whole run of characters without a piece.
    assert c_pieces(search, [b"qz", b"qqq"]) == [[1, 0], [1, 0]]


@pytest.mark.parametrize(
    "change",
    [
        lambda backend: setattr(backend, "pre_tokenizer", pre_tokenizers.Metaspace(prepend_scheme="first")),
        lambda backend: setattr(backend, "pre_tokenizer", pre_tokenizers.Whitespace()),
        lambda backend: setattr(backend, "model", BPE(unk_token="<unk>")),
        lambda backend: setattr(backend, "model", Unigram([("<unk>", 0.0), ("a", -1.0)], 0, byte_fallback=True)),
    ],
    ids=["metaspace-first", "whitespace", "bpe", "byte-fallback"],
)
def test_only_a_unigram_model_behind_a_marking_metaspace_gets_the_c_search(change):
    backend = hand_made([("a", -1.0)])
    assert UnigramWords.for_backend(backend) is not None
    change(backend)
    assert UnigramWords.for_backend(backend) is None


def test_words_the_normalizer_or_an_added_token_would_change_go_to_the_library():
    backend = hand_made([("a", -1.0), ("x", -1.0), ("y", -1.0)])
    backend.normalizer = normalizers.Replace("x", "y")
    backend.add_special_tokens(["[mask]"])
    search = UnigramWords.for_backend(backend)
    words = [b"aya", b"axa", b"a[a", b"a\xc3\xa9", b"aYa", b"", b"a~a"]
    assert search.eligible(words).tolist() == [True, False, False, False, False, False, True]


def test_word_tokenizer_mixes_the_c_search_and_the_library_word_by_word(monkeypatch, wikipedia):
    backend = train_tokenizer(wikipedia[:2_000], vocab_size=1_000).backend_tokenizer
    words = distinct_words(wikipedia[:3_000], 3_000)
    words += ["ça", "naïve", "straße", "<unk>x", "日本"]
    words = [word.encode() if isinstance(word, str) else word for word in words]
    monkeypatch.setattr(word_tokenizer, "MIN_WORDS_FOR_C_SEARCH", 10**9)
    tokenizer = WordTokenizer(backend)
    expected = tokenizer.tokenize(words)
    assert tokenizer._c_search is None and not tokenizer._c_search_tried  # a short call builds nothing
    monkeypatch.setattr(word_tokenizer, "MIN_WORDS_FOR_C_SEARCH", 1)
    mixed = WordTokenizer(backend)
    bounds, pieces = mixed.tokenize(words)
    assert mixed._c_search is not None
    np.testing.assert_array_equal(bounds, expected[0])
    np.testing.assert_array_equal(pieces, expected[1])
    ascii_only = [word for word in words if word.isascii() and b"<" not in word]
    np.testing.assert_array_equal(mixed.tokenize(ascii_only)[1], tokenizer.tokenize_with_library(ascii_only)[1])


def test_the_kernels_switch_turns_the_c_search_off_too():
    code = "from psp_hf.inference import unigram; print(unigram._kernel is None)"
    env = {**os.environ, "PSP_C_KERNELS": "0"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert run.stdout.strip() == "True"
    assert unigram._kernel is not None  # the install built it (CI's machines have a compiler)


def test_the_kernel_refuses_arrays_it_cannot_use():
    backend = hand_made([("a", -1.0)])
    search = UnigramWords.for_backend(backend)
    with pytest.raises(ValueError, match="segment: arrays of the wrong sizes"):
        unigram._kernel.segment(
            search._keys, search._children, search._node_piece, search._scores, np.frombuffer(b"aa", np.uint8),
            np.array([0, 2], dtype=np.int64), 0, -11.0, True, np.empty(1, np.int64), np.empty(1, np.int64),
        )  # fmt: skip
    with pytest.raises(TypeError, match="keys must be a 1-D array of 4-byte items"):
        unigram._kernel.build_trie(
            np.zeros(1, np.uint8), np.zeros(1, np.int64), np.zeros(4, np.uint64), np.zeros(4, np.int32),
            np.zeros(2, np.int32),
        )  # fmt: skip


def test_the_bench_reads_the_words_the_cache_would_store(tmp_path):
    from bench_scripts import bench_script

    text = tmp_path / "text.txt"
    text.write_text("The cat SAW the Cat\nÉté été  cat\nnot read\n", encoding="utf-8")
    words = bench_script("unigram").distinct_words(text, 2)
    assert words == [b"the", b"cat", b"saw", "Été".encode(), "été".encode()]  # ASCII letters only are lowercased
