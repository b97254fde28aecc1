"""encode in a process that loaded torch: each batch pools through psp's kernel, or without it through embedding_bag on
one thread, with the GIL released, and the caller's torch thread settings are the same afterwards, in its own thread
and in threads it starts later.

Behavioural checks only (no timings): the speed they protect is measured by bench/encode_processes.py.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from psp_hf import PSPEncoder
from psp_hf.inference import intra_op, pooling
from psp_hf.modeling import pool_bags as torch_pool_bags
from psp_hf.tokenization.pieces import train_tokenizer

CORPUS = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "Two dogs run across the green field.",
    "The children are playing football in the park.",
    "Stocks fell sharply on Monday after the announcement.",
] * 20
SENTENCES = [f"{sentence} {index % 7} Zwei Hunde." for index, sentence in enumerate(CORPUS * 6)]
BATCH = 32


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("threads") / "model"
    PSPEncoder.from_tokenizer(train_tokenizer(CORPUS, vocab_size=80), hidden_size=16, seed=4).save_pretrained(path)
    return path


@pytest.fixture
def torch_threads():
    """Sets torch's thread count for one test and puts the suite's back afterwards."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


@pytest.fixture
def without_kernel(monkeypatch):
    """Pools as an install without psp's compiled kernel does: torch's embedding_bag when torch is loaded."""
    monkeypatch.setattr(pooling, "_kernel", None)


@pytest.fixture
def pool_calls(monkeypatch):
    """Every embedding_bag call: the thread count torch would use for it, as seen from inside the call."""
    calls: list[int] = []
    real = torch.nn.functional.embedding_bag

    def spy(*args, **kwargs):
        calls.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "embedding_bag", spy)
    return calls


def _count_in_new_thread() -> int:
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    thread.start()
    thread.join()
    return seen[0]


def test_the_openmp_runtime_behind_torch_is_found(without_kernel):
    # On the platforms CI runs (Linux, torch's OpenMP build) the one-thread guard must be active, not the fallback.
    if "OpenMP" in torch.__config__.parallel_info() and sys.platform.startswith("linux"):
        assert intra_op.runtime(torch) is not None
        assert pooling.backend() == "torch"


@pytest.mark.parametrize("caller_threads", [1, 2, 3])
@pytest.mark.parametrize("num_threads", [1, 2])
def test_without_the_kernel_encode_pools_on_one_thread_and_keeps_the_callers_count(
    folder, torch_threads, pool_calls, without_kernel, caller_threads, num_threads
):
    torch_threads(caller_threads)
    encoder = PSPEncoder.from_pretrained(folder)
    vectors = encoder.encode(SENTENCES, batch_size=BATCH, num_threads=num_threads)
    # Every batch went through embedding_bag (not numpy's fallback), each on its calling thread alone.
    assert len(pool_calls) == -(-len(SENTENCES) // BATCH)
    assert set(pool_calls) == {1}
    # The caller's setting is untouched: in its own thread and for the threads it starts later.
    assert torch.get_num_threads() == caller_threads
    assert _count_in_new_thread() == caller_threads
    # Same numbers as the model's own torch pooling.
    flat, offsets = encoder.tokenize(SENTENCES)
    expected = encoder.model.embed(flat, offsets).detach().numpy()
    np.testing.assert_array_equal(vectors, expected)


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "torch"])
def test_pooling_releases_the_gil(kernel, monkeypatch):
    """With a switch interval longer than the test, another thread can only run while pooling has released the
    GIL: the helper makes no progress at all during a call that holds it, so no timing decides the outcome."""
    if not kernel:
        monkeypatch.setattr(pooling, "_kernel", None)
    assert pooling.backend() == ("kernel" if kernel else "torch")
    rng = np.random.default_rng(0)
    table = rng.standard_normal((5000, 256)).astype(np.float32)
    flat = rng.integers(0, 5000, size=1_500_000)
    offsets = np.arange(0, len(flat), 15, dtype=np.int64)
    progress = [0]
    stop = threading.Event()

    def helper() -> None:
        while not stop.is_set():
            progress[0] += 1
            time.sleep(0)  # lets the pooling thread take the GIL back as soon as its call returns

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    thread = threading.Thread(target=helper)
    try:
        thread.start()
        while progress[0] == 0:  # the helper is running (and now waits for the GIL whenever we hold it)
            time.sleep(0.001)
        before = progress[0]
        pooled = pooling.pool_bags_fast(table, flat, offsets)
        during = progress[0] - before
    finally:
        stop.set()
        sys.setswitchinterval(interval)
        thread.join()
    assert during > 0
    np.testing.assert_array_equal(pooled[:3], pooling.pool_bags(table, flat[:45], offsets[:3]))


def test_without_the_runtime_only_a_one_thread_torch_pools(
    folder, torch_threads, pool_calls, without_kernel, monkeypatch
):
    """Where torch's OpenMP runtime cannot be reached, a process running torch on more threads pools with numpy
    (same numbers) rather than through embedding_bag's team of threads."""
    monkeypatch.setattr(intra_op, "_runtime", None)
    encoder = PSPEncoder.from_pretrained(folder)
    torch_threads(2)
    with_numpy = encoder.encode(SENTENCES, batch_size=BATCH, num_threads=2)
    assert pool_calls == [] and pooling.backend() == "numpy"
    torch_threads(1)
    with_torch = encoder.encode(SENTENCES, batch_size=BATCH, num_threads=2)
    assert len(pool_calls) == -(-len(SENTENCES) // BATCH) and set(pool_calls) == {1}
    np.testing.assert_array_equal(with_numpy, with_torch)


@pytest.mark.parametrize("mode", ["mean", "max", "sum"])
def test_numpy_pooling_of_long_and_equal_length_bags_equals_embedding_bag(mode):
    # Many bags of each length (the length groups), bags far longer than numpy's pairwise-summation block, and a
    # group too large for one gathered block (40 bags of 300 rows of 48 floats: more than _BLOCK_BYTES).
    rng = np.random.default_rng(5)
    lengths = np.concatenate([rng.integers(0, 6, 500), rng.integers(100, 400, 20), [0, 1, 1000], [300] * 40])
    rng.shuffle(lengths)
    flat = rng.integers(0, 300, size=int(lengths.sum()))
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    table = rng.standard_normal((300, 48)).astype(np.float32)
    expected = torch_pool_bags(torch.from_numpy(table), torch.from_numpy(flat), torch.from_numpy(offsets), mode=mode)
    np.testing.assert_array_equal(pooling.pool_bags(table, flat, offsets, mode=mode), expected.numpy())
    weights = rng.random(len(flat)).astype(np.float32) + 0.1
    weighted = torch_pool_bags(*(torch.from_numpy(x) for x in (table, flat, offsets, weights))).numpy()
    np.testing.assert_allclose(pooling.pool_bags(table, flat, offsets, weights), weighted, rtol=1e-5, atol=1e-6)
