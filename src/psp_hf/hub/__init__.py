"""Publishing P-SP models: Hub uploads, model cards, the sentence-transformers layout, and checkpoint conversion."""

from ..persistence.sentence_transformers_layout import write_sentence_transformers_files
from .card import render_model_card, write_model_card
from .push import PSPPushError, push_encoder, push_folder

__all__ = [
    "PSPPushError",
    "push_encoder",
    "push_folder",
    "render_model_card",
    "write_model_card",
    "write_sentence_transformers_files",
]
