"""Evaluation harness: the papers' STS, STS17, Tatoeba and SentEval protocols for any sentence encoder.

>>> from psp_hf.evaluation import evaluate_model, load_encoder, sts_dev_score
>>> report = evaluate_model(load_encoder("minilm"), tasks=["fast"])   # STS12-16, STS-B, SICK-R, STS17, Tatoeba
>>> sts_dev_score(my_psp_encoder, split="sts17-en-en")               # Pearson x100, for dev checks in training
>>> evaluate(my_function, tasks=["sts"])                   # any function list[str] -> array (any_encoder.py)
>>> evaluate(prepare=prepare, batcher=batcher, tasks=["senteval"])   # SentEval's own interface

Every score is x100 (Pearson/Spearman x100, error rate and accuracy in %). `psp eval` / `eval.py` wrap this and
also write the JSON report, the Markdown tables (`report.py`) and the model card's model-index block
(`model_index.py`). STS scoring, for the harness and for training's dev check alike, is in `sts.py`.
"""

from .adapters import EncoderAdapter, load_encoder
from .callables import evaluate, load_encoder_spec
from .sts import DEV_SPLITS, sts_dev_score
from .tasks import (
    ALL_TASKS,
    DEFAULT_TASKS,
    FAST_TASKS,
    SENTEVAL_TASKS,
    STS_TASKS,
    TASK_GROUPS,
    evaluate_model,
    resolve_tasks,
)
from .wrapping import SentEvalParams, callable_encoder, senteval_encoder, wrap_encoder

__all__ = [
    "ALL_TASKS",
    "DEFAULT_TASKS",
    "DEV_SPLITS",
    "FAST_TASKS",
    "SENTEVAL_TASKS",
    "STS_TASKS",
    "TASK_GROUPS",
    "EncoderAdapter",
    "SentEvalParams",
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
