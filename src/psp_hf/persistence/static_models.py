"""Other static-embedding formats in and out of psp: model2vec folders and sentence-transformers `StaticEmbedding`.

In: `read_other_format(folder)` reads a model2vec folder (`config.json` + `model.safetensors` with an `embeddings`
tensor, optional `weights`/`mapping`) or a sentence-transformers model whose first module is `StaticEmbedding` into
a `StaticTable` (table, tokenizer, settings); `PSPEncoder.from_pretrained` (so `psp_hf.load`) builds an encoder from
it. Nothing here imports the encoder. model2vec's per-piece weights and vocabulary mapping are folded into the table
(row i = embeddings[mapping[i]] x weights[i]), which is what model2vec averages.

Out: `save_model2vec(encoder, directory)` writes a folder that `model2vec.StaticModel.from_pretrained` and
sentence-transformers (its `modules.json` names `StaticEmbedding`) load. Embeddings are equal to psp's, with these
differences, all from model2vec's fixed rules:

- unknown pieces: model2vec always drops them, and a sentence with nothing left is all zeros; psp gives such a
  sentence (empty, or only out-of-vocabulary characters) the unknown piece's embedding.
- the bare word-boundary piece before an unsegmentable word is kept by model2vec like any piece.
- piece weights (`--piece-weights sif`): model2vec divides the weighted sum by the number of pieces, psp by the sum
  of the weights, so the export folds the weights into the table and the two agree only up to each sentence's
  length (cosines differ slightly).
- int8: model2vec keeps one scale for the whole table and averages the raw integers, so vectors are psp's divided
  by that scale (cosines equal up to rounding); psp's own int8 folders keep a scale per row.

Lowercasing and the sentencepiece normalisation are in `tokenizer.json`, so both tokenise alike; the export turns
off model2vec's 512-piece truncation (`max_length: null`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import PSPInputError
from ..io.reading import read_json
from ..io.writing import write_json
from .model_folder import PSPSettings, check_finite, check_module_paths, confined, read_safetensors, read_tokenizer

STATIC_EMBEDDING = "sentence_transformers.models.StaticEmbedding"


def detect_format(folder: Path) -> str:
    """'psp', 'sentence-transformers-static' or 'model2vec' for a model folder; PSPInputError otherwise."""
    config = read_json(folder / "config.json") if (folder / "config.json").is_file() else {}
    if config.get("model_type") == "psp":
        return "psp"
    if config.get("model_type") == "model2vec":  # loading then names what is missing (tokenizer.json, the table)
        return "model2vec"
    if _static_module_folder(folder) is not None and not (folder / "config.json").is_file():
        return "sentence-transformers-static"
    if (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file():
        header = _safetensors_names(folder / "model.safetensors")
        if "embeddings" in header:
            return "model2vec"
        if "embedding.weight" in header:
            return "sentence-transformers-static"
    raise PSPInputError(
        f"{folder}: not a psp, model2vec or sentence-transformers StaticEmbedding folder "
        "(expected config.json with model_type 'psp', or model.safetensors holding 'embeddings' / 'embedding.weight')"
    )


@dataclass
class StaticTable:
    """What another library's static folder holds, as psp reads it: one table over one tokenizer."""

    table: np.ndarray
    backend: Any  # tokenizers.Tokenizer
    settings: PSPSettings
    folder: Path


def read_static_embedding(folder: Path) -> StaticTable:
    """A sentence-transformers `StaticEmbedding` folder (the module's own folder, or a model folder holding it)."""
    module = _static_module_folder(folder) or folder
    path = module / "model.safetensors"
    tensors = read_safetensors(path, wanted=("embedding.weight", "embeddings"))
    name = "embedding.weight" if "embedding.weight" in tensors else "embeddings"
    if name not in tensors:
        raise PSPInputError(f"{path}: no 'embedding.weight' tensor; not a StaticEmbedding module")
    return _static_table(_checked_table(tensors[name], path, name), read_tokenizer(module), module)


def read_other_format(folder: Path) -> StaticTable | None:
    """A model2vec or sentence-transformers static folder's table; None for any other folder (psp's own too)."""
    check_module_paths(folder)  # a module path leaving the folder is refused, not taken for "another format"
    try:
        kind = detect_format(folder)
    except PSPInputError:
        return None
    if kind == "psp":
        return None
    return read_model2vec(folder) if kind == "model2vec" else read_static_embedding(folder)


def read_model2vec(folder: Path) -> StaticTable:
    """A model2vec folder's table, its per-piece weights and mapping folded in."""
    safetensors_path = folder / "model.safetensors"
    if not safetensors_path.is_file():
        raise PSPInputError(f"{folder}: no model.safetensors; not a model2vec folder")
    tensors = _read_any(safetensors_path, ("embeddings", "weights", "mapping"))
    if "embeddings" not in tensors:
        raise PSPInputError(f"{safetensors_path}: no 'embeddings' tensor; not a model2vec model")
    table = _checked_table(tensors["embeddings"], safetensors_path, "embeddings")
    if "mapping" in tensors:
        mapping = tensors["mapping"]
        if mapping.ndim != 1 or mapping.dtype.kind not in "iu":
            got = f"{mapping.dtype} {mapping.shape}"
            raise PSPInputError(f"{safetensors_path}: 'mapping' must be 1-D integers, got {got}")
        if len(mapping) and (int(mapping.min()) < 0 or int(mapping.max()) >= len(table)):
            raise PSPInputError(
                f"{safetensors_path}: 'mapping' points outside the {len(table)} rows of 'embeddings' "
                f"(values {int(mapping.min())}..{int(mapping.max())})"
            )
        table = table[mapping.astype(np.int64)]
    if "weights" in tensors:
        weights = tensors["weights"]
        if weights.shape != (len(table),):
            raise PSPInputError(f"{safetensors_path}: 'weights' has shape {weights.shape}, expected ({len(table)},)")
        table = table * _checked_table(weights[:, None], safetensors_path, "weights")
    return _static_table(table, read_tokenizer(folder), folder)


