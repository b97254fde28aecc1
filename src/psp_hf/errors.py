"""Errors that psp-hf raises for bad input."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import IO


class PSPInputError(ValueError):
    """Bad user input (a file, a line or an argument); the message names where."""


def is_native_panic(error: BaseException) -> bool:
    """True for a panic inside a Rust extension (tokenizers, safetensors): pyo3's `PanicException`.

    It derives from BaseException, not Exception, so `except Exception` lets it through; pyo3 does not export the
    class under an importable name, hence the check by name.
    """
    return type(error).__name__ == "PanicException"


@contextlib.contextmanager
def native_panics(what: str) -> Iterator[None]:
    """Turn a panic of the Rust tokenizer (a crafted `tokenizer.json`, e.g. a catastrophic regex in a `Replace`
    normalizer, makes Oniguruma give up) into one `PSPInputError` naming `what`; Rust's own report of the panic
    (written straight to file descriptor 2, with a backtrace under RUST_BACKTRACE) is kept off the terminal."""
    _STDERR.hold()
    try:
        yield
    except BaseException as error:
        if not is_native_panic(error):
            raise
        reason = (str(error).splitlines() or [""])[0][:200]
        raise PSPInputError(
            f"{what}: the tokenizer failed ({reason}); its tokenizer.json is corrupt or crafted (a pattern that "
            "never finishes, for one)"
        ) from None
    finally:
        _STDERR.release()


# Rust's panic hook: (a blank line,) "thread 'NAME' (ID) panicked at FILE:LINE:COLUMN:", the message, then maybe a
# backtrace and "note: ..." lines.
_PANIC_REPORT = re.compile(
    rb"\n?thread '[^'\n]*'(?: \(\d+\))? panicked at [^\n]*\n[^\n]*\n(?:stack backtrace:\n(?:[ \t][^\n]*\n)*)?"
    rb"(?:note: [^\n]*\n)*"
)


class _HeldStderr:
    """File descriptor 2 sent to a temporary file while any thread runs tokenizer code that may panic; what lands
    there is passed on to the real stderr as each call ends, less Rust's panic reports. Process-wide and counted:
    descriptor 2 is one for all threads."""

    def __init__(self) -> None:
        # Off in the library (a few system calls per tokenizer call, and descriptor 2 is the application's); the
        # `psp` command line turns it on.
        self.enabled = False
        self.lock = threading.Lock()
        self.depth = 0
        self.saved = -1  # the real stderr while held (-1: not held)
        self.capture: IO[bytes] | None = None
        self.passed = 0  # bytes of the capture already passed on

    def hold(self) -> None:
        if not self.enabled:
            return
        with self.lock:
            self.depth += 1
            if self.depth > 1:
                return
            try:
                if self.capture is None:
                    self.capture = tempfile.TemporaryFile()  # noqa: SIM115 - kept for the process
                sys.stderr.flush()
                self.saved = os.dup(2)
                os.dup2(self.capture.fileno(), 2)
            except (OSError, ValueError):  # no descriptor 2 (a daemon), or no temporary folder: leave it be
                self.saved = -1

    def release(self) -> None:
        if not self.enabled:
            return
        with self.lock:
            self.depth -= 1
            if self.saved < 0:
                return
            if self.depth == 0:
                with contextlib.suppress(OSError, ValueError):
                    sys.stderr.flush()
            self._pass_on()
            if self.depth == 0:
                os.dup2(self.saved, 2)
                os.close(self.saved)
                self.saved = -1

    def _pass_on(self) -> None:
        """Copy what was written to the capture since the last call to the real stderr, panic reports removed."""
        assert self.capture is not None
        size = os.fstat(self.capture.fileno()).st_size
        if size == self.passed:
            return
        written = os.pread(self.capture.fileno(), size - self.passed, self.passed)
        self.passed = size
        if self.depth == 0:  # start the file afresh: it would otherwise grow with every message ever passed on
            self.capture.truncate(0)
            self.capture.seek(0)  # the offset is shared with descriptor 2's next hold (dup2 shares it)
            self.passed = 0
        kept = _PANIC_REPORT.sub(b"", written)
        with contextlib.suppress(OSError):
            while kept:
                kept = kept[os.write(self.saved, kept) :]


_STDERR = _HeldStderr()


def keep_panic_reports_off_stderr() -> None:
    """From now on, Rust's reports of tokenizer panics stay off stderr (`native_panics` gives the one error line)."""
    _STDERR.enabled = True


# How safetensors' Rust writer words an I/O failure: "... I/O error: No space left on device (os error 28) at path
# "..."" (0.5 and later), or "IoError(Os { code: 28, kind: StorageFull, ... })" (earlier versions).
_NATIVE_OS_ERROR = re.compile(r"\(os error (\d+)\)|Os \{ code: (\d+)")
_NATIVE_PATH = re.compile(r'at path "([^"]*)"')


def os_error_of(error: BaseException) -> OSError | None:
    """The operating-system error behind a failed write: `error` itself when it is an `OSError`, the one a
    `SafetensorError` reports in its text (a full disk while writing weights), else None.

    safetensors raises its own `SafetensorError` (not an `OSError`) for a failed write, so handlers of write errors
    (`except OSError`) would let a full disk through as a traceback; this gives them the errno to word it."""
    if isinstance(error, OSError):
        return error
    if type(error).__name__ != "SafetensorError":
        return None
    text = str(error)
    found = _NATIVE_OS_ERROR.search(text)
    if found is None:
        return None
    code = int(found.group(1) or found.group(2))
    path = _NATIVE_PATH.search(text)
    return OSError(code, os.strerror(code), path.group(1) if path else None)
