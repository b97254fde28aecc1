"""Torch calls of psp's pooling on the calling thread alone, whatever `torch.set_num_threads` the process chose.

Why: torch's `embedding_bag` splits even a 1024-sentence batch over torch's intra-op (OpenMP) threads, two on a
two-core machine unless the process asked for one. The split is worth little (pooling a batch takes about a
millisecond), but each call then wakes the other OpenMP thread, waits at a barrier until the scheduler gives it a
core, and leaves it spinning for a while afterwards on the core that the tokenizing thread needs. On a machine
that is not idle (or with encode's own threads, each of which brings a team of OpenMP threads) that made encode
5-10x slower in any process that had imported torch with its default thread count (bench/encode_processes.py).

How, without touching the caller's settings: the OpenMP thread count is a per-thread value (the "nthreads-var"
ICV) in the OpenMP runtimes torch ships (GNU libgomp, LLVM libomp, Intel libiomp). `torch.set_num_threads`
changes the calling thread's value and a process-wide default for threads torch has not seen yet; what this
module changes is only the calling thread's value, for the duration of one pooling call, and puts it back before
returning. So `torch.get_num_threads()` reads the same before and after `encode` in every thread, and threads
started later still get the caller's setting. The runtime is found once per process, among the libraries
already loaded (it is never loaded here), and checked against `torch.get_num_threads()` before it is trusted.
"""

from __future__ import annotations

import ctypes
import glob
import logging
import os
import threading
from typing import Any

logger = logging.getLogger(__name__)

# OpenMP runtimes torch builds link against (by soname); torch/lib is searched first.
_RUNTIME_NAMES = ("libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so", "libomp.dylib", "libiomp5.dylib")
_UNSET: Any = object()
_runtime: Any = _UNSET  # the ctypes library, None when no usable runtime, _UNSET before the first look-up
_lock = threading.Lock()


def _candidates(torch: Any) -> list[str]:
    here = os.path.join(os.path.dirname(torch.__file__), "lib")
    bundled = [path for path in sorted(glob.glob(os.path.join(here, "*"))) if "omp" in os.path.basename(path)]
    return bundled + list(_RUNTIME_NAMES)


def _open_loaded(name: str) -> Any:
    """The library `name` if the process has loaded it already, else None (never loads a new one)."""
    no_load = getattr(os, "RTLD_NOLOAD", None)
    if no_load is None and not os.path.isabs(name):  # Windows: only torch's own files, which torch has loaded
        return None
    try:
        library = ctypes.CDLL(name, mode=(no_load or 0) | getattr(os, "RTLD_LOCAL", 0))
        setter, getter = library.omp_set_num_threads, library.omp_get_max_threads
    except (OSError, AttributeError):
        return None
    setter.argtypes, setter.restype, getter.restype = [ctypes.c_int], None, ctypes.c_int
    return library


def _controls_torch(torch: Any, library: Any) -> bool:
    """Whether `library`'s per-thread count is what torch reads: checked on a throwaway thread."""
    answers: list[bool] = []

    def probe() -> None:
        torch.get_num_threads()  # torch's per-thread set-up first: it would overwrite a value set before it
        checks = []
        for count in (1, 3):
            library.omp_set_num_threads(count)
            checks.append(torch.get_num_threads() == count)
        answers.append(all(checks))

    thread = threading.Thread(target=probe, name="psp-openmp-probe", daemon=True)
    thread.start()
    thread.join()
    return bool(answers and answers[0])


def _find_runtime(torch: Any) -> Any:
    if "OpenMP" not in torch.__config__.parallel_info():
        return None
    for name in _candidates(torch):
        library = _open_loaded(name)
        if library is not None and _controls_torch(torch, library):
            return library
    return None


def runtime(torch: Any) -> Any:
    """The OpenMP runtime behind torch's intra-op threads (a ctypes library), or None where there is none to use."""
    global _runtime
    if _runtime is _UNSET:
        with _lock:
            if _runtime is _UNSET:
                try:
                    _runtime = _find_runtime(torch)
                except Exception as error:  # an odd build: fall back to numpy pooling, never fail encode
                    logger.debug("no OpenMP runtime for torch's threads: %s", error)
                    _runtime = None
    return _runtime


class OneThread:
    """`with OneThread(torch, library):` torch ops in the block run on the calling thread only.

    `library` is what `runtime(torch)` returned (not None). Restores the thread's own count on exit.
    """

    __slots__ = ("_library", "_saved", "_torch")

    def __init__(self, torch: Any, library: Any):
        self._torch, self._library = torch, library

    def __enter__(self) -> None:
        # torch.get_num_threads() also runs torch's per-thread set-up on a new thread, which would otherwise
        # reset the count at the first torch op inside the block.
        self._saved = self._torch.get_num_threads()
        if self._saved != 1:
            self._library.omp_set_num_threads(1)

    def __exit__(self, *exc_info: object) -> None:
        if self._saved != 1:
            self._library.omp_set_num_threads(self._saved)
