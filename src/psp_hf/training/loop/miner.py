"""Mega-batch hardest-negative mining (ParaNMT-50M, P-SP).

A mega-batch is M mini-batches gathered together. Each of its 2N sentences is embedded with the current model
(no gradients), and every sentence gets as negative the candidate with the highest cosine that is

* not the sentence itself and not its partner,
* not a sentence with the same pieces as the sentence or as its partner (the original code let exact duplicates
  of the partner become "negatives": the loss then pushes a sentence away from its own paraphrase),

* with teacher vectors and a threshold: not a sentence whose teacher cosine with the anchor is at least the
  threshold (an unlabelled true paraphrase, which the loss would push away); a sentence without a teacher
  vector (a NaN row) is never filtered,

where candidates are the other side of the pairs (bitext: the other language) or both sides (paraphrases).
M starts at 1 and grows by 1 every `anneal` mini-batches up to `max_size`.

The ICLR 2016 paper's selections are `make_miner`'s "max" (the hardest negative of the mini-batch: M = 1) and
"mix" (the same, but with probability 1/2 a uniformly random allowed candidate of the mini-batch instead).

Layout of a mega-batch: sentence `i < N` is the first side of pair `i`, sentence `N + i` its second side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

NO_NEGATIVE = -1


@dataclass
class MegaBatch:
    """Tokenised pairs of a mega-batch: 2N bags (first sides, then second sides) and their boundaries."""

    flat_ids: torch.Tensor  # pieces of all 2N sentences back to back
    starts: torch.Tensor  # (2N,) where each sentence starts in flat_ids
    lengths: torch.Tensor  # (2N,) pieces per sentence
    keys: torch.Tensor  # (2N,) equal keys <=> equal piece sequences
    minibatch_sizes: list[int]  # pairs in each mini-batch, in order

    @property
    def n_pairs(self) -> int:
        return self.starts.numel() // 2

    def to(self, device: torch.device | str) -> MegaBatch:
        return MegaBatch(
            self.flat_ids.to(device),
            self.starts.to(device),
            self.lengths.to(device),
            self.keys.to(device),
            self.minibatch_sizes,
        )

    def bags(self, sentence_index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`(flat_ids, offsets)` of the given sentences, in that order (vectorised gather)."""
        return gather_bags(self.flat_ids, self.starts, self.lengths, sentence_index)


