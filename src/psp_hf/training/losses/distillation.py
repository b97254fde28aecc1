"""The distillation loss: student sentence vectors (mapped into the teacher's space) against the teacher's."""

from __future__ import annotations

import torch
from torch.nn import functional as F


def distill_loss(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """`mean(1 - cos(student, teacher))` over the rows (student already mapped into the teacher's space)."""
    return 1.0 - F.cosine_similarity(student, teacher.to(student.dtype), dim=1).mean()


def pair_distill_loss(mapped: torch.Tensor, teacher_english: torch.Tensor) -> torch.Tensor:
    """Multilingual distillation: `mapped` = [student(xx); student(en)] of n pairs (2n rows, in the teacher's space)
    against `teacher_english` (n rows), so both sides of a pair learn the teacher's vector of its English side."""
    return distill_loss(mapped, torch.cat([teacher_english, teacher_english]))


def bitext_distill_loss(mapped: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Multilingual distillation with `--bitext-targets`: `mapped` = [student(xx); student(en)] (2n rows) against
    `targets` `(k, 2n, dim)` from `BitextTeacher.targets`, the mean of the k distillation losses."""
    return sum(distill_loss(mapped, part) for part in targets) / len(targets)
