"""Running work over consecutive batches of rows, on one thread or several, with a progress bar."""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from .cpu_groups import cpu_groups, keep_to


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
    spread_cpus: bool = True,
) -> None:
    """`finish(start, stop, prepare(start, stop))` for every batch `[start, stop)` of `range(n)`.

    With `num_threads` > 1 and `pipeline`, `num_threads // 2` threads prepare batches (work that holds the GIL for
    much of its time, such as tokenizing with numpy's many small calls) and hand them to the other threads, which
    finish them (long calls that release the GIL, such as pooling in torch). Two threads both tokenizing spend
    much of their time handing the GIL back and forth; one tokenizing beside one pooling keeps those stretches on
    one thread (measured in `bench/encode.py`). With `spread_cpus` each thread keeps to its own group of CPUs
    (`cpu_groups`), so that the scheduler cannot stack them on one core; leave it off where a step runs torch's
    own intra-op threads, which would inherit the group. No thread waits while there is work: a finishing thread with
    nothing handed to it prepares a batch of its own, and a preparing thread that is far ahead finishes one. So
    when finishing is the light step (short vectors, long sentences) the threads end up doing both steps side
    by side. Without `pipeline` every thread runs both steps of its own batches. `finish` must write only its
    batch's rows, which makes the result independent of the thread count and of the order in which batches end.
    """
    spans = [(start, min(start + batch_size, n)) for start in range(0, n, batch_size)]
    progress = None
    if show_progress_bar:
        from tqdm.auto import tqdm

        progress = tqdm(total=n, desc=desc, unit="sentence", unit_scale=True, file=sys.stderr)
    try:
        if num_threads == 1 or len(spans) <= 1:
            for start, stop in spans:
                finish(start, stop, prepare(start, stop))
                if progress is not None:
                    progress.update(stop - start)
        else:
            preparers = num_threads // 2 if pipeline else 0
            groups = cpu_groups(num_threads) if spread_cpus else None
            _share_work(prepare, finish, spans, num_threads, preparers, progress, groups or [None] * num_threads)
    finally:
        if progress is not None:
            progress.close()


class _Shared:
    """The state the threads of `_share_work` share, guarded by `changed`."""

    def __init__(self, spans: list[tuple[int, int]], ahead: int):
        self.changed = threading.Condition()
        self.spans = deque(spans)  # batches nobody has started
        self.ready: deque[tuple[int, int, Any]] = deque()  # prepared, waiting to be finished
        self.preparing = 0  # batches being prepared for `ready`
        self.ahead = ahead
        self.done_rows = 0
        self.running = 0
        self.error: BaseException | None = None

    def next_job(self, prefers_finishing: bool) -> tuple[str, Any] | None:
        """What a thread does next (None: it is done); call with `changed` held."""
        while self.error is None:
            if self.ready and (prefers_finishing or len(self.ready) >= self.ahead or not self.spans):
                return "finish", self.ready.popleft()
            if self.spans:
                if not prefers_finishing:
                    self.preparing += 1
                return "prepare", self.spans.popleft()
            if not self.preparing:
                return None
            self.changed.wait()  # the last batches are being prepared elsewhere
        return None


def _share_work(prepare, finish, spans, num_threads: int, preparers: int, progress, groups: list) -> None:
    """Run every batch on `num_threads` threads, `preparers` of them preferring `prepare` (see run_batches), thread
    k on the CPUs `groups[k]` (None: wherever the scheduler puts it)."""
    shared = _Shared(spans, ahead=2 * num_threads)

    def worker(prefers_finishing: bool, cpus: set[int] | None) -> None:
        try:
            keep_to(cpus)
            while True:
                with shared.changed:
                    job = shared.next_job(prefers_finishing)
                if job is None:
                    return
                kind, work = job
                if kind == "finish":
                    start, stop, prepared = work
                    finish(start, stop, prepared)
                elif prefers_finishing:  # its own batch: no reason to hand it over
                    start, stop = work
                    finish(start, stop, prepare(start, stop))
                else:
                    start, stop = work
                    prepared = prepare(start, stop)
                    with shared.changed:
                        shared.ready.append((start, stop, prepared))
                        shared.preparing -= 1
                        shared.changed.notify_all()
                    continue
                if progress is not None:  # only the caller's progress bar waits for this
                    with shared.changed:
                        shared.done_rows += stop - start
                        shared.changed.notify_all()
        except BaseException as error:  # handed to the caller's thread, which re-raises it
            with shared.changed:
                shared.error = shared.error or error
                shared.changed.notify_all()
        finally:
            with shared.changed:
                shared.running -= 1
                shared.changed.notify_all()

    threads = [
        threading.Thread(target=worker, args=(k >= preparers, groups[k]), name=f"psp-encode-{k}", daemon=True)
        for k in range(num_threads)
    ]
    shared.running = len(threads)
    for thread in threads:
        thread.start()
    reported, error = 0, None
    try:
        if progress is None:
            # Nothing to report meanwhile: waking the caller's thread after every batch cost the workers the GIL.
            for thread in threads:
                thread.join()
            error = shared.error
        while progress is not None:
            with shared.changed:
                while shared.running and shared.done_rows == reported and shared.error is None:
                    shared.changed.wait()
                done, running, error = shared.done_rows, shared.running, shared.error
            if done > reported:
                progress.update(done - reported)
            reported = done
            if error is not None or not running:
                break
    finally:
        with shared.changed:  # on an error or an interrupt: the others stop after their current batch
            shared.error = shared.error or _Stopped()
            shared.changed.notify_all()
        for thread in threads:
            thread.join()
    if error is not None:
        raise error


class _Stopped(Exception):
    """Set as the shared error when the caller stops waiting, so that the threads stop taking batches."""
