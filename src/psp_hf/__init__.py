"""psp-hf: fast paraphrastic sentence embeddings (P-SP) as Hugging Face models."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import PSPInputError

__version__ = "0.1.0"

# Loaded on first use: `load`/`PSPEncoder` need only numpy, safetensors and tokenizers; the model classes need
# torch and transformers, which take seconds to import. So `import psp_hf` and `psp --help` start fast.
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


__all__ = [
    "PSPConfig",
    "PSPEncoder",
    "PSPInputError",
    "PSPModel",
    "__version__",
    "load",
]
