"""A run that goes non-finite stops: a NaN or infinite loss, gradient norm or weight is an error, and the last good
checkpoint is kept (nothing after the divergence is saved or exported).

The loss stays on the device between log lines (no synchronisation per step); it is checked when a log line is
written and before every checkpoint, which together see every step.
"""

from __future__ import annotations

import math

import torch

from ...errors import PSPInputError


class TrainingDiverged(PSPInputError):
    """The loss, gradient norm or weights became NaN or infinite."""


def nonfinite_parameter(parameters) -> str | None:
    """The name (or index) of the first parameter holding NaN or infinity; None when all are finite."""
    items = parameters.items() if isinstance(parameters, dict) else enumerate(parameters)
    for name, tensor in items:
        # One sum per tensor: finite unless some element is NaN or infinite (or the sum overflows, also a divergence).
        if not math.isfinite(float(tensor.detach().double().sum())):
            return str(name)
    return None


def check_run_finite(trainer, loss: float | None = None, norm: float | None = None) -> None:
    """Raise `TrainingDiverged` when the window's loss / norm or the trained weights are not finite."""
    problem = None
    if loss is not None and not math.isfinite(loss):
        problem = f"the loss is {loss}"
    elif norm is not None and not math.isfinite(norm):
        problem = f"the gradient norm is {norm}"
    else:
        window = trainer.window
        loss_sum, norm_sum = float(window.loss), float(window.norm)
        if not (math.isfinite(loss_sum) and math.isfinite(norm_sum)):
            problem = f"the loss is {loss_sum}" if not math.isfinite(loss_sum) else f"the gradient norm is {norm_sum}"
        else:
            bad = nonfinite_parameter(trainer.trainable())
            if bad is not None:
                problem = f"trainable parameter {bad} holds NaN or infinite values"
    if problem is None:
        return
    store = trainer.checkpoints
    if store.exists():
        pointer = store.read_pointer()
        kept = f"the last good checkpoint {store.training_dir / pointer['folder']} (step {pointer.get('step')}) is kept"
    else:
        kept = "no checkpoint had been written"
    raise TrainingDiverged(
        f"training diverged by step {trainer.state.step}: {problem}; stopped without saving, {kept}. Lower --lr "
        f"(it is {trainer.args.lr}) or check the data and the weights it started from"
    )


def check_loaded_weights(module: torch.nn.Module, where) -> None:
    """Refuse resumed weights that hold NaN or infinity (they would train into a NaN model)."""
    bad = nonfinite_parameter(dict(module.named_parameters()))
    if bad is not None:
        raise TrainingDiverged(
            f"--resume: the checkpoint {where} holds NaN or infinite values in {bad}; it cannot be continued. "
            "Remove the run's training folder to start afresh"
        )


def check_finite_arguments(args) -> None:
    """Refuse `--lr nan`, `--margin inf` and the like before any work (they train into a NaN model), and a seed
    outside the unsigned 32 bits numpy and the samplers take."""
    import dataclasses

    for item in dataclasses.fields(args):
        value = getattr(args, item.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise PSPInputError(f"--{item.name.replace('_', '-')} must be a finite number, got {value}")
    if not 0 <= args.seed < 2**32:
        raise PSPInputError(f"--seed must be in [0, 2**32), got {args.seed}")
