"""psp's compiled pooling kernel (src/psp_hf/inference/_pooling.c): built by the install, the same numbers as numpy's
`pool_bags` and torch's `embedding_bag`, clear errors, and encode using it without touching torch.

Tiny tables built here; the speed it exists for is measured by bench/pooling.py and bench/encode_processes.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from psp_hf import PSPEncoder
from psp_hf.inference import pooling
from psp_hf.modeling import pool_bags as torch_pool_bags
from psp_hf.tokenization.pieces import train_tokenizer


def _bags(seed: int, rows: int, dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A table and bags of every kind: empty, one piece, many of each length, and a few long ones."""
    rng = np.random.default_rng(seed)
    lengths = np.concatenate([rng.integers(0, 6, 200), rng.integers(100, 300, 5), [0, 1, 700]])
    rng.shuffle(lengths)
    flat = rng.integers(0, rows, size=int(lengths.sum()))
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return rng.standard_normal((rows, dim)).astype(np.float32), flat, offsets


def _kernel(table, flat, offsets, mode="mean", weights=None) -> np.ndarray:
    out = np.full((len(offsets), table.shape[1]), np.nan, dtype=np.float32)
    modes = {"mean": 0, "sum": 1, "max": 2}
    return pooling._kernel.pool(table, flat, offsets, out, modes[mode], weights)


def test_the_install_built_the_kernel():
    # The package builds it wherever a C compiler is found (setup.py); CI's machines have one, so a silent build
    # failure would show here rather than as a slower encode.
    assert pooling._kernel is not None
    assert pooling.backend() == "kernel"


@pytest.mark.parametrize("dim", [1, 3, 4, 7, 16, 50, 384])
@pytest.mark.parametrize("mode", ["mean", "sum", "max"])
def test_the_kernel_gives_numpys_and_torchs_numbers(mode, dim):
    # Widths below, at and between the kernel's blocks of 16 and 4 dimensions.
    table, flat, offsets = _bags(dim, 97, dim)
    got = _kernel(table, flat, offsets, mode)
    expected = torch_pool_bags(torch.from_numpy(table), torch.from_numpy(flat), torch.from_numpy(offsets), mode=mode)
    np.testing.assert_array_equal(got, expected.numpy())
    if dim > 1:  # numpy adds a one-wide table's long bags pairwise, not in order: it differs in the last bit there
        np.testing.assert_array_equal(got, pooling.pool_bags(table, flat, offsets, mode=mode))
    assert not got[np.diff(np.append(offsets, len(flat))) == 0].any()  # empty bags pool to zeros


@pytest.mark.parametrize("dim", [5, 48])
def test_weighted_means_match_numpys(dim):
    table, flat, offsets = _bags(11, 60, dim)
    weights = np.random.default_rng(3).random(len(flat)).astype(np.float32) + 0.1
    got = _kernel(table, flat, offsets, weights=weights)
    # numpy sums a long bag's weights pairwise, the kernel in order (as torch): equal to the last bit or two.
    np.testing.assert_allclose(got, pooling.pool_bags(table, flat, offsets, weights), rtol=2e-6, atol=1e-7)
    # All-zero weights divide by 1e-12, as numpy's pool_bags does, instead of giving NaN.
    zero = _kernel(table, flat, offsets, weights=np.zeros(len(flat), dtype=np.float32))
    assert np.isfinite(zero).all() and not zero.any()


def test_max_lets_a_nan_win_as_numpy_does():
    table = np.array([[1.0, np.nan, 3.0, 0.0, 5.0], [np.nan, 2.0, -1.0, 4.0, 6.0]], dtype=np.float32)
    flat, offsets = np.array([0, 1, 1, 0]), np.array([0, 2], dtype=np.int64)
    got = _kernel(table, flat, offsets, "max")
    np.testing.assert_array_equal(got, pooling.pool_bags(table, flat, offsets, mode="max"))
    assert np.isnan(got[:, :2]).all()


def test_bad_input_is_refused_with_what_was_wrong():
    table, flat, offsets = _bags(1, 20, 8)
    with pytest.raises(IndexError, match=r"piece ids must be in \[0, 20\), got 0\.\.20"):
        _kernel(table, np.append(flat, 20), offsets)
    with pytest.raises(IndexError, match="got -1"):
        _kernel(table, np.append(flat, -1), offsets)
    with pytest.raises(ValueError, match="offsets must start at 0"):
        _kernel(table, flat, offsets + 1)
    with pytest.raises(ValueError, match="offsets must start at 0 and rise"):
        _kernel(table, flat, offsets[::-1].copy())
    with pytest.raises(TypeError, match="table must be a 2-D float32 array"):
        _kernel(table.astype(np.float64), flat, offsets)
    with pytest.raises(TypeError, match="flat_ids must be a 1-D int64 array"):
        _kernel(table, flat.astype(np.int32), offsets)
    with pytest.raises(TypeError, match="out must be a C-contiguous writable array"):
        pooling._kernel.pool(table, flat, offsets, np.zeros((len(offsets), 16), np.float32)[:, ::2], 0, None)
    with pytest.raises(ValueError, match=r"out must have shape \(208, 8\)"):
        pooling._kernel.pool(table, flat, offsets, np.zeros((3, 8), np.float32), 0, None)
    with pytest.raises(ValueError, match="one weight per id"):
        _kernel(table, flat, offsets, weights=np.ones(3, dtype=np.float32))
    with pytest.raises(ValueError, match="mode must be"):
        pooling.pool_bags_fast(table, flat, offsets, mode="median")


