"""psp-hf: fast paraphrastic sentence embeddings (P-SP) as Hugging Face models."""

from .encoder import PSPEncoder, load
from .errors import PSPInputError
from .modeling import PSPConfig, PSPModel

__version__ = "0.1.0"

__all__ = ["PSPConfig", "PSPEncoder", "PSPInputError", "PSPModel", "__version__", "load"]
