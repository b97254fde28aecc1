"""Loading other libraries' static models as a `PSPEncoder`: the public face of `static_models`' readers."""

from __future__ import annotations

import os

from ..encoder import PSPEncoder
from .model_folder import resolve_model_path
from .static_models import StaticTable, detect_format, read_model2vec, read_static_embedding


def _encoder(parts: StaticTable) -> PSPEncoder:
    return PSPEncoder.from_parts(parts.table, parts.backend, parts.settings, folder=parts.folder)


def load_static_model(id_or_path: str | os.PathLike) -> PSPEncoder:
    """A `PSPEncoder` from a psp, model2vec or sentence-transformers static model folder (or Hub id)."""
    folder = resolve_model_path(id_or_path)
    kind = detect_format(folder)
    if kind == "psp":
        return PSPEncoder.from_pretrained(folder)
    return _encoder(read_model2vec(folder) if kind == "model2vec" else read_static_embedding(folder))


def from_model2vec(path: str | os.PathLike) -> PSPEncoder:
    """A `PSPEncoder` from a model2vec folder or Hub id (weights and mapping folded into the table)."""
    return _encoder(read_model2vec(resolve_model_path(path)))
