"""Writing a psp model folder (`PSPEncoder.save_pretrained`): config with auto_map, safetensors weights, tokenizer,
the Hub remote code and, for full-precision averaging models, the sentence-transformers layout."""

from __future__ import annotations

import json
from pathlib import Path

from ..io.writing import follow_umask
from .model_folder import modeling


def portable_tokenizer_class(directory: Path) -> None:
    # transformers 5 writes "TokenizersBackend", which 4.x cannot load; the fast class loads in both.
    path = directory / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    if config.get("tokenizer_class") == "TokenizersBackend":
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
        path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_model_folder(encoder, directory: Path, quantize_to: str | None = None) -> Path:
    """Write `encoder` (a `PSPEncoder`) into `directory`; `quantize_to` "float16"/"int8" stores a smaller table
    (checked by the caller) and leaves out the sentence-transformers layout."""
    from .sentence_transformers_layout import write_sentence_transformers_files
    from .smaller_tables import write_smaller_weights

    PSPConfig, PSPModel = modeling().PSPConfig, modeling().PSPModel
    directory.mkdir(parents=True, exist_ok=True)
    PSPConfig.register_for_auto_class()
    PSPModel.register_for_auto_class("AutoModel")
    encoder.model.config.word_boundary_token_id = encoder.settings.word_boundary_token_id
    encoder.model.save_pretrained(directory)
    encoder.tokenizer.save_pretrained(directory)
    portable_tokenizer_class(directory)
    if quantize_to in (None, "float32"):
        if encoder.averages_pieces:  # LSTM, GRAN, ...: no sentence-transformers layout (see encoder_types.py)
            write_sentence_transformers_files(directory, encoder)
    else:
        write_smaller_weights(directory, *encoder.weights(), quantize_to)
    follow_umask(directory.glob("**/*.safetensors"))  # all written just now, 0600 by safetensors' writer
    return directory
