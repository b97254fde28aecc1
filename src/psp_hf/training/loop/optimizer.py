"""Lazy sparse Adam for the embedding table, and gradient clipping that handles sparse gradients."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


def coalesce(grad: torch.Tensor) -> torch.Tensor:
    """A coalesced sparse gradient; one whose rows are already strictly increasing is only flagged as such.

    `TrainingEncoder` looks each distinct piece up once, in sorted order, so its gradient needs no sorting; a
    gradient summed across processes does.
    """
    if grad.is_coalesced():
        return grad
    rows = grad._indices()[0]
    if grad._indices().shape[0] == 1 and bool((rows[1:] > rows[:-1]).all()):
        return grad._coalesced_(True)
    return grad.coalesce()


@torch.no_grad()
def clip_grad_norm(parameters: Iterable[nn.Parameter], max_norm: float) -> torch.Tensor:
    """Scale all gradients so their global L2 norm is at most `max_norm`; returns the norm before clipping.

    Sparse gradients are coalesced first, so a row hit by several pieces counts once with its summed gradient
    (`torch.nn.utils.clip_grad_norm_` does not take sparse gradients). `max_norm <= 0` only measures.
    """
    grads = []
    squares = []
    for parameter in parameters:
        if parameter.grad is None:
            continue
        if parameter.grad.is_sparse:
            parameter.grad = coalesce(parameter.grad)
            squares.append(parameter.grad._values().float().pow(2).sum())
        else:
            squares.append(parameter.grad.float().pow(2).sum())
        grads.append(parameter.grad)
    if not squares:
        return torch.zeros(())
    total = torch.stack(squares).sum().sqrt()
    if max_norm > 0:
        scale = max_norm / (total + 1e-6)
        if bool(scale < 1):
            for grad in grads:
                if grad.is_sparse:
                    grad._values().mul_(scale)
                else:
                    grad.mul_(scale)
    return total


class LazyAdam(torch.optim.Optimizer):
    """Adam for sparse gradients that reads and writes only the rows present in the gradient.

    The same update as `torch.optim.SparseAdam` (moments of absent rows are neither decayed nor applied), done
    with row gathers and scatters on the coalesced gradient instead of sparse-tensor arithmetic, which is
    several times cheaper per step for a wide table.
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        if lr <= 0:
            raise ValueError(f"lr must be positive, got {lr}")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps})

    @torch.no_grad()
    def step(self, closure=None):
        """One update of every parameter that has a (sparse) gradient."""
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for parameter in group["params"]:
                grad = parameter.grad
                if grad is None:
                    continue
                if not grad.is_sparse:
                    raise RuntimeError("LazyAdam takes sparse gradients; use torch.optim.Adam for dense ones")
                state = self.state[parameter]
                if not state:
                    state["step"] = torch.zeros((), dtype=torch.float64)
                    state["exp_avg"] = torch.zeros_like(parameter)
                    state["exp_avg_sq"] = torch.zeros_like(parameter)
                grad = coalesce(grad)
                rows = grad._indices()[0]
                values = grad._values()
                if rows.numel() == 0:
                    continue
                state["step"] += 1
                step = float(state["step"])
                exp_avg = state["exp_avg"].index_select(0, rows).lerp_(values, 1 - beta1)
                exp_avg_sq = (
                    state["exp_avg_sq"].index_select(0, rows).mul_(beta2).addcmul_(values, values, value=1 - beta2)
                )
                state["exp_avg"].index_copy_(0, rows, exp_avg)
                state["exp_avg_sq"].index_copy_(0, rows, exp_avg_sq)
                bias_correction1 = 1 - beta1**step
                bias_correction2 = 1 - beta2**step
                denominator = exp_avg_sq.div_(bias_correction2).sqrt_().add_(group["eps"])
                parameter.index_add_(0, rows, exp_avg.div_(denominator), alpha=-group["lr"] / bias_correction1)
        return loss


def make_optimizers(
    table: nn.Parameter, others: list[nn.Parameter], lr: float, sparse: bool
) -> list[torch.optim.Optimizer]:
    """Lazy Adam for a sparse table (only the rows of the batch's pieces are read and written each step) and
    Adam for the other parameters; one dense Adam for everything when the table's gradient is dense."""
    if not sparse:
        return [torch.optim.Adam([table, *others], lr=lr)]
    optimizers: list[torch.optim.Optimizer] = [LazyAdam([table], lr=lr)]
    if others:
        optimizers.append(torch.optim.Adam(others, lr=lr))
    return optimizers
