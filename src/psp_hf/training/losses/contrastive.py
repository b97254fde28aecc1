"""A contrastive loss on pairs (InfoNCE), the alternative to the margin loss (`--pair-loss contrastive`).

Each sentence of a mini-batch must pick its partner out of every other-side sentence of the mini-batch plus their
mined hardest negatives: a softmax over `scale * cosine` with the partner as the class. Where the margin loss sees
one negative a sentence, this sees 2N - 1 of them at once, which is what retrieval (Tatoeba, bitext mining) ranks.

Candidates that are really the partner under another index (equal piece sequences: a repeated sentence, a stand-in
for a row without a negative) or the anchor's own text are masked out, as the miner leaves them out.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def _side(
    anchor: torch.Tensor,
    partner: torch.Tensor,
    negative: torch.Tensor,
    scale: float,
    negative_valid: torch.Tensor | None,
    keys: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None,
) -> torch.Tensor:
    size = anchor.shape[0]
    candidates = F.normalize(torch.cat([partner, negative]), dim=1)
    logits = scale * F.normalize(anchor, dim=1) @ candidates.T  # (N, 2N): partners first, then negatives
    masked = torch.zeros_like(logits, dtype=torch.bool)
    if negative_valid is not None:
        masked[:, size:] = ~negative_valid.bool()[None, :]
    if keys is not None:
        anchor_keys, partner_keys, negative_keys = keys
        candidate_keys = torch.cat([partner_keys, negative_keys])[None, :]
        masked |= (candidate_keys == partner_keys[:, None]) | (candidate_keys == anchor_keys[:, None])
    diagonal = torch.arange(size, device=logits.device)
    masked[diagonal, diagonal] = False  # the partner itself is the class
    logits = logits.masked_fill(masked, float("-inf"))
    return F.cross_entropy(logits, diagonal)


def contrastive_loss(
    first: torch.Tensor,
    second: torch.Tensor,
    first_negative: torch.Tensor,
    second_negative: torch.Tensor | None = None,
    scale: float = 20.0,
    first_valid: torch.Tensor | None = None,
    second_valid: torch.Tensor | None = None,
    keys: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Cross-entropy of each first side over `[second sides; first sides' negatives]`, plus the same for the
    second sides over `[first sides; second sides' negatives]` when `second_negative` is given.

    `*_valid` mark the rows that have a mined negative (the others' stand-ins are masked out); `keys` are the
    piece-sequence keys of `(first, second, first_negative, second_negative)`, so that a candidate equal to the
    partner or to the anchor is no negative. Sums the two sides, as `margin_loss` does.
    """
    first_keys = None if keys is None else (keys[0], keys[1], keys[2])
    loss = _side(first, second, first_negative, scale, first_valid, first_keys)
    if second_negative is not None:
        second_keys = None if keys is None else (keys[1], keys[0], keys[3])
        loss = loss + _side(second, first, second_negative, scale, second_valid, second_keys)
    return loss
