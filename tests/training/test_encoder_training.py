"""Training options of the papers' other encoders on tiny inputs: scrambling, MAX/MIX negatives, lambda_w,
the PPDB reader, and a short run of a recurrent WORD,TRIGRAM model through `psp train` that resumes exactly."""

import argparse
import gzip

import numpy as np
import pytest
import torch

import psp_hf
from psp_hf.errors import PSPInputError
from psp_hf.modeling import PSPConfig, PSPModel
from psp_hf.training.arguments.training_arguments import TrainingArguments, add_arguments, arguments_from_namespace
from psp_hf.training.loop.miner import NO_NEGATIVE, MegaBatchMiner, make_miner
from psp_hf.training.model.architectures import configure_training_encoder, scramble_bags, train_embed
from psp_hf.training.model.trainable import TrainingEncoder


# ------------------------------------------------------------------------------------------ scrambling
def test_scrambling_permutes_inside_bags_only():
    ids = torch.arange(40)
    offsets = torch.tensor([0, 10, 30])  # bags of 10, 20 and 10
    generator = torch.Generator().manual_seed(0)
    assert torch.equal(scramble_bags(ids, offsets, 0.0, generator), ids)
    shuffled = scramble_bags(ids, offsets, 1.0, generator)
    for start, stop in [(0, 10), (10, 30), (30, 40)]:
        assert sorted(shuffled[start:stop].tolist()) == list(range(start, stop))  # same units, same bag
        assert shuffled[start:stop].tolist() != list(range(start, stop))  # the order did change
    rates = [not torch.equal(scramble_bags(ids, offsets, 0.3, generator)[10:30], ids[10:30]) for _ in range(300)]
    assert 0.2 < np.mean(rates) < 0.4  # each bag is scrambled with probability 0.3


