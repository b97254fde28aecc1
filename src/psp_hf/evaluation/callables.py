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
from .adapters import EncoderAdapter
from .tasks import evaluate_model
from .wrapping import (
    callable_encoder,
    senteval_encoder,
    wrap_encoder,
)


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


__all__ = ["evaluate", "load_encoder_spec"]
