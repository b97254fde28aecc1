"""Evaluation harness: the papers' STS, STS17, Tatoeba and SentEval protocols for any sentence encoder.

>>> from psp_hf.evaluation import evaluate_model, load_encoder, sts_dev_score
>>> report = evaluate_model(load_encoder("minilm"), tasks=["fast"])   # STS12-16, STS-B, SICK-R, STS17, Tatoeba
>>> sts_dev_score(my_psp_encoder, split="sts17-en-en")               # Pearson x100, for dev checks in training
>>> evaluate(my_function, tasks=["sts"])                   # any function list[str] -> array (callables.py)
>>> evaluate(prepare=prepare, batcher=batcher, tasks=["senteval"])   # SentEval's own interface

Every score is x100 (Pearson/Spearman x100, error rate and accuracy in %). `psp eval` / `eval.py` wrap this and
also write the JSON report, the Markdown tables (`report.py`) and the model card's model-index block
(`model_index.py`). STS scoring, for the harness and for training's dev check alike, is in `sts.py`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Loaded on first use, so that importing one module of the package (the card side reads `model_index.py`) does not
# import the harness, the encoders it loads and, through them, `psp_hf.encoder`.
_LAZY = {
    "EncoderAdapter": "adapters",
    "load_encoder": "adapters",
    "evaluate": "callables",
    "load_encoder_spec": "callables",
    "DEV_SPLITS": "sts",
    "sts_dev_score": "sts",
    "ALL_TASKS": "task_names",
    "DEFAULT_TASKS": "task_names",
    "FAST_TASKS": "task_names",
    "SENTEVAL_TASKS": "task_names",
    "STS_TASKS": "task_names",
    "TASK_GROUPS": "task_names",
    "resolve_tasks": "task_names",
    "evaluate_model": "tasks",
    "SentEvalParams": "wrapping",
    "callable_encoder": "wrapping",
    "senteval_encoder": "wrapping",
    "wrap_encoder": "wrapping",
}

if TYPE_CHECKING:
    from .adapters import EncoderAdapter, load_encoder
    from .callables import evaluate, load_encoder_spec
    from .sts import DEV_SPLITS, sts_dev_score
    from .task_names import (
        ALL_TASKS,
        DEFAULT_TASKS,
        FAST_TASKS,
        SENTEVAL_TASKS,
        STS_TASKS,
        TASK_GROUPS,
        resolve_tasks,
    )
    from .tasks import evaluate_model
    from .wrapping import SentEvalParams, callable_encoder, senteval_encoder, wrap_encoder


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ALL_TASKS",
    "DEFAULT_TASKS",
    "DEV_SPLITS",
    "EncoderAdapter",
    "FAST_TASKS",
    "SENTEVAL_TASKS",
    "STS_TASKS",
    "SentEvalParams",
    "TASK_GROUPS",
    "callable_encoder",
    "evaluate",
    "evaluate_model",
    "load_encoder",
    "load_encoder_spec",
    "resolve_tasks",
    "senteval_encoder",
    "sts_dev_score",
    "wrap_encoder",
]
