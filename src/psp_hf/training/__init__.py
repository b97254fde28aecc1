"""Training P-SP models: `Trainer` (the loop), `TrainingArguments` (its settings) and `train(args, data=None)`.

`data` may hold the pairs as a `datasets` object or a list of `(sentence, paraphrase)` pairs instead of paths.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Trainer", "TrainingArguments", "train"]


def __getattr__(name: str) -> Any:
    # Lazy, so that importing a submodule does not import torch and accelerate.
    if name == "TrainingArguments":
        from .arguments.training_arguments import TrainingArguments

        return TrainingArguments
    if name in ("Trainer", "train"):
        from .loop import trainer

        return getattr(trainer, name)
    raise AttributeError(name)
