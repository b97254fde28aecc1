"""Errors that psp-hf raises for bad input."""

from __future__ import annotations

import contextlib
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
