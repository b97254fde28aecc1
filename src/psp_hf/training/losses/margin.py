"""The margin loss of ParaNMT / P-SP: a hinge on cosines between a pair and its mined negatives."""

from __future__ import annotations

import torch
from torch.nn import functional as F


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
