"""The output rule: a command's result on stdout (`write_result`), every status line through the `psp_hf` logger.

Library modules call `logging.getLogger(__name__)` (a child of `psp_hf`) and never print (ruff's T20 checks it; the
named exceptions are in pyproject.toml). A Python user sees the messages once they configure logging, as with any
library; `psp` and the thin scripts call `show_on_stderr`, so a command's status lines read `psp train: ...` on
stderr and a script can pipe its stdout. `-q` keeps only warnings and errors and `-v` adds debug lines, on every
command; neither changes the result.
"""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger("psp_hf")

# What -q and -v mean, on every command (`psp_hf.cli.flags.add_verbosity`; `psp train`'s `quiet` setting too).
QUIET_HELP = "only warnings and errors on stderr: no status lines or progress bars (the result is unchanged)"
VERBOSE_HELP = "debug lines on stderr too"


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


def show_on_stderr(quiet: bool = False, verbose: bool = False) -> None:
    """Show the `psp_hf` loggers' messages on stderr as plain lines: INFO and up, WARNING and up when `quiet`,
    DEBUG and up when `verbose`.

    Idempotent: a second call (one process running several commands, as tests do) replaces the first handler."""
    for handler in [h for h in logger.handlers if isinstance(h, _CurrentStderr)]:
        logger.removeHandler(handler)
    handler = _CurrentStderr()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO)


def write_result(text: str) -> None:
    """Write a command's result (a JSON report, a table, a URL) on stdout, whatever `-q` says: the one place the
    library prints, so that the result of `psp info MODEL | jq ...` is all a pipe receives."""
    print(text, flush=True)