# ------------------------------------------------------------------------------------------ MAX and MIX
def _pairs(n: int = 6, dim: int = 4, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    first = torch.randn(n, dim, generator=generator)
    embeddings = torch.cat([first, first + 0.1 * torch.randn(n, dim, generator=generator)])
    return embeddings, torch.arange(2 * n)


def test_max_takes_the_hardest_and_mix_takes_random_allowed_candidates():
    embeddings, keys = _pairs()
    n = 6
    hardest = MegaBatchMiner(1, 0).mine(embeddings, keys)
    unit = torch.nn.functional.normalize(embeddings, dim=1)
    scores = unit[:n] @ unit[n:].T
    scores.fill_diagonal_(-torch.inf)
    assert torch.equal(hardest[:n], scores.argmax(1) + n)
    mix = MegaBatchMiner(1, 0, mix_rate=1.0)
    picks = []
    for step in range(50):
        mix.reseed(0, step)
        negatives = mix.mine(embeddings, keys)
        assert bool((negatives != NO_NEGATIVE).all())
        assert bool((negatives[:n] != torch.arange(n) + n).all())  # never the anchor's own partner
        assert bool((negatives[:n] >= n).all())  # from the other side
        picks.append(negatives)
    assert len({tuple(p.tolist()) for p in picks}) > 10  # random, not always the hardest
    half = MegaBatchMiner(1, 0, mix_rate=0.5)
    agree = []
    for step in range(100):
        half.reseed(1, step)
        agree.append((half.mine(embeddings, keys) == hardest).float().mean().item())
    # Half the anchors keep the hardest; the random half hits it by chance 1/(n-1) of the time.
    assert 0.5 < np.mean(agree) < 0.7
    half.reseed(1, 7)
    again = half.mine(embeddings, keys)
    half.reseed(1, 7)
    assert torch.equal(again, half.mine(embeddings, keys))  # reseeding repeats the draw (resume)


def _args(*flags: str) -> TrainingArguments:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return arguments_from_namespace(parser.parse_args(["--data", "x.tsv", "-o", "out", *flags]))


def test_negative_selection_flag_builds_the_miner():
    assert make_miner(_args("--negative-selection", "max")).size_at(10_000) == 1
    assert make_miner(_args("--negative-selection", "mix")).mix_rate == 0.5
    assert make_miner(_args("--megabatch-size", "7", "--megabatch-anneal", "0")).size_at(0) == 7
    with pytest.raises(PSPInputError, match="--scramble-rate"):
        _args("--scramble-rate", "1.5")
    with pytest.raises(PSPInputError, match="pieces combine with pieces"):
        _args("--units", "piece", "--combination", "add", "--second-units", "word")
    with pytest.raises(PSPInputError, match="not with trigrams"):
        _args("--units", "trigram", "--init", "teacher")


# ------------------------------------------------------------------------------------------ lambda_w
def test_init_l2_penalty_is_the_squared_distance_of_the_looked_up_rows(tmp_path):
    torch.manual_seed(0)
    model = PSPModel(PSPConfig(vocab_size=10, hidden_size=3, encoder_type="gran"))
    module = TrainingEncoder(model).train()
    configure_training_encoder(module, _args("--init-l2", "0.5"), tmp_path, resuming=False)
    assert (tmp_path / "initial_tables.safetensors").is_file()
    with torch.no_grad():
        model.embeddings.weight[4] += 1.0  # one looked-up row moved by 1 in each of 3 dims
        model.embeddings.weight[9] += 5.0  # a row the batch does not use
    train_embed(module, torch.tensor([4, 5, 6, 4]), torch.tensor([0, 2]))
    assert module.l2_penalty.item() == pytest.approx(3.0)
    module.l2_penalty.backward()
    grad = model.embeddings.weight.grad.to_dense() if model.embeddings.weight.grad.is_sparse else None
    grad = grad if grad is not None else model.embeddings.weight.grad
    torch.testing.assert_close(grad[4], torch.full((3,), 2.0))  # d/dW ||W - W0||^2 = 2 (W - W0): toward W0
    # A resumed run pulls toward the saved initial table, not the one it resumes with.
    resumed = TrainingEncoder(model).train()
    configure_training_encoder(resumed, _args("--init-l2", "0.5"), tmp_path, resuming=True)
    torch.testing.assert_close(resumed.initial_tables[0][4], module.initial_tables[0][4])


# ------------------------------------------------------------------------------------------ PPDB
def test_ppdb_pairs_once_per_unordered_pair(tmp_path):
    from psp_hf.data.sources.ppdb import ppdb_pairs, write_ppdb_tsv

    source = tmp_path / "ppdb.txt.gz"
    with gzip.open(source, "wt", encoding="utf-8") as handle:
        handle.write("big large huge\nlarge big\n\nsmall small tiny\n")
    assert list(ppdb_pairs(source)) == [("big", "large"), ("big", "huge"), ("small", "tiny")]
    assert write_ppdb_tsv(source, tmp_path / "pairs.tsv") == 3
    assert (tmp_path / "pairs.tsv").read_text().splitlines()[:2] == ["sentence1\tsentence2", "big\tlarge"]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok fine\n\xff\xfe bad\n")
    with pytest.raises(PSPInputError, match="bad.txt:2"):
        list(ppdb_pairs(bad))


# ------------------------------------------------------------------------------------------ a short run
def test_recurrent_word_trigram_model_trains_saves_and_resumes(tmp_path, train_here):
    import random

    rng = random.Random(0)
    words = [
        "man",
        "woman",
        "dog",
        "cat",
        "plays",
        "runs",
        "park",
        "beach",
        "red",
        "ball",
        "guitar",
        "walks",
        "small",
        "big",
        "old",
        "young",
    ]
    lines = ["sentence1\tsentence2"]
    for _ in range(160):
        sentence = [rng.choice(words) for _ in range(rng.randint(3, 7))]
        other = sentence[:]
        rng.shuffle(other)
        lines.append(f"{' '.join(sentence)}\t{' '.join(other)}")
    data = tmp_path / "pairs.tsv"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    common = ["--data", str(data), "--units", "word", "--combination", "concat", "--second-units", "trigram",
              "--encoder-type", "gran", "--second-encoder-type", "mean", "--dim", "8", "--batch-size", "16",
              "--scramble-rate", "0.3", "--init-l2", "0.01", "--negative-selection", "mix", "--dev", "none",
              "--quiet", "--threads", "1", "--save-every", "4", "--keep", "last", "--seed", "3"]  # fmt: skip
    code, err = train_here(*common, "-o", str(tmp_path / "full"))
    assert code == 0, err
    full = psp_hf.load(tmp_path / "full")
    assert full.dim == 16 and type(full.model.head).__name__ == "SentenceHead"
    # The same run stopped after 4 steps and resumed ends with the same weights.
    code, err = train_here(*common, "-o", str(tmp_path / "part"), "--max-steps", "4")
    assert code == 0, err
    code, err = train_here(*common, "-o", str(tmp_path / "part"), "--resume")
    assert code == 0, err
    sentences = ["a man plays", "zzz unseen", ""]
    np.testing.assert_allclose(psp_hf.load(tmp_path / "part").encode(sentences), full.encode(sentences), atol=1e-6)


def test_word_vectors_initialise_word_units(tmp_path):
    from psp_hf.tokenization.pieces import wrap_fast_tokenizer
    from psp_hf.tokenization.units import build_units
    from psp_hf.training.model.initial_tables import word_vector_table

    tokenizer = wrap_fast_tokenizer(build_units(["the red dog", "a red cat"], "word").tokenizer)
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("2 3\nred 1 2 3\nDog 4 5 6\n", encoding="utf-8")
    found = word_vector_table(tokenizer, vectors, dim=3)
    assert found.covered == 2
    np.testing.assert_array_equal(found.table[tokenizer.convert_tokens_to_ids("red")], [1, 2, 3])
    np.testing.assert_array_equal(found.table[tokenizer.convert_tokens_to_ids("dog")], [4, 5, 6])


def test_init_l2_pulls_only_the_rows_copied_from_a_model(tmp_path):
    torch.manual_seed(0)
    model = PSPModel(PSPConfig(vocab_size=10, hidden_size=3))
    module = TrainingEncoder(model).train()
    configure_training_encoder(module, _args("--init-l2", "0.5"), tmp_path, resuming=False, pulled_rows=[4])
    with torch.no_grad():
        model.embeddings.weight[4] += 1.0  # copied from the English model: pulled back
        model.embeddings.weight[5] += 2.0  # a random row of the new language: free
    train_embed(module, torch.tensor([4, 5, 6, 4]), torch.tensor([0, 2]))
    assert module.l2_penalty.item() == pytest.approx(3.0)
    # A resumed run keeps the same rows pulled.
    resumed = TrainingEncoder(model).train()
    configure_training_encoder(resumed, _args("--init-l2", "0.5"), tmp_path, resuming=True)
    train_embed(resumed, torch.tensor([4, 5, 6, 4]), torch.tensor([0, 2]))
    assert resumed.l2_penalty.item() == pytest.approx(3.0)
