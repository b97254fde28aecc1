"""Encode's worker threads on disjoint groups of CPUs, so that the scheduler cannot stack them on one core.

Why: encode's threads hand the GIL to each other several times a batch. Each hand-off wakes the waiting thread,
and Linux places a woken thread near the thread that woke it. On the 2-core KVM machine these numbers come from,
both workers then often shared one core while the other sat idle: a two-thread encode right after the caller's
thread had been busy (a one-thread encode, or any work of its own) ran at 1.1-1.5x one thread instead of 1.8-2x,
and which CPU each batch ran on showed both threads on the same one for most of the call
(`bench/encode_threads.py`, `bench/encode_processes.py`, results/encode_speed.md). With each worker held to its
own CPU group it ran at 1.8-2.1x whatever came before.

How: worker k of n may run only on every n-th CPU of the ones the calling thread may use (its affinity mask, which
the workers would inherit anyway), starting at the k-th, so the groups are disjoint and a group of several CPUs
still leaves the scheduler a choice. Only the worker threads, which encode starts and which end with the call, are
restricted; the caller's thread and the process's mask are never touched. Nothing is done where the caller may use
fewer CPUs than there are workers, where the platform has no CPU affinity (macOS, Windows), or when
`PSP_SPREAD_THREADS=0` is in the environment.
"""

from __future__ import annotations

import logging
import os
import threading

logger = logging.getLogger(__name__)

ENVIRONMENT_SWITCH = "PSP_SPREAD_THREADS"


def cpu_groups(num_threads: int) -> list[set[int]] | None:
    """One disjoint set of CPUs per worker thread, taken from the calling thread's affinity mask, or None when the
    workers should run where the scheduler puts them."""
    if num_threads < 2 or os.environ.get(ENVIRONMENT_SWITCH, "1") == "0":
        return None
    if not hasattr(os, "sched_getaffinity") or not hasattr(os, "sched_setaffinity"):
        return None
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except OSError:
        return None
    if len(allowed) < num_threads:
        return None
    return [set(allowed[k::num_threads]) for k in range(num_threads)]


def keep_to(cpus: set[int] | None) -> None:
    """Restrict the calling thread (a worker that encode started) to `cpus`; no-op for None. Never raises: a
    container may forbid the change, and encode then runs as the scheduler places it."""
    if cpus is None:
        return
    try:
        os.sched_setaffinity(threading.get_native_id(), cpus)
    except (OSError, ValueError) as error:
        logger.debug("could not keep an encode thread to CPUs %s: %s", sorted(cpus), error)