def _checked_table(array: np.ndarray, path: Path, name: str) -> np.ndarray:
    """`array` as a float32 2-D table with finite values (NaN or inf are refused as in psp folders)."""
    if array.ndim != 2 or 0 in array.shape:
        raise PSPInputError(f"{path}: {name!r} must be a 2-D table (pieces x dimensions), got shape {array.shape}")
    if array.dtype.kind not in "fiu":
        raise PSPInputError(f"{path}: {name!r} has dtype {array.dtype}, not a number type")
    table = array.astype(np.float32)
    check_finite(table, path, name)
    return table


def save_model2vec(encoder, directory: str | os.PathLike, quantize_to: str | None = None) -> Path:
    """Write `encoder` as a model2vec folder (see the module docstring for where results differ)."""
    from safetensors.numpy import save

    from ..io.writing import atomic_path

    if not encoder.averages_pieces:  # LSTM, GRAN, character units...: not one table's average
        raise PSPInputError("model2vec folders hold averaging encoders only (psp, mean, max over the tokenizer's ids)")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    table, piece_weights = encoder.weights()
    if piece_weights is not None:
        table = table * piece_weights[:, None]
    if quantize_to == "float16":
        table = table.astype(np.float16)
    elif quantize_to == "int8":  # model2vec's own int8: one scale for the table, rows as raw integers
        scale = float(np.abs(table).max()) / 127.0 or 1.0
        table = np.clip(np.rint(table / scale), -127, 127).astype(np.int8)
    with atomic_path(directory / "model.safetensors") as temporary:
        Path(temporary).write_bytes(save({"embeddings": np.ascontiguousarray(table)}))
    backend = encoder.backend_tokenizer
    backend.save(str(directory / "tokenizer.json"), pretty=False)
    config = {
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "tokenizer_name": None,
        "apply_pca": None,
        "hidden_dim": int(table.shape[1]),
        "normalize": False,
        "max_length": None,
        "embedding_dtype": np.dtype(table.dtype).name,
    }
    write_json(directory / "config.json", config)
    write_json(directory / "modules.json", [{"idx": 0, "name": "0", "path": ".", "type": STATIC_EMBEDDING}])
    return directory


def _static_table(table: np.ndarray, backend, folder: Path) -> StaticTable:
    """`table` over `backend` with the settings psp needs (unknown and padding pieces looked up)."""
    tokenizer_config = json.loads(backend.to_str())
    unk = _unknown_id(tokenizer_config, backend)
    pad = next((backend.token_to_id(t) for t in ("<pad>", "[PAD]", "<PAD>") if backend.token_to_id(t) is not None), unk)
    size = backend.get_vocab_size(with_added_tokens=True)
    if len(table) < size:
        raise PSPInputError(f"{folder}: the table has {len(table)} rows but the tokenizer {size} pieces")
    settings = PSPSettings(
        vocab_size=int(len(table)),
        hidden_size=int(table.shape[1]),
        pad_token_id=int(pad if pad is not None else 0),
        unk_token_id=int(unk if unk is not None else 0),
        drop_unknown=unk is not None,
    )
    return StaticTable(np.ascontiguousarray(table, dtype=np.float32), backend, settings, folder)


def _unknown_id(config: dict, backend) -> int | None:
    model = config.get("model") or {}
    if model.get("type") == "Unigram":
        return model.get("unk_id")
    token = model.get("unk_token")
    return None if token is None else backend.token_to_id(token)


def _static_module_folder(folder: Path) -> Path | None:
    """The folder of a sentence-transformers model's `StaticEmbedding` module, if its first module is one."""
    modules = check_module_paths(folder)
    if not modules or not str(modules[0].get("type", "")).endswith("StaticEmbedding"):
        return None
    return confined(folder, modules[0].get("path", ""), folder / "modules.json")


def _safetensors_names(path: Path) -> set[str]:
    with open(path, "rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        try:
            return set(json.loads(handle.read(size)))
        except (UnicodeDecodeError, json.JSONDecodeError, MemoryError, OverflowError):
            raise PSPInputError(f"{path}: not a safetensors file") from None


def _read_any(path: Path, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Tensors of any dtype (model2vec stores int8 tables and int mappings) as numpy arrays."""
    from safetensors.numpy import load_file

    try:
        tensors = load_file(str(path))
    except Exception as error:  # safetensors raises its own unexported error types
        raise PSPInputError(f"{path}: not a readable safetensors file ({error})") from None
    return {name: tensors[name] for name in names if name in tensors}
