"""`--device` values checked before any work: a misspelt device or CUDA on a machine without it is one error line,
not a traceback from deep inside torch after minutes of setup."""

from __future__ import annotations

from .errors import PSPInputError


def check_device(name: str | None, flag: str = "--device") -> str | None:
    """`name` unchanged when torch can use it (None: the command's default); PSPInputError naming `flag` otherwise."""
    if name is None:
        return None
    import torch

    try:
        device = torch.device(name)
    except (RuntimeError, ValueError, TypeError):
        raise PSPInputError(f"{flag} {name!r}: not a device torch knows; use cpu, cuda or cuda:N") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise PSPInputError(f"{flag} {name}: CUDA is not available on this machine; use {flag} cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise PSPInputError(f"{flag} {name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise PSPInputError(f"{flag} {name}: Apple's MPS is not available on this machine; use {flag} cpu")
    elif device.type not in ("cpu", "cuda", "mps"):
        raise PSPInputError(f"{flag} {name}: psp runs on cpu, cuda or mps")
    return name
