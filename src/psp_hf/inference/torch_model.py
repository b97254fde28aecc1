"""`PSPEncoder` for the encoders that are not a plain mean or max of table rows (LSTMs, GRAN, projection, units
formed from characters, combinations): they embed through the transformers model (`PSPModel.embed`) instead of
the numpy path. Loading such a folder needs torch and transformers.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import PSPInputError


def folder_needs_model(folder: Path) -> bool:
    """True when `folder/config.json` names an encoder that the numpy path cannot compute."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return (
        config.get("encoder_type", "psp") not in ("psp", "mean", "max")
        or config.get("units", "tokens") != "tokens"
        or config.get("combination") is not None
    )


def load_model_encoder(cls, folder: Path):
    """A `PSPEncoder` over `PSPModel.from_pretrained(folder)` (safetensors only) and the folder's tokenizer."""
    from transformers import PreTrainedTokenizerFast

    from ..persistence.model_folder import modeling, read_tokenizer

    read_tokenizer(folder)  # one clear error for a missing or corrupt tokenizer.json
    if not (folder / "model.safetensors").is_file():
        raise PSPInputError(f"{folder}: no model.safetensors")
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a progress bar for a handful of tensors is noise
    try:
        model = modeling().PSPModel.from_pretrained(folder, use_safetensors=True)
    except (OSError, ValueError, RuntimeError) as error:
        raise PSPInputError(f"{folder}: cannot load the model ({str(error).splitlines()[0][:200]})") from None
    finally:
        if bar:
            hf_logging.enable_progress_bar()
    return cls(model, PreTrainedTokenizerFast.from_pretrained(folder), folder=folder)


def embed_with_model(model, flat_ids: np.ndarray, offsets: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Sentence embeddings of `(flat_ids, offsets)` bags computed by the transformers model, as float32 numpy."""
    import torch

    with torch.inference_mode():
        embeddings = model.embed(torch.from_numpy(np.asarray(flat_ids)), torch.from_numpy(np.asarray(offsets)))
    result = embeddings.float().numpy()
    if out is None:
        return result
    out[:] = result
    return out


def check_model_save(torch_only: bool, quantize_to: str | None, dimensionality: int | None) -> None:
    """Smaller tables (PCA, float16, int8) are for the averaging encoders, whose output is the table's space."""
    if torch_only and (quantize_to not in (None, "float32") or dimensionality is not None):
        raise PSPInputError(
            "quantize_to / dimensionality apply to averaging encoders only (psp, mean, max over the tokenizer's ids)"
        )


__all__ = ["check_model_save", "embed_with_model", "folder_needs_model", "load_model_encoder"]


def new_model_encoder(cls, tokenizer, hidden_size: int, seed: int, **config_kwargs):
    """`PSPEncoder.from_tokenizer`: a new transformers `PSPModel` with a random table sized for `tokenizer`."""
    import json

    from ..persistence.model_folder import modeling, word_boundary_id
    from .encode_inputs import private_backend

    PSPConfig, PSPModel = modeling().PSPConfig, modeling().PSPModel
    import torch

    backend = private_backend(tokenizer.backend_tokenizer)
    if config_kwargs.get("word_boundary_token_id") is None:
        boundary = word_boundary_id(json.loads(backend.to_str()), backend)
        config_kwargs["word_boundary_token_id"] = -1 if boundary is None else boundary
    config = PSPConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        pad_token_id=tokenizer.pad_token_id,
        unk_token_id=tokenizer.unk_token_id,
        **config_kwargs,
    )
    torch.manual_seed(seed)
    return cls(PSPModel(config), tokenizer)


def model_over_table(settings, table: np.ndarray, piece_weights: np.ndarray | None):
    """The transformers `PSPModel` of an averaging encoder's `settings` (`model_folder.PSPSettings`) whose tensors
    are `table` and `piece_weights` themselves (no copy: built on the meta device, then assigned)."""
    import torch

    from ..persistence.model_folder import modeling

    PSPConfig, PSPModel = modeling().PSPConfig, modeling().PSPModel
    with torch.device("meta"):
        model = PSPModel(PSPConfig(**settings.__dict__))
    state = {"embeddings.weight": torch.from_numpy(table)}
    if piece_weights is not None:
        state["piece_weights"] = torch.from_numpy(piece_weights)
    model.load_state_dict(state, assign=True)
    return model.eval()
