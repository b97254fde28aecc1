"""The `psp_hf` logger: library code reports through it, and the command line shows it on stderr.

Library modules call `logging.getLogger(__name__)` (a child of `psp_hf`) and never print. A Python user sees the
messages once they configure logging, as with any library; `psp` and the thin scripts call `show_on_stderr`, so
a command's progress lines read as before (`psp train: ...`), and `-q` keeps only warnings and errors.
"""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger("psp_hf")


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a record comes (a redirected or captured stream included)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ assigns it; the property always reads sys.stderr
        pass


def show_on_stderr(quiet: bool = False) -> None:
    """Show the `psp_hf` loggers' messages on stderr as plain lines: INFO and up, or WARNING and up when `quiet`.

    Idempotent: a second call (one process running several commands, as tests do) replaces the first handler."""
    for handler in [h for h in logger.handlers if isinstance(h, _CurrentStderr)]:
        logger.removeHandler(handler)
    handler = _CurrentStderr()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING if quiet else logging.INFO)
