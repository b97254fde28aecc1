"""run_batches: every batch prepared and finished once, on the threads each mode promises, errors surfaced."""

import threading

import numpy as np
import pytest

from psp_hf.batches import run_batches


def _square_rows(n: int, batch_size: int, num_threads: int, pipeline: bool):
    """Run a toy two-step job; return its rows and the thread names each step ran on."""
    out = np.full(n, -1, dtype=np.int64)
    seen = {"prepare": set(), "finish": set()}
    calls = []
    lock = threading.Lock()

    def prepare(start: int, stop: int) -> np.ndarray:
        with lock:
            seen["prepare"].add(threading.current_thread().name)
            calls.append((start, stop))
        return np.arange(start, stop) ** 2

    def finish(start: int, stop: int, squares: np.ndarray) -> None:
        with lock:
            seen["finish"].add(threading.current_thread().name)
        out[start:stop] = squares

    run_batches(prepare, finish, n, batch_size, num_threads, pipeline=pipeline)
    return out, seen, sorted(calls)


@pytest.mark.parametrize("num_threads", [1, 2, 3])
@pytest.mark.parametrize("pipeline", [True, False])
def test_every_row_once_whatever_the_threads(num_threads, pipeline):
    out, _, calls = _square_rows(103, 10, num_threads, pipeline)
    np.testing.assert_array_equal(out, np.arange(103) ** 2)
    assert calls == [(start, min(start + 10, 103)) for start in range(0, 103, 10)]


def test_pipeline_puts_the_steps_on_separate_threads():
    _, seen, _ = _square_rows(200, 10, 2, pipeline=True)
    assert seen["prepare"] and seen["finish"]
    assert all(name.startswith("psp-prepare") for name in seen["prepare"])
    assert all(name.startswith("psp-finish") for name in seen["finish"])
    _, seen, _ = _square_rows(200, 10, 2, pipeline=False)
    assert seen["prepare"] == seen["finish"] and all(name.startswith("psp-encode") for name in seen["prepare"])


@pytest.mark.parametrize("failing", ["prepare", "finish"])
@pytest.mark.parametrize("pipeline", [True, False])
def test_an_error_in_either_step_reaches_the_caller(failing, pipeline):
    def prepare(start, stop):
        if failing == "prepare" and start == 50:
            raise ValueError("bad batch at 50")
        return start

    def finish(start, stop, prepared):
        if failing == "finish" and start == 50:
            raise ValueError("bad batch at 50")

    with pytest.raises(ValueError, match="bad batch at 50"):
        run_batches(prepare, finish, 200, 10, 2, pipeline=pipeline)


def test_empty_input_calls_nothing():
    run_batches(lambda *a: pytest.fail("prepare called"), lambda *a: pytest.fail("finish called"), 0, 10, 2)
