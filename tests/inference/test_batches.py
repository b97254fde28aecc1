"""run_batches: every batch prepared and finished once, on the threads each mode promises, errors surfaced."""

import threading
import time

import numpy as np
import pytest

from psp_hf.inference.batches import run_batches


def _square_rows(n: int, batch_size: int, num_threads: int, pipeline: bool):
    """Run a toy two-step job; return its rows, the thread names each step ran on and the batches prepared."""
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


def _threads_per_step(pipeline: bool, slow: str) -> dict[str, set[str]]:
    """Which threads ran each step of 24 batches on 2 threads when `slow` ("prepare" or "finish") takes 20 ms."""
    seen = {"prepare": set(), "finish": set()}
    lock = threading.Lock()

    def step(name: str):
        with lock:
            seen[name].add(threading.current_thread().name)
        if name == slow:
            time.sleep(0.02)

    run_batches(lambda a, b: step("prepare"), lambda a, b, _: step("finish"), 240, 10, 2, pipeline=pipeline)
    return seen


def test_the_pipeline_shares_the_heavy_step():
    # Slow preparing: the finishing thread, with nothing handed to it, prepares batches of its own.
    assert len(_threads_per_step(True, slow="prepare")["prepare"]) == 2
    # Slow finishing: the preparing thread, once far enough ahead, finishes batches too.
    assert len(_threads_per_step(True, slow="finish")["finish"]) == 2


def test_side_by_side_runs_both_steps_on_every_thread():
    seen = _threads_per_step(False, slow="prepare")
    assert seen["prepare"] == seen["finish"] and len(seen["prepare"]) == 2


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