def gather_bags(
    flat_ids: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor, index: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Concatenate the bags `index` of a `(flat_ids, starts, lengths)` store; returns `(flat_ids, offsets)`."""
    picked_lengths = lengths[index]
    offsets = torch.zeros_like(picked_lengths)
    if picked_lengths.numel() > 1:
        offsets[1:] = torch.cumsum(picked_lengths, 0)[:-1]
    total = int(picked_lengths.sum())
    # Position of every output piece in flat_ids: its bag's start plus its rank inside the bag.
    within = torch.arange(total, device=flat_ids.device) - torch.repeat_interleave(offsets, picked_lengths)
    source = torch.repeat_interleave(starts[index], picked_lengths) + within
    return flat_ids[source], offsets


def tokenize_megabatch(backend, first: Sequence[str], second: Sequence[str], sizes: list[int]) -> MegaBatch:
    """Tokenise the pairs of a mega-batch with a `tokenizers.Tokenizer` (no special pieces)."""
    encodings = backend.encode_batch_fast([*first, *second], add_special_tokens=False)
    ids_per_sentence = [encoding.ids for encoding in encodings]
    # Exact duplicate detection on the piece sequence: equal pieces give equal embeddings, so this catches
    # every exact text duplicate and the ones that differ only in case or spacing.
    groups: dict[tuple[int, ...], int] = {}
    keys = np.fromiter(
        (groups.setdefault(tuple(ids), len(groups)) for ids in ids_per_sentence),
        dtype=np.int64,
        count=len(ids_per_sentence),
    )
    lengths = np.fromiter(map(len, ids_per_sentence), dtype=np.int64, count=len(ids_per_sentence))
    flat = np.fromiter((i for ids in ids_per_sentence for i in ids), dtype=np.int64, count=int(lengths.sum()))
    starts = np.zeros_like(lengths)
    np.cumsum(lengths[:-1], out=starts[1:])
    return MegaBatch(
        torch.from_numpy(flat),
        torch.from_numpy(starts),
        torch.from_numpy(lengths),
        torch.from_numpy(keys),
        list(sizes),
    )


def _same_key_pairs(keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """All `(i, j)` with `keys[i] == keys[j]` (i == j included), built group by group without a 2N x 2N test."""
    order = torch.argsort(keys, stable=True)
    sorted_keys = keys[order]
    _, group_sizes = torch.unique_consecutive(sorted_keys, return_counts=True)
    group_starts = torch.cumsum(group_sizes, 0) - group_sizes
    size_of = torch.repeat_interleave(group_sizes, group_sizes)  # per sorted position
    start_of = torch.repeat_interleave(group_starts, group_sizes)
    rows = torch.repeat_interleave(order, size_of)
    # For sorted position p (group g), the columns are the members order[start_g : start_g + size_g].
    firsts = torch.cumsum(size_of, 0) - size_of
    within = torch.arange(int(size_of.sum()), device=keys.device) - torch.repeat_interleave(firsts, size_of)
    cols = order[torch.repeat_interleave(start_of, size_of) + within]
    return rows, cols


class MegaBatchMiner:
    """Picks hardest negatives inside a mega-batch and holds its annealed size schedule.

    Args:
        max_size: largest mega-batch, in mini-batches (`--megabatch-size`).
        anneal: M grows by 1 every `anneal` mini-batches, starting at 1 (`--megabatch-anneal`); 0 keeps M at
            `max_size` from the start.
        pool: "other-side" (candidates for a first side are second sides and vice versa) or "both-sides".
        chunk_rows: rows of the similarity matrix computed at once (bounds memory to chunk_rows x 2N floats).
    """

    def __init__(
        self,
        max_size: int = 100,
        anneal: int = 150,
        pool: str = "other-side",
        chunk_rows: int = 2048,
        mix_rate: float = 0.0,
    ):
        if max_size < 1:
            raise ValueError(f"max_size must be >= 1, got {max_size}")
        if anneal < 0:
            raise ValueError(f"anneal must be >= 0, got {anneal}")
        if pool not in ("other-side", "both-sides"):
            raise ValueError(f"pool must be 'other-side' or 'both-sides', got {pool!r}")
        self.max_size = max_size
        self.anneal = anneal
        self.pool = pool
        self.chunk_rows = chunk_rows
        if not 0.0 <= mix_rate <= 1.0:
            raise ValueError(f"mix_rate must be in [0, 1], got {mix_rate}")
        # MIX: the share of anchors whose negative is a random allowed candidate instead of the hardest.
        self.mix_rate = mix_rate
        self.generator = torch.Generator()
        self.last_teacher_masked = 0  # candidates removed by the teacher threshold in the last mine() call

    def reseed(self, seed: int, step: int) -> None:
        """Seed MIX's random choices from (seed, step), so that a resumed run draws the same negatives."""
        self.generator.manual_seed((seed * 1_000_003 + step * 7919 + 17) % 2**62)

    def size_at(self, step: int) -> int:
        """M for a mega-batch gathered after `step` mini-batches: 1 + step // anneal, capped."""
        if self.anneal == 0:
            return self.max_size
        return min(self.max_size, 1 + step // self.anneal)

    @torch.no_grad()
    def mine(
        self,
        embeddings: torch.Tensor,
        keys: torch.Tensor,
        first_side_only: bool = False,
        teacher: torch.Tensor | None = None,
        teacher_threshold: float | None = None,
    ) -> torch.Tensor:
        """Index of each sentence's negative among the 2N sentences, or `NO_NEGATIVE` (-1) if none is allowed.

        `embeddings` is `(2N, dim)` in the mega-batch layout; `keys` marks sentences with equal pieces.
        `first_side_only` mines for the first sides only (one-sided loss); second sides get `NO_NEGATIVE`.
        `teacher` (`(2N, teacher_dim)`, NaN rows for sentences without a label) with `teacher_threshold` removes
        every candidate whose teacher cosine with the anchor is >= the threshold.
        """
        total = embeddings.shape[0]
        if total % 2:
            raise ValueError(f"a mega-batch holds 2N sentences, got {total}")
        n = total // 2
        device = embeddings.device
        unit = torch.nn.functional.normalize(embeddings.float(), dim=1)
        partner = torch.cat([torch.arange(n, total, device=device), torch.arange(0, n, device=device)])

        # Forbidden (anchor, candidate) entries: same pieces as the anchor or as the anchor's partner.
        rows, cols = _same_key_pairs(keys.to(device))
        forbidden_rows = torch.cat([rows, partner[rows]])
        forbidden_cols = torch.cat([cols, cols])
        order = torch.argsort(forbidden_rows)
        forbidden_rows, forbidden_cols = forbidden_rows[order], forbidden_cols[order]
        row_pointer = torch.zeros(total + 1, dtype=torch.long, device=device)
        row_pointer[1:] = torch.cumsum(torch.bincount(forbidden_rows, minlength=total), 0)
        row_pointer = row_pointer.tolist()

        use_teacher = teacher is not None and teacher_threshold is not None
        if use_teacher:
            teacher = teacher.to(device=device, dtype=torch.float32)
            labelled = ~torch.isnan(teacher).any(dim=1)
            # Unlabelled rows become zero vectors and are masked out explicitly (a threshold <= 0 would catch
            # a zero cosine otherwise).
            teacher_unit = torch.nn.functional.normalize(torch.nan_to_num(teacher, nan=0.0), dim=1)
        self.last_teacher_masked = 0
        negatives = torch.full((total,), NO_NEGATIVE, dtype=torch.long, device=device)
        sides = ((0, n),) if first_side_only else ((0, n), (n, total))
        for side_start, side_end in sides:
            if self.pool == "both-sides":
                pool_start, pool_end = 0, total
            else:  # the other side
                pool_start, pool_end = (n, total) if side_start == 0 else (0, n)
            candidates = unit[pool_start:pool_end]
            for row_start in range(side_start, side_end, self.chunk_rows):
                row_end = min(side_end, row_start + self.chunk_rows)
                scores = unit[row_start:row_end] @ candidates.T
                lo, hi = row_pointer[row_start], row_pointer[row_end]
                block_rows = forbidden_rows[lo:hi] - row_start
                block_cols = forbidden_cols[lo:hi] - pool_start
                inside = (block_cols >= 0) & (block_cols < pool_end - pool_start)
                scores[block_rows[inside], block_cols[inside]] = -torch.inf
                if use_teacher:
                    paraphrase = (teacher_unit[row_start:row_end] @ teacher_unit[pool_start:pool_end].T) >= (
                        teacher_threshold
                    )
                    paraphrase &= labelled[row_start:row_end, None] & labelled[None, pool_start:pool_end]
                    paraphrase &= ~torch.isneginf(scores)  # count only candidates not already excluded
                    self.last_teacher_masked += int(paraphrase.sum())
                    scores[paraphrase] = -torch.inf
                if self.mix_rate > 0:
                    scores = self._mix(scores)
                best_scores, best = scores.max(dim=1)
                chosen = best + pool_start
                negatives[row_start:row_end] = torch.where(
                    torch.isneginf(best_scores), torch.full_like(chosen, NO_NEGATIVE), chosen
                )
        return negatives

    def _mix(self, scores: torch.Tensor) -> torch.Tensor:
        """Rows drawn with probability `mix_rate` get random scores on their allowed candidates (a random pick)."""
        random_rows = torch.rand(scores.shape[0], generator=self.generator) < self.mix_rate
        noise = torch.rand(scores.shape, generator=self.generator).to(scores.device)
        mixed = torch.where(torch.isneginf(scores), scores, noise)
        return torch.where(random_rows.to(scores.device)[:, None], mixed, scores)


def make_miner(args) -> MegaBatchMiner:
    """The miner `TrainingArguments` ask for: mega-batch hardest (P-SP, ParaNMT), MAX or MIX (ICLR 2016)."""
    pool = args.resolved_negatives()
    if args.negative_selection == "megabatch":
        return MegaBatchMiner(args.megabatch_size, args.megabatch_anneal, pool=pool)
    return MegaBatchMiner(1, 0, pool=pool, mix_rate=0.5 if args.negative_selection == "mix" else 0.0)
