"""The distillation loss: student sentence vectors (mapped into the teacher's space) against the teacher's."""

from __future__ import annotations

import torch
from torch.nn import functional as F


def distill_loss(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """`mean(1 - cos(student, teacher))` over the rows (student already mapped into the teacher's space)."""
    return 1.0 - F.cosine_similarity(student, teacher.to(student.dtype), dim=1).mean()
