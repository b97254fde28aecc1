"""Publishing P-SP models: Hub uploads, model cards, the sentence-transformers layout, and checkpoint conversion."""

from .card import render_model_card, write_model_card
from .push import PSPPushError, push_encoder, push_folder
from .sentence_transformers import write_sentence_transformers_files

__all__ = [
    "PSPPushError",
    "push_encoder",
    "push_folder",
    "render_model_card",
    "write_model_card",
    "write_sentence_transformers_files",
]
