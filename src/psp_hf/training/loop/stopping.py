"""How a training run stops on SIGTERM: an exception in the main thread, so `finally` blocks clean up."""

from __future__ import annotations

import sys
import threading


class TrainingStopped(SystemExit):
    """Raised in the main thread by SIGTERM, so that `finally` blocks remove the run's temporaries."""


def stop_on_sigterm(signum, frame, checkpoints=None) -> None:
    """The SIGTERM handler of a run: say how to go on (with or without --resume), then stop."""
    # --resume needs a complete checkpoint: before the first one, the advice is to start again.
    if checkpoints is None or checkpoints.exists():
        advice = "continue with --resume"
    else:
        advice = "no checkpoint was written yet; run the same command again (without --resume) to start over"
    # A signal handler writes directly: logging takes locks that the interrupted code may hold.
    print(f"psp train: stopped by SIGTERM; {advice}", file=sys.stderr, flush=True)
    raise TrainingStopped(128 + signum)


def in_main_thread() -> bool:
    """Whether this is the main thread (the only one that may install signal handlers)."""
    return threading.current_thread() is threading.main_thread()
