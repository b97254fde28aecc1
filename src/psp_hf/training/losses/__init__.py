"""The training losses, one per module: the margin loss, the distillation losses, and Matryoshka's nested form.

- `margin_loss` (margin.py): ParaNMT / P-SP's hinge on cosines between a pair and its mined negatives.
- `distill_loss`, `pair_distill_loss`, `bitext_distill_loss` (distillation.py): student vectors, mapped into the
  teacher's space, against the teacher's (the distillation corpus, the pairs' English sides, and both sides of a
  bitext pair).
- `nested_loss`, `nested_distill_loss` (matryoshka.py): a loss on nested prefixes of the embedding as well as on the
  full one, with `NestedDims` and `parse_nested_dims` for its settings.
"""

from __future__ import annotations

from .distillation import bitext_distill_loss, distill_loss, pair_distill_loss
from .margin import margin_loss
from .matryoshka import NestedDims, nested_distill_loss, nested_loss, nested_projections, parse_nested_dims

__all__ = [
    "NestedDims",
    "bitext_distill_loss",
    "distill_loss",
    "margin_loss",
    "nested_distill_loss",
    "nested_loss",
    "nested_projections",
    "pair_distill_loss",
    "parse_nested_dims",
]
