"""Running one function over consecutive batches of rows, on one thread or several, with a progress bar."""

from __future__ import annotations

import sys
from collections.abc import Callable


def check_num_threads(num_threads: int) -> int:
    """`num_threads` if it is an integer >= 1; a ValueError naming it otherwise."""
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be an integer >= 1, got {num_threads!r}")
    return num_threads


def run_batches(
    encode_batch: Callable[[int, int], None],
    n: int,
    batch_size: int,
    num_threads: int = 1,
    show_progress_bar: bool = False,
    desc: str = "Encoding",
) -> None:
    """Call `encode_batch(start, stop)` for every batch of `range(n)`.

    With `num_threads` > 1 the batches run on a thread pool; the work inside (the Rust tokenizer, numpy and
    torch kernels) releases the GIL, so threads overlap. Each call must write only its own rows, which makes
    the result independent of the thread count and of the order in which batches finish.
    """
    starts = range(0, n, batch_size)

    def one(start: int) -> int:
        stop = min(start + batch_size, n)
        encode_batch(start, stop)
        return stop - start

    progress = None
    if show_progress_bar:
        from tqdm.auto import tqdm

        progress = tqdm(total=n, desc=desc, unit="sentence", unit_scale=True, file=sys.stderr)
    pool = None
    try:
        if num_threads == 1 or len(starts) <= 1:
            done = map(one, starts)
        else:
            from concurrent.futures import ThreadPoolExecutor

            pool = ThreadPoolExecutor(min(num_threads, len(starts)), thread_name_prefix="psp-encode")
            # At most a few batches ahead per thread, so a long input is not all scheduled at once.
            done = _bounded_map(pool, one, starts, 2 * num_threads)
        for count in done:
            if progress is not None:
                progress.update(count)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        if progress is not None:
            progress.close()


def _bounded_map(pool, function, items, ahead: int):
    """`pool.map` that keeps at most `ahead` calls in flight, yielding results in order."""
    from collections import deque

    pending: deque = deque()
    for item in items:
        pending.append(pool.submit(function, item))
        if len(pending) >= ahead:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()