def test_pool_bags_fast_takes_any_ids_and_output_it_is_given():
    table, flat, offsets = _bags(2, 30, 12)
    expected = pooling.pool_bags(table, flat, offsets)
    np.testing.assert_array_equal(pooling.pool_bags_fast(table, flat.astype(np.int32), offsets), expected)
    strided = np.zeros((len(offsets), 24), dtype=np.float32)[:, ::2]  # not contiguous: pooled, then copied in
    assert pooling.pool_bags_fast(table, flat, offsets, out=strided) is strided
    np.testing.assert_array_equal(strided, expected)
    # A table the kernel does not take (float64) goes the other way, with the same numbers.
    np.testing.assert_allclose(pooling.pool_bags_fast(table.astype(np.float64), flat, offsets), expected, atol=1e-6)


def test_threads_pool_side_by_side_with_the_same_numbers():
    table, flat, offsets = _bags(4, 200, 64)
    expected = pooling.pool_bags(table, flat, offsets)
    results: list[np.ndarray] = [None] * 4  # type: ignore[list-item]

    def work(index: int) -> None:
        results[index] = pooling.pool_bags_fast(table, flat, offsets)

    threads = [threading.Thread(target=work, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        np.testing.assert_array_equal(result, expected)


def test_encode_pools_with_the_kernel_and_leaves_torch_alone(tmp_path: Path, monkeypatch):
    corpus = ["A man is playing a guitar.", "Two dogs run across the green field.", "Stocks fell on Monday."] * 20
    folder = tmp_path / "model"
    PSPEncoder.from_tokenizer(train_tokenizer(corpus, vocab_size=60), hidden_size=16, seed=1).save_pretrained(folder)
    calls = []
    real = torch.nn.functional.embedding_bag
    monkeypatch.setattr(torch.nn.functional, "embedding_bag", lambda *a, **k: calls.append(1) or real(*a, **k))
    before = torch.get_num_threads()
    encoder = PSPEncoder.from_pretrained(folder)
    encoded = [encoder.encode(corpus, batch_size=8, num_threads=num_threads) for num_threads in (1, 2)]
    assert calls == [] and torch.get_num_threads() == before
    flat, offsets = encoder.tokenize(corpus)
    expected = encoder.model.embed(flat, offsets).detach().numpy()  # the model's own torch pooling
    for vectors in encoded:
        np.testing.assert_array_equal(vectors, expected)


def _run(code: str, **environment: str) -> str:
    env = {**os.environ, **environment}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout


def test_a_bulk_job_does_not_import_torch_when_the_kernel_pools():
    # Without the kernel a bulk encode imports torch for embedding_bag (about a second and 230 MB); with it, never.
    code = "import sys; "
    code += "from psp_hf.inference import pooling; pooling.prepare_bulk(10**7); print('torch' in sys.modules)"
    assert _run(code).strip() == "False"


def test_the_kernel_can_be_switched_off_for_comparisons():
    code = "from psp_hf.inference import batch_words, pooling; print(pooling.backend(), batch_words._words_kernel)"
    assert _run(code, PSP_C_KERNELS="0").split() == ["numpy", "None"]
    assert _run(code).startswith("kernel <module 'psp_hf.inference._words'")


def test_the_unknown_rule_in_the_kernel_refuses_offsets_it_cannot_follow():
    flat = np.array([0, 3, 2, 0], dtype=np.int64)
    with pytest.raises(ValueError, match="offsets must start at 0 and rise to at most 4"):
        pooling.apply_unknown_rule(flat, np.array([0, 5], dtype=np.int64), 0, 2)
    with pytest.raises(ValueError, match="offsets must start at 0"):
        pooling.apply_unknown_rule(flat, np.array([1, 2], dtype=np.int64), 0, 2)
    ids, offsets = pooling.apply_unknown_rule(flat, np.array([0, 2, 3, 3], dtype=np.int64), 0, 2)
    assert ids.tolist() == [3, 0, 0, 0] and offsets.tolist() == [0, 1, 2, 3]  # bags [0 3], [2], [], [0]
