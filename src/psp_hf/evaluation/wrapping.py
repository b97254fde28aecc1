"""In-memory encoders as `EncoderAdapter`s: objects with `encode`, plain functions `list[str] -> array`, and
SentEval's `(prepare, batcher)` pair (the interface `any_encoder` documents).

Kept apart from `adapters` (which loads encoders by name) so that neither `adapters` nor the task code has to
import the harness entry points in `any_encoder`: evaluation imports run one way only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .adapters import EncoderAdapter, as_embeddings

# SentEval's names of the tasks it has; STS17 and Tatoeba are not SentEval tasks and keep psp's names.
SENTEVAL_TASK_NAMES = {
    "sts12": "STS12", "sts13": "STS13", "sts14": "STS14", "sts15": "STS15", "sts16": "STS16",
    "stsb": "STSBenchmark", "sickr": "SICKRelatedness", "sicke": "SICKEntailment", "mr": "MR", "cr": "CR",
    "subj": "SUBJ", "mpqa": "MPQA", "trec": "TREC", "sst2": "SST2", "sst5": "SST5", "mrpc": "MRPC",
    "sts17": "STS17", "tatoeba": "Tatoeba",
}  # fmt: skip
SENTEVAL_DEFAULTS = {"batch_size": 128, "seed": 1111, "kfold": 10, "usepytorch": False}


class SentEvalParams(dict):
    """SentEval's `params`: a dict whose keys also read and write as attributes (`params.batch_size`)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise AttributeError(name) from None


def tokenize(sentence: str) -> list[str]:
    """A sentence as SentEval hands it to `prepare` and `batcher`: its whitespace-separated tokens."""
    return sentence.split()


def _label(function: Any) -> str:
    module = getattr(function, "__module__", None)
    name = getattr(function, "__qualname__", None) or type(function).__name__
    return f"{module}:{name}" if module and module != "__main__" else name


class _FunctionModel:
    """`encode` over a function `list[str] -> array`, called once per batch."""

    def __init__(self, function: Callable[[list[str]], Any], name: str):
        self.function = function
        self.name = name

    def encode(self, sentences: Sequence[str], batch_size: int = 256, show_progress_bar: bool = False):
        import numpy as np

        parts = []
        for start in range(0, len(sentences), batch_size):
            batch = list(sentences[start : start + batch_size])
            parts.append(as_embeddings(self.function(batch), len(batch), self.name))
        return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


class _SentEvalModel:
    """`encode` over SentEval's `batcher(params, batch)`; `start_task` runs `prepare(params, samples)`."""

    def __init__(self, batcher: Callable, prepare: Callable | None, params: dict | None, name: str):
        self.batcher = batcher
        self.prepare = prepare
        self.params = SentEvalParams({**SENTEVAL_DEFAULTS, **dict(params or {})})
        self.name = name

    def start_task(self, task: str, sentences: Sequence[str], settings: dict) -> None:
        self.params.update(settings)
        self.params.current_task = SENTEVAL_TASK_NAMES.get(task, task)
        if self.prepare is not None:
            self.prepare(self.params, [tokenize(sentence) for sentence in sentences])

    def encode(self, sentences: Sequence[str], batch_size: int | None = None, show_progress_bar: bool = False):
        import numpy as np

        size = batch_size or int(self.params.batch_size)
        parts = []
        for start in range(0, len(sentences), size):
            batch = [tokenize(sentence) for sentence in sentences[start : start + size]]
            parts.append(as_embeddings(self.batcher(self.params, batch), len(batch), self.name))
        return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


def callable_encoder(
    function: Callable[[list[str]], Any], name: str | None = None, batch_size: int | None = None
) -> EncoderAdapter:
    """An `EncoderAdapter` around a function `list[str] -> array (n, dim)` (numpy, torch or nested lists)."""
    if not callable(function):
        raise TypeError(f"{type(function).__name__} is not callable")
    label = name or _label(function)
    return EncoderAdapter(
        _FunctionModel(function, label), name=label, model_id=label, kind="callable", default_batch_size=batch_size
    )


def senteval_encoder(
    batcher: Callable, prepare: Callable | None = None, params: dict | None = None, name: str | None = None
) -> EncoderAdapter:
    """An `EncoderAdapter` around SentEval's `batcher(params, batch)` and optional `prepare(params, samples)`."""
    if not callable(batcher) or (prepare is not None and not callable(prepare)):
        raise TypeError("batcher (and prepare, if given) must be callable")
    label = name or _label(batcher)
    model = _SentEvalModel(batcher, prepare, params, label)
    return EncoderAdapter(
        model, name=label, model_id=label, kind="senteval", default_batch_size=int(model.params.batch_size),
        on_task=model.start_task,
    )  # fmt: skip


def wrap_encoder(encoder: Any, name: str | None = None) -> EncoderAdapter:
    """An `EncoderAdapter` around an in-memory encoder.

    `encoder` is an object with `encode` (a PSPEncoder, SentenceTransformer, StaticModel, ...), a function
    `list[str] -> array (n, dim)`, or SentEval's pair as a tuple `(prepare, batcher)` (see `any_encoder`).
    """
    if isinstance(encoder, EncoderAdapter):
        return encoder
    if not callable(getattr(encoder, "encode", None)):
        if isinstance(encoder, tuple) and len(encoder) == 2 and all(callable(part) for part in encoder):
            return senteval_encoder(encoder[1], prepare=encoder[0], name=name)
        if callable(encoder):
            return callable_encoder(encoder, name=name)
        raise TypeError(
            f"{type(encoder).__name__} is not an encoder: expected an object with encode(), a function "
            "list[str] -> array, or a (prepare, batcher) pair"
        )
    module = type(encoder).__module__.split(".")[0]
    kind = {"psp_hf": "psp", "sentence_transformers": "sentence-transformers", "model2vec": "model2vec"}.get(
        module, "custom"
    )
    library = {"psp": "psp-hf", "sentence-transformers": "sentence-transformers", "model2vec": "model2vec"}.get(kind)
    label = name or getattr(encoder, "name_or_path", None) or type(encoder).__name__
    kwargs = {"use_multiprocessing": False} if kind == "model2vec" else {}
    return EncoderAdapter(
        encoder, name=str(label), model_id=str(label), kind=kind, library=library, encode_kwargs=kwargs
    )
