"""psp-hf: fast paraphrastic sentence embeddings (P-SP) as Hugging Face models."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import PSPInputError

__version__ = "0.1.0"

# torch and transformers take seconds to import; load them only when a model class is first used, so that
# `psp --help` and the data tools start fast.
_LAZY = {
    "PSPEncoder": "psp_hf.encoder",
    "load": "psp_hf.encoder",
    "PSPConfig": "psp_hf.modeling",
    "PSPModel": "psp_hf.modeling",
}

if TYPE_CHECKING:
    from .encoder import PSPEncoder, load
    from .modeling import PSPConfig, PSPModel


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'psp_hf' has no attribute {name!r}")


__all__ = ["PSPConfig", "PSPEncoder", "PSPInputError", "PSPModel", "__version__", "load"]
