"""The trainable encoder module: one `forward(flat_ids, offsets)` for Accelerate/DDP, with piece dropout."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ...modeling import PSPModel, apply_unknown_rule, pool_bags
from ..losses.matryoshka import NestedDims, nested_projections


class TrainingEncoder(nn.Module):
    """Wraps a `PSPModel` so that Accelerate/DDP see one `forward(flat_ids, offsets)`; adds piece dropout.

    Dropout on piece embeddings cannot run inside `nn.EmbeddingBag`, so with dropout the pieces are looked up
    one by one (sparse gradients kept), dropped with a per-step seeded generator (which makes a resumed run
    draw the same masks), and averaged by bag.
    """

    def __init__(
        self,
        model: PSPModel,
        dropout: float = 0.0,
        projection: nn.Module | None = None,
        nested: NestedDims | None = None,
    ):
        super().__init__()
        self.model = model
        self.dropout = dropout
        # The distillation map into the teacher's space; part of this module so that DDP averages its
        # gradient along with the table's.
        self.projection = projection
        self.generator: torch.Generator | None = None
        # Matryoshka training: the distillation rows are mapped once per prefix length (inside forward, for DDP).
        self.nested = nested if nested is not None and nested.nested else None
        # The papers' options (training/encoder_options.py): unit scrambling and the L2 pull (lambda_w).
        self.scramble_rate = self.init_l2 = 0.0
        self.l2_penalty: torch.Tensor | None = None
        self.pulled_rows: torch.Tensor | None = None  # 1/0 per row of the first table: which rows the pull reaches

    def forward(
        self, flat_ids: torch.Tensor, offsets: torch.Tensor, project_last: int = 0
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor | list[torch.Tensor]]:
        """Sentence embeddings of the bags; with `project_last`, also the last that many mapped by `projection`.

        Margin and distillation sentences go through one call (DDP expects one forward per backward). With
        `nested` (Matryoshka), the mapped rows are a list: one tensor per prefix length, shortest first.
        """
        embeddings = self._embed(flat_ids, offsets)
        if not project_last:
            return embeddings
        tail = embeddings[embeddings.shape[0] - project_last :]
        if self.nested is not None:
            return embeddings, nested_projections(tail, self.projection, self.nested)
        return embeddings, (self.projection(tail) if self.projection is not None else tail)

    def _embed(self, flat_ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        config = self.model.config
        if not self.training:
            return self.model.embed(flat_ids, offsets)
        if not config.light_path or self.scramble_rate > 0 or self.init_l2 > 0:
            from .architectures import train_embed

            return train_embed(self, flat_ids, offsets)
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
