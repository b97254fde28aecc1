"""Matryoshka training: the losses on nested prefixes of the embedding as well as on the full one.

A sentence embedding's first `k` values then work as a `k`-dimensional embedding on their own (truncation, as
`encode(..., truncate_dim=k)` does). Hard negatives are still mined with the full embedding: one mining pass per
mega-batch, and the prefixes learn to rank the same negatives below the positives.

Distillation with a learned projection W (student dim -> teacher dim): the prefix of length `k` is the student
vector with every value after the `k`-th set to zero, mapped by the same W, i.e. `prefix @ W[:, :k].T`. That is
what the truncated embedding says in the teacher's space; one W serves every length, so no extra parameters are
learned and the full-length term is the ordinary distillation loss. Without a projection (student dim = teacher
dim) the same rule applies with W = identity: `cos(prefix padded with zeros, teacher)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...errors import PSPInputError


@dataclass(frozen=True)
class NestedDims:
    """Prefix lengths (ascending, the full dimension last) and the weight of each one's loss."""

    dims: tuple[int, ...]
    weights: tuple[float, ...]

    @property
    def nested(self) -> bool:
        """True when there is at least one prefix shorter than the full embedding."""
        return len(self.dims) > 1


def _numbers(text: str, kind: type, flag: str) -> list:
    try:
        return [kind(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise PSPInputError(f"{flag} takes comma-separated numbers, got {text!r}") from None


def parse_nested_dims(dims_text: str | None, weights_text: str | None, dim: int) -> NestedDims:
    """`--matryoshka-dims` and `--matryoshka-weights` checked against `--dim`.

    The full dimension is always trained; it is added with weight 1 when `dims_text` does not name it. Weights,
    when given, follow the order of `dims_text` (one per number named there).
    """
    if not dims_text:
        if weights_text:
            raise PSPInputError("--matryoshka-weights needs --matryoshka-dims")
        return NestedDims((dim,), (1.0,))
    named = _numbers(dims_text, int, "--matryoshka-dims")
    if not named:
        raise PSPInputError(f"--matryoshka-dims names no dimension: {dims_text!r}")
    for value in named:
        if not 1 <= value <= dim:
            raise PSPInputError(f"--matryoshka-dims: {value} is not between 1 and --dim {dim}")
    if len(set(named)) != len(named):
        raise PSPInputError(f"--matryoshka-dims names a dimension twice: {dims_text!r}")
    weights = _numbers(weights_text, float, "--matryoshka-weights") if weights_text else [1.0] * len(named)
    if len(weights) != len(named):
        raise PSPInputError(
            f"--matryoshka-weights has {len(weights)} value(s) for {len(named)} --matryoshka-dims value(s)"
        )
    if any(weight < 0 for weight in weights) or not any(weights):
        raise PSPInputError(f"--matryoshka-weights must be >= 0 and not all 0, got {weights_text!r}")
    pairs = dict(zip(named, weights, strict=True))
    pairs.setdefault(dim, 1.0)
    ordered = sorted(pairs)
    return NestedDims(tuple(ordered), tuple(pairs[k] for k in ordered))


def nested_loss(loss_fn, tensors: list[torch.Tensor | None], nested: NestedDims, *rest) -> torch.Tensor:
    """`sum_k weight_k * loss_fn(*(t[:, :k] for t in tensors), *rest)` (the full dimension is one of the k)."""
    total = None
    for k, weight in zip(nested.dims, nested.weights, strict=True):
        if weight == 0:
            continue
        part = loss_fn(*(None if t is None else t[:, :k] for t in tensors), *rest)
        total = weight * part if total is None else total + weight * part
    return total


def nested_projections(
    tail: torch.Tensor, projection: torch.nn.Linear | None, nested: NestedDims
) -> list[torch.Tensor]:
    """The student rows `tail` mapped into the teacher's space, once per prefix length (see the module text)."""
    mapped = []
    for k in nested.dims:
        if projection is None:
            mapped.append(tail if k == tail.shape[1] else torch.nn.functional.pad(tail[:, :k], (0, tail.shape[1] - k)))
        else:
            mapped.append(tail[:, :k] @ projection.weight[:, :k].T)
    return mapped


def nested_distill_loss(loss_fn, mapped: list[torch.Tensor], targets: torch.Tensor, nested: NestedDims) -> torch.Tensor:
    """`sum_k weight_k * loss_fn(mapped_k, targets)` over the prefix lengths."""
    total = None
    for part_input, weight in zip(mapped, nested.weights, strict=True):
        if weight == 0:
            continue
        part = loss_fn(part_input, targets)
        total = weight * part if total is None else total + weight * part
    return total
