"""Mega-batch negative mining on hand-built embeddings, and its annealing schedule."""

import numpy as np
import pytest
import torch

from psp_hf.training.loop.miner import NO_NEGATIVE, MegaBatchMiner, gather_bags


def unit(*rows):
    return torch.nn.functional.normalize(torch.tensor(rows, dtype=torch.float32), dim=1)


def distinct_keys(n):
    return torch.arange(n)


def test_partner_is_never_the_negative_even_when_closest():
    # Two pairs; every sentence is closest to its own partner, second closest to the other pair.
    embeddings = unit([1.0, 0.0], [0.0, 1.0], [0.99, 0.1], [0.1, 0.99])  # first sides 0,1; second sides 2,3
    negatives = MegaBatchMiner(pool="other-side").mine(embeddings, distinct_keys(4))
    # first side 0: candidates are second sides {2 (partner), 3} -> 3; first side 1 -> 2; second sides mirror.
    assert negatives.tolist() == [3, 2, 1, 0]


def test_duplicate_of_the_partner_is_excluded():
    # Pair 0 = (A, B); pair 1 = (C, B') where B' has the same pieces as B. For A, B' is the most similar
    # non-partner candidate but must be skipped: the next best, pair 2's second side, is chosen instead.
    embeddings = unit(
        [1.0, 0.0, 0.0],
        [0.0, 0.0, 1.0],
        [0.0, 1.0, 0.0],  # first sides A, C, E
        [0.9, 0.1, 0.0],
        [0.9, 0.1, 0.0],
        [0.6, 0.4, 0.3],  # second sides B, B' (= B), F
    )
    keys = torch.tensor([0, 1, 2, 3, 3, 5])
    negatives = MegaBatchMiner(pool="other-side").mine(embeddings, keys)
    assert negatives[0].item() == 5
    # B' (index 4) is the partner of C; B is B''s duplicate, so C cannot get B either.
    assert negatives[1].item() == 5


def test_duplicate_of_the_anchor_is_excluded_in_both_sides_pool():
    # With both sides pooled, a copy of the anchor elsewhere in the mega-batch has cosine 1: never chosen.
    embeddings = unit([1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.7, 0.7], [0.2, 0.9], [0.5, 0.6])
    keys = torch.tensor([7, 7, 8, 9, 10, 11])  # sentences 0 and 1 have the same pieces
    negatives = MegaBatchMiner(pool="both-sides").mine(embeddings, keys)
    assert negatives[0].item() not in (0, 1, 3)  # itself, its duplicate, its partner
    assert negatives[0].item() == 5  # the most similar remaining sentence, from the second side
    assert negatives[1].item() == 3  # sentence 1's partner is 4, so 3 (the closest left) is allowed


def test_bitext_negatives_come_from_the_other_side():
    torch.manual_seed(0)
    n = 40
    embeddings = torch.randn(2 * n, 8)
    # Make each first side nearly identical to another first side: a same-side pool would pick it.
    embeddings[1:n:2] = embeddings[0:n:2] + 0.01
    negatives = MegaBatchMiner(pool="other-side").mine(embeddings, distinct_keys(2 * n))
    assert (negatives[:n] >= n).all() and (negatives[n:] < n).all()
    both = MegaBatchMiner(pool="both-sides").mine(embeddings, distinct_keys(2 * n))
    assert (both[:n] < n).sum() > n // 2  # the near copies on the same side win when allowed


def brute_force(embeddings, keys, pool):
    total = embeddings.shape[0]
    n = total // 2
    unit_rows = torch.nn.functional.normalize(embeddings, dim=1)
    scores = (unit_rows @ unit_rows.T).numpy()
    out = []
    for i in range(total):
        partner = (i + n) % total
        other_side = range(n, total) if i < n else range(n)
        candidates = other_side if pool == "other-side" else range(total)
        best, best_score = NO_NEGATIVE, -np.inf
        for j in candidates:
            if keys[j] in (keys[i], keys[partner]):
                continue
            if scores[i, j] > best_score:
                best, best_score = j, scores[i, j]
        out.append(best)
    return out


@pytest.mark.parametrize("pool", ["other-side", "both-sides"])
def test_vectorised_miner_matches_a_per_row_reference_across_chunks(pool):
    torch.manual_seed(1)
    n = 50
    embeddings = torch.randn(2 * n, 16)
    keys = torch.randint(0, 60, (2 * n,))  # plenty of duplicate groups
    expected = brute_force(embeddings, keys.tolist(), pool)
    for chunk_rows in (7, 2048):  # several chunks, then one
        got = MegaBatchMiner(pool=pool, chunk_rows=chunk_rows).mine(embeddings, keys)
        assert got.tolist() == expected


def test_no_candidate_left_gives_no_negative():
    # One pair whose two sides are the only sentences: nothing may be its negative.
    negatives = MegaBatchMiner(pool="both-sides").mine(unit([1.0, 0.0], [0.0, 1.0]), distinct_keys(2))
    assert negatives.tolist() == [NO_NEGATIVE, NO_NEGATIVE]
    # Two pairs that are all copies of one sentence: nothing either.
    negatives = MegaBatchMiner(pool="other-side").mine(unit(*[[1.0, 0.0]] * 4), torch.zeros(4, dtype=torch.long))
    assert negatives.tolist() == [NO_NEGATIVE] * 4


def test_first_side_only_mines_first_sides():
    embeddings = unit([1.0, 0.0], [0.0, 1.0], [0.99, 0.1], [0.1, 0.99])
    negatives = MegaBatchMiner(pool="other-side").mine(embeddings, distinct_keys(4), first_side_only=True)
    assert negatives.tolist() == [3, 2, NO_NEGATIVE, NO_NEGATIVE]


def test_annealing_schedule():
    miner = MegaBatchMiner(max_size=100, anneal=150)
    assert [miner.size_at(step) for step in (0, 149, 150, 299, 300, 1499, 1500)] == [1, 1, 2, 2, 3, 10, 11]
    assert miner.size_at(150 * 99) == 100 and miner.size_at(10**7) == 100  # capped at --megabatch-size
    assert MegaBatchMiner(max_size=20, anneal=0).size_at(0) == 20  # no annealing: full size at once
    with pytest.raises(ValueError):
        MegaBatchMiner(max_size=0)


def test_gather_bags_returns_the_chosen_sentences_pieces():
    flat = torch.tensor([5, 6, 7, 8, 9, 10])
    starts = torch.tensor([0, 3, 4])
    lengths = torch.tensor([3, 1, 2])  # sentences [5,6,7], [8], [9,10]
    ids, offsets = gather_bags(flat, starts, lengths, torch.tensor([2, 0, 2, 1]))
    assert ids.tolist() == [9, 10, 5, 6, 7, 9, 10, 8]
    assert offsets.tolist() == [0, 2, 5, 7]
