"""Running work over consecutive batches of rows, on one thread or several, with a progress bar."""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


def check_num_threads(num_threads: int) -> int:
    """`num_threads` if it is an integer >= 1; a ValueError naming it otherwise."""
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be an integer >= 1, got {num_threads!r}")
    return num_threads


def run_batches(
    prepare: Callable[[int, int], Any],
    finish: Callable[[int, int, Any], None],
    n: int,
    batch_size: int,
    num_threads: int = 1,
    show_progress_bar: bool = False,
    desc: str = "Encoding",
    pipeline: bool = True,
) -> None:
    """`finish(start, stop, prepare(start, stop))` for every batch `[start, stop)` of `range(n)`.

    With `num_threads` > 1 and `pipeline`, the two steps form a pipeline: `prepare` (work that holds the GIL for
    much of its time, such as tokenizing with numpy's many small calls) runs on `num_threads // 2` threads and
    `finish` (long calls that release it, such as pooling in torch) on the others, each batch passed from one to
    the other. Two threads running the same mixed work both contend for the GIL in its held stretches; one
    thread per step keeps those stretches on one thread while the other runs free (measured in
    `bench/encode.py`). Without `pipeline` (both steps hold the GIL alike) each thread runs both steps of its
    batches. `finish` must write only its batch's rows, which makes the result independent of the thread count
    and of the order in which batches end.
    """
    starts = range(0, n, batch_size)
    progress = None
    if show_progress_bar:
        from tqdm.auto import tqdm

        progress = tqdm(total=n, desc=desc, unit="sentence", unit_scale=True, file=sys.stderr)
    try:
        if num_threads == 1 or len(starts) <= 1:
            for start in starts:
                stop = min(start + batch_size, n)
                finish(start, stop, prepare(start, stop))
                if progress is not None:
                    progress.update(stop - start)
        else:
            run = _pipeline if pipeline else _side_by_side
            for count in run(prepare, finish, starts, batch_size, n, num_threads):
                if progress is not None:
                    progress.update(count)
    finally:
        if progress is not None:
            progress.close()


def _pipeline(prepare, finish, starts: range, batch_size: int, n: int, num_threads: int):
    """Each batch's size as it is finished, in order; `prepare` and `finish` on separate threads."""
    preparers = ThreadPoolExecutor(max(1, num_threads // 2), thread_name_prefix="psp-prepare")
    finishers = ThreadPoolExecutor(num_threads - max(1, num_threads // 2), thread_name_prefix="psp-finish")

    def prepare_then_queue(start: int, stop: int) -> Future:
        return finishers.submit(finish, start, stop, prepare(start, stop))

    try:
        for count, queued in _in_order(preparers, prepare_then_queue, starts, batch_size, n, 2 * num_threads):
            queued.result()
            yield count
    finally:
        preparers.shutdown(cancel_futures=True)
        finishers.shutdown(cancel_futures=True)


def _side_by_side(prepare, finish, starts: range, batch_size: int, n: int, num_threads: int):
    """Each batch's size as it is finished, in order; both steps of a batch on one thread."""
    workers = ThreadPoolExecutor(num_threads, thread_name_prefix="psp-encode")

    def both(start: int, stop: int) -> None:
        finish(start, stop, prepare(start, stop))

    try:
        for count, _ in _in_order(workers, both, starts, batch_size, n, 2 * num_threads):
            yield count
    finally:
        workers.shutdown(cancel_futures=True)


def _in_order(pool: ThreadPoolExecutor, function, starts: range, batch_size: int, n: int, ahead: int):
    """`(batch size, function(start, stop))` for each batch, in order, with at most `ahead` calls in flight, so a
    long input is not all scheduled (or held in memory) at once."""
    pending: deque[tuple[int, Future]] = deque()
    for start in starts:
        stop = min(start + batch_size, n)
        pending.append((stop - start, pool.submit(function, start, stop)))
        if len(pending) >= ahead:
            count, future = pending.popleft()
            yield count, future.result()
    while pending:
        count, future = pending.popleft()
        yield count, future.result()
