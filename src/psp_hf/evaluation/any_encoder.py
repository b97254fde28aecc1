"""Evaluate any encoder, as SentEval does: a function `list[str] -> array`, or SentEval's `prepare`/`batcher`.

A function encoder takes a list of sentences (str) and returns their embeddings, `(len(sentences), dim)`, as a
numpy array, a torch tensor or nested lists; the harness calls it on batches of `batch_size` sentences::

    def embed(sentences: list[str]) -> np.ndarray: ...
    evaluate(embed, tasks=["sts"])

SentEval's interface (Conneau & Kiela 2018) is taken as SentEval defines it::

    def prepare(params, samples): ...      # once per task, before encoding: samples = the task's sentences
    def batcher(params, batch): ...        # batch = a list of sentences, each a list of tokens -> array
    evaluate(prepare=prepare, batcher=batcher, params={"batch_size": 128})

`params` is a dict whose keys also read and write as attributes (SentEval's `dotdict`): the caller's `params`
plus SentEval's `batch_size` (128), `seed` (1111), `kfold` (10), `usepytorch` (False), and, set for each task,
`current_task` (SentEval's task name: `STS12`, `STSBenchmark`, `SICKRelatedness`, `MR`, ..., and `STS17`,
`Tatoeba` for the tasks SentEval lacks) and `task_path` (the data folder). `prepare` may store anything on
`params` (a vocabulary, word vectors) for `batcher` to use. Sentences reach both tokenised as SentEval
tokenises its files: split on whitespace (`sentence.split()`); a batcher usually joins them back with spaces.
Every task encodes its sentences in one go, so `prepare` is called exactly once per task, with all the
sentences that task encodes (duplicates included, in the task's order).

On the command line, `psp eval --encoder SPEC` takes the same encoders, where SPEC is `module:name` (a module
importable from the current folder or the Python path) or `path/to/file.py:name`:
- `name` is an object with `encode(sentences, batch_size=..., ...)`: used as it is;
- `name` is a function of one argument: the encoder itself (`list[str] -> array`);
- `name` is a function of two arguments: SentEval's `batcher`, with the module's `prepare` if it has one;
- `name` is a function of no arguments: a factory, called once; it returns one of the above, or a
  `(prepare, batcher)` pair;
- `module` alone (no `:name`): a SentEval script, whose `batcher` (and `prepare`, if any) are used.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import PSPInputError
from .adapters import EncoderAdapter, as_embeddings, wrap_encoder
from .tasks import evaluate_model

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


def evaluate(
    encoder: Any = None,
    tasks: Sequence[str] | None = None,
    data_dir: str | os.PathLike | None = None,
    *,
    prepare: Callable | None = None,
    batcher: Callable | None = None,
    params: dict | None = None,
    name: str | None = None,
    **options: Any,
) -> dict:
    """Score any encoder on `tasks` (default: all), as `evaluate_model` does, and return its result.

    Give either `encoder` (an object with `encode`, a function `list[str] -> array`, an `EncoderAdapter`, or a
    `(prepare, batcher)` pair) or SentEval's `batcher=` (with `prepare=` and `params=` optional). `options` are
    `evaluate_model`'s (batch_size, tatoeba_languages, sts17_pairs, senteval_kfold, seed, show_progress, log).
    """
    if (encoder is None) == (batcher is None):
        raise PSPInputError("give either an encoder or SentEval's batcher= (with optional prepare= and params=)")
    if batcher is not None:
        adapter = senteval_encoder(batcher, prepare=prepare, params=params, name=name)
    elif prepare is not None or params is not None:
        raise PSPInputError("prepare= and params= go with batcher=; an encoder takes neither")
    else:
        adapter = wrap_encoder(encoder, name=name)
    return evaluate_model(adapter, tasks, data_dir, **options)


# ---------------------------------------------------------------------------------------------- --encoder SPEC
def _import(module_spec: str, spec: str):
    path = Path(module_spec).expanduser()
    if module_spec.endswith(".py") or os.sep in module_spec or "/" in module_spec:
        if not path.is_file():
            raise PSPInputError(f"--encoder {spec}: no such file {path}")
        name = f"psp_encoder_{path.stem}"
        loader_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(loader_spec)
        # Registered while it runs (dataclasses and pickling look modules up by name); dropped if it fails.
        sys.modules[name] = module
        try:
            loader_spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module
    # As `python -m` does: modules in the current folder are importable.
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_spec)
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def _required_positional(function: Callable) -> int | None:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # builtins without a signature
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in signature.parameters.values() if p.kind in kinds and p.default is inspect.Parameter.empty)


def _resolve(value: Any, module: Any, spec: str, allow_factory: bool = True) -> EncoderAdapter:
    if callable(getattr(value, "encode", None)):
        return wrap_encoder(value, name=spec)
    if isinstance(value, tuple) and len(value) == 2 and all(callable(part) for part in value):
        return senteval_encoder(value[1], prepare=value[0], name=spec)
    if not callable(value):
        raise PSPInputError(
            f"--encoder {spec}: {type(value).__name__} is not an encoder (expected a function list[str] -> array, "
            "SentEval's batcher, an object with encode(), or a factory returning one)"
        )
    arity = _required_positional(value)
    if arity == 0 and allow_factory:
        return _resolve(value(), module, spec, allow_factory=False)
    if arity == 2:
        prepare = getattr(module, "prepare", None) if module is not None else None
        return senteval_encoder(value, prepare=prepare if callable(prepare) else None, name=spec)
    if arity in (1, None):
        return callable_encoder(value, name=spec)
    raise PSPInputError(
        f"--encoder {spec}: a function with {arity} required arguments; expected 1 (sentences), 2 (SentEval's "
        "params, batch) or 0 (a factory)"
    )


def load_encoder_spec(spec: str) -> EncoderAdapter:
    """The encoder named by `module:name`, `path/to/file.py:name` or a SentEval script `module` (see above)."""
    module_spec, colon, attribute = spec.rpartition(":")
    if not colon or not attribute.isidentifier():
        module_spec, attribute = spec, ""
    if not module_spec:
        raise PSPInputError(f"--encoder {spec}: expected module:function (or path/to/file.py:function)")
    try:
        module = _import(module_spec, spec)
    except PSPInputError:
        raise
    except Exception as error:  # noqa: BLE001 - the user's module failed to import: one line naming it
        reason = (str(error).strip().splitlines() or [""])[0]
        raise PSPInputError(
            f"--encoder {spec}: cannot import {module_spec} ({type(error).__name__}: {reason})"
        ) from None
    if not attribute:
        batcher = getattr(module, "batcher", None)
        if not callable(batcher):
            raise PSPInputError(f"--encoder {spec}: the module has no batcher(params, batch); give module:function")
        prepare = getattr(module, "prepare", None)
        return senteval_encoder(batcher, prepare=prepare if callable(prepare) else None, name=spec)
    if not hasattr(module, attribute):
        raise PSPInputError(f"--encoder {spec}: module {module_spec} has no attribute {attribute!r}")
    try:
        return _resolve(getattr(module, attribute), module, spec)
    except PSPInputError:
        raise
    except Exception as error:  # noqa: BLE001 - the user's factory failed
        reason = (str(error).strip().splitlines() or [""])[0]
        raise PSPInputError(
            f"--encoder {spec}: building the encoder failed ({type(error).__name__}: {reason})"
        ) from None


__all__ = [
    "SENTEVAL_DEFAULTS",
    "SENTEVAL_TASK_NAMES",
    "SentEvalParams",
    "callable_encoder",
    "evaluate",
    "load_encoder_spec",
    "senteval_encoder",
    "tokenize",
]
