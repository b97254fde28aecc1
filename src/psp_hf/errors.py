"""Errors that psp-hf raises for bad input."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator


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
    normalizer, makes Oniguruma give up) into one `PSPInputError` naming `what`."""
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
