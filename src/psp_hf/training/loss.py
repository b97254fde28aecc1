"""The margin loss on cosines, the trainable encoder module, and gradient clipping that handles sparse grads."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn
from torch.nn import functional as F

from ..modeling import PSPModel, apply_unknown_rule, pool_bags


def margin_loss(
    first: torch.Tensor,
    second: torch.Tensor,
    first_negative: torch.Tensor,
    second_negative: torch.Tensor | None = None,
    margin: float = 0.4,
    first_valid: torch.Tensor | None = None,
    second_valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Hinge loss `max(0, margin - cos(s1, s2) + cos(s1, n1))`, plus the same for s2 and n2 when given.

    With `second_negative` this is P-SP's two-sided loss; without it, the ParaNMT paper's one-sided loss.
    `*_valid` masks rows that have a negative at all (tiny mega-batches may leave none); each side is the mean
    over its valid rows.
    """
    positive = F.cosine_similarity(first, second, dim=1)

    def side(anchor: torch.Tensor, negative: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
        hinge = torch.relu(margin - positive + F.cosine_similarity(anchor, negative, dim=1))
        if valid is None:
            return hinge.mean()
        return (hinge * valid).sum() / valid.sum().clamp_min(1)

    loss = side(first, first_negative, first_valid)
    if second_negative is not None:
        loss = loss + side(second, second_negative, second_valid)
    return loss


class TrainingEncoder(nn.Module):
    """Wraps a `PSPModel` so that Accelerate/DDP see one `forward(flat_ids, offsets)`; adds piece dropout.

    Dropout on piece embeddings cannot run inside `nn.EmbeddingBag`, so with dropout the pieces are looked up
    one by one (sparse gradients kept), dropped with a per-step seeded generator (which makes a resumed run
    draw the same masks), and averaged by bag.
    """

    def __init__(self, model: PSPModel, dropout: float = 0.0, projection: nn.Module | None = None):
        super().__init__()
        self.model = model
        self.dropout = dropout
        # The distillation map into the teacher's space; part of this module so that DDP averages its
        # gradient along with the table's.
        self.projection = projection
        self.generator: torch.Generator | None = None

    def forward(
        self, flat_ids: torch.Tensor, offsets: torch.Tensor, project_last: int = 0
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Sentence embeddings of the bags; with `project_last`, also the last that many mapped by `projection`.

        Margin and distillation sentences go through one call (DDP expects one forward per backward).
        """
        embeddings = self._embed(flat_ids, offsets)
        if not project_last:
            return embeddings
        tail = embeddings[embeddings.shape[0] - project_last :]
        return embeddings, (self.projection(tail) if self.projection is not None else tail)

    def _embed(self, flat_ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        config = self.model.config
        if not self.training:
            return self.model.embed(flat_ids, offsets)
        if config.drop_unknown:
            flat_ids, offsets = apply_unknown_rule(flat_ids, offsets, config.unk_token_id)
        table = self.model.embeddings
        # Look each distinct piece up once and pool from that compact block: the table's gradient then has one
        # row per distinct piece (already summed) instead of one per occurrence, which spares the backward
        # pass a (pieces x dim) tensor and the optimizer a coalescing sort.
        distinct, local_ids = torch.unique(flat_ids, return_inverse=True)
        rows = F.embedding(distinct, table.weight, sparse=table.sparse)
        if not self.dropout > 0:
            weights = None if self.model.piece_weights is None else self.model.piece_weights[flat_ids]
            return pool_bags(rows, local_ids, offsets, weights, config.pooling)
        if config.pooling != "mean":
            raise ValueError("piece dropout is implemented for mean pooling only")
        pieces = rows[local_ids]
        keep = torch.rand(pieces.shape, generator=self.generator, device=pieces.device) >= self.dropout
        pieces = pieces * keep / (1.0 - self.dropout)
        weights = None if self.model.piece_weights is None else self.model.piece_weights[flat_ids]
        return pool_bags(pieces, torch.arange(pieces.shape[0], device=pieces.device), offsets, weights, "mean")


def distill_loss(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """`mean(1 - cos(student, teacher))` over the rows (student already mapped into the teacher's space)."""
    return 1.0 - F.cosine_similarity(student, teacher.to(student.dtype), dim=1).mean()


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
