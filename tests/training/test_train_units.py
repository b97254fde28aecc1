"""Units of training: loss, clipping, lazy Adam, the trainable encoder, config files and the pair stream."""

import argparse
import json

import pytest
import torch

from psp_hf import PSPConfig, PSPModel
from psp_hf.errors import PSPInputError
from psp_hf.training.arguments.training_arguments import TrainingArguments, add_arguments, arguments_from_namespace
from psp_hf.training.loop.miner import tokenize_megabatch
from psp_hf.training.loop.optimizer import LazyAdam, clip_grad_norm
from psp_hf.training.losses.margin import margin_loss
from psp_hf.training.model.trainable import TrainingEncoder

SENTENCES = [
    "a man plays a guitar on the street",
    "a woman is riding a red bike",
    "two dogs run through the snow",
    "a child eats an apple in the park",
    "people are dancing at a wedding",
    "a boy jumps into a lake",
    "an old man reads a newspaper",
    "the girl is painting a fence",
    "a cat sleeps on a warm sofa",
    "workers repair the road at night",
]


@pytest.fixture(scope="module")
def tokenizer():
    from psp_hf.tokenization.pieces import train_tokenizer

    return train_tokenizer(SENTENCES * 5, vocab_size=60)


# ------------------------------------------------------------------------------------------------ loss
def test_margin_loss_matches_hand_computation():
    first = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    second = torch.tensor([[1.0, 1.0], [0.0, 1.0]])
    first_negative = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    second_negative = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    cos_pos = torch.tensor([2**-0.5, 1.0])
    side1 = torch.relu(0.4 - cos_pos + torch.tensor([0.0, 0.0])).mean()
    side2 = torch.relu(0.4 - cos_pos + torch.tensor([2**-0.5, 1.0])).mean()
    two_sided = margin_loss(first, second, first_negative, second_negative, margin=0.4)
    one_sided = margin_loss(first, second, first_negative, None, margin=0.4)
    assert two_sided.item() == pytest.approx((side1 + side2).item(), abs=1e-6)
    assert one_sided.item() == pytest.approx(side1.item(), abs=1e-6)
    # A row without a negative is left out of its side's mean.
    masked = margin_loss(
        first, second, first_negative, second_negative, 0.4, torch.tensor([1.0, 1.0]), torch.tensor([0.0, 1.0])
    )
    assert masked.item() == pytest.approx((side1 + 0.4).item(), abs=1e-6)


# ------------------------------------------------------------------------------------------- clipping
def test_clip_grad_norm_counts_sparse_rows_once_and_scales():
    table = torch.nn.Parameter(torch.zeros(5, 2))
    # Row 1 appears twice in the uncoalesced gradient: its summed gradient is (3, 4).
    values = torch.tensor([[1.0, 2.0], [2.0, 2.0], [0.0, 0.0]])
    table.grad = torch.sparse_coo_tensor(torch.tensor([[1, 1, 3]]), values, (5, 2), check_invariants=True)
    dense = torch.nn.Parameter(torch.zeros(3))
    dense.grad = torch.tensor([0.0, 0.0, 12.0])
    norm = clip_grad_norm([table, dense], max_norm=6.5)
    assert norm.item() == pytest.approx(13.0)  # sqrt(3^2 + 4^2 + 12^2)
    assert table.grad.to_dense()[1].tolist() == pytest.approx([1.5, 2.0], abs=1e-5)
    assert dense.grad.tolist() == pytest.approx([0.0, 0.0, 6.0], abs=1e-5)
    # Under the limit nothing changes.
    assert clip_grad_norm([dense], max_norm=100).item() == pytest.approx(6.0, abs=1e-5)
    assert dense.grad[2].item() == pytest.approx(6.0, abs=1e-5)


# ------------------------------------------------------------------------------------------- lazy Adam
def test_lazy_adam_matches_sparse_adam():
    torch.manual_seed(0)
    start = torch.randn(20, 4)
    ours = torch.nn.Parameter(start.clone())
    reference = torch.nn.Parameter(start.clone())
    lazy, sparse_adam = LazyAdam([ours], lr=0.01), torch.optim.SparseAdam([reference], lr=0.01)
    for step in range(5):
        rows = torch.tensor([[step, 3, 7, 3]])  # an uncoalesced gradient, rows change between steps
        values = torch.randn(4, 4)
        for parameter in (ours, reference):
            parameter.grad = torch.sparse_coo_tensor(rows, values, (20, 4), check_invariants=True)
        lazy.step()
        sparse_adam.step()
    assert torch.allclose(ours, reference, atol=1e-6)
    untouched = [r for r in range(20) if r not in (0, 1, 2, 3, 4, 7)]
    assert torch.equal(ours.data[untouched], start[untouched])  # rows never in a batch are never written
    restored = LazyAdam([torch.nn.Parameter(start.clone())], lr=0.01)
    restored.load_state_dict(lazy.state_dict())
    assert float(restored.state_dict()["state"][0]["step"]) == 5


# ---------------------------------------------------------------------------------------- the encoder
@pytest.mark.parametrize("use_piece_weights", [False, True])
def test_training_encoder_equals_model_embed_and_its_gradient(use_piece_weights):
    torch.manual_seed(0)
    model = PSPModel(PSPConfig(vocab_size=30, hidden_size=6, use_piece_weights=use_piece_weights))
    if use_piece_weights:
        model.piece_weights.data = torch.rand(30) + 0.5
    flat = torch.tensor([0, 4, 4, 9, 0, 0, 12, 3, 3, 3])  # piece 0 is unknown; bag 1 holds only unknowns
    offsets = torch.tensor([0, 4, 6])
    reference = model.embed(flat, offsets)
    reference.pow(2).sum().backward()
    dense_grad = model.embeddings.weight.grad.clone()
    model.zero_grad()
    model.embeddings.sparse = True
    encoder = TrainingEncoder(model).train()
    ours = encoder(flat, offsets)
    assert torch.allclose(ours, reference, atol=1e-6)
    ours.pow(2).sum().backward()
    assert model.embeddings.weight.grad.is_sparse
    assert torch.allclose(model.embeddings.weight.grad.to_dense(), dense_grad, atol=1e-5)


def test_piece_dropout_zeroes_pieces_and_is_reproducible():
    torch.manual_seed(0)
    model = PSPModel(PSPConfig(vocab_size=10, hidden_size=64))
    encoder = TrainingEncoder(model, dropout=0.5).train()
    flat, offsets = torch.tensor([1, 2, 3, 4]), torch.tensor([0])
    outputs = []
    for _ in range(2):
        encoder.generator = torch.Generator().manual_seed(123)
        outputs.append(encoder(flat, offsets))
    assert torch.equal(outputs[0], outputs[1])  # same seed, same mask: a resumed run draws the same
    assert not torch.allclose(outputs[0], model.embed(flat, offsets))
    assert torch.allclose(encoder.eval()(flat, offsets), model.embed(flat, offsets))  # no dropout outside training


# -------------------------------------------------------------------------------- duplicate detection
def test_megabatch_keys_mark_sentences_with_equal_pieces(tokenizer):
    megabatch = tokenize_megabatch(
        tokenizer.backend_tokenizer,
        ["A man plays a guitar", "two dogs run"],
        ["a man plays  a guitar", "A man plays a guitar"],
        [2],
    )
    keys = megabatch.keys.tolist()
    assert keys[0] == keys[2] == keys[3]  # case and spacing differences tokenise to the same pieces
    assert keys[1] != keys[0]
    assert megabatch.n_pairs == 2 and megabatch.lengths.sum().item() == megabatch.flat_ids.numel()


# ------------------------------------------------------------------------------------------- settings
def parse(argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return arguments_from_namespace(parser.parse_args(argv))


def test_config_file_and_flags(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("data: pairs.tsv\noutput-dir: out\ndim: 300\nmegabatch_size: 20\nlr: 0.002\n")
    args = parse(["--config", str(config), "--dim", "64"])
    assert (args.data, args.output_dir, args.dim, args.megabatch_size, args.lr) == (["pairs.tsv"], "out", 64, 20, 0.002)
    assert args.batch_size == 128 and args.margin == 0.4 and args.megabatch_anneal == 150  # the paper's defaults
    json_config = tmp_path / "run.json"
    json_config.write_text(json.dumps({"data": ["a.tsv"], "output_dir": "o", "one_sided": True}))
    assert parse(["--config", str(json_config), "--no-one-sided"]).one_sided is False


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("data: a.tsv\noutput_dir: o\nbatchsize: 3\n", "unknown setting 'batchsize'"),
        ("data: a.tsv\noutput_dir: o\ndim: big\n", "'dim' must be int"),
        ("data: a.tsv\noutput_dir: o\ndropout: 1.5\n", "--dropout"),
        ("- just\n- a list\n", "mapping"),
    ],
)
def test_bad_config_is_named(tmp_path, content, message):
    config = tmp_path / "bad.yaml"
    config.write_text(content)
    with pytest.raises(PSPInputError, match=message):
        parse(["--config", str(config)])


def test_negatives_default_to_the_other_side():
    assert TrainingArguments(data=["x"], output_dir="o").resolved_negatives() == "other-side"
    bitext = TrainingArguments(data=["x"], output_dir="o", lang="de")
    assert bitext.resolved_kind() == "bitext" and bitext.resolved_negatives() == "other-side"
    assert TrainingArguments(data=["x"], output_dir="o", negatives="both-sides").resolved_negatives() == "both-sides"


# ------------------------------------------------------------------------------------------ the stream
def write_pairs(path, n, header="id\tsentence1\tsentence2"):
    rows = [header] + [f"{i}\tfirst sentence {i}\tsecond sentence {i}" for i in range(n)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_stream_formats_and_columns(tmp_path):
    from psp_hf.training.data.pairs import PairSource

    tsv = write_pairs(tmp_path / "pairs.tsv", 5)
    source = PairSource([str(tsv)])
    assert (source.first_column, source.second_column) == ("sentence1", "sentence2")
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text("".join(json.dumps({"de": f"satz {i}", "en": f"sentence {i}", "n": i}) + "\n" for i in range(4)))
    bitext = PairSource([str(jsonl)], lang="de")
    assert (bitext.first_column, bitext.second_column) == ("de", "en")
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = tmp_path / "pairs.parquet"
    pq.write_table(pa.table({"a": ["x", "y"], "b": ["z", "w"]}), parquet)
    assert (PairSource([str(parquet)]).first_column, PairSource([str(parquet)], columns=["b", "a"]).first_column) == (
        "a",
        "b",
    )
    # A datasets folder, the layout `psp prepare` writes (data/train-*.parquet), bitext columns <lang>, en.
    folder = tmp_path / "prepared"
    (folder / "data").mkdir(parents=True)
    pq.write_table(
        pa.table({"de": ["ein hund", "eine katze"], "en": ["a dog", "a cat"]}),
        folder / "data" / "train-00000-of-00001.parquet",
    )
    prepared = PairSource([str(folder)], lang="de")
    assert (prepared.first_column, prepared.second_column) == ("de", "en")
    assert list(prepared.texts(10)) == ["ein hund", "a dog", "eine katze", "a cat"]
    with pytest.raises(PSPInputError, match="nope not in"):
        PairSource([str(tsv)], columns=["nope", "sentence2"])
    with pytest.raises(PSPInputError, match="no such file"):
        PairSource([str(tmp_path / "missing.tsv")])
    three = tmp_path / "three.tsv"
    three.write_text("x\ty\tz\n1\t2\t3\n")
    with pytest.raises(PSPInputError, match="pass --columns"):
        PairSource([str(three)])


def test_stream_skips_blank_rows_resumes_exactly_and_splits_across_processes(tmp_path):
    from psp_hf.training.data.pairs import PairSource, PairStream

    path = write_pairs(tmp_path / "pairs.tsv", 103)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("103\t \tonly one side\n")
    source = PairSource([str(path)])
    stream = PairStream(source, batch_size=10, shuffle_buffer=32, seed=3)
    batches = list(stream.minibatches(epoch=0))
    firsts = [text for batch in batches for text in batch.first]
    assert len(firsts) == 103 and len(set(firsts)) == 103  # every valid pair once; the blank one skipped
    assert [len(batch) for batch in batches] == [10] * 10 + [3]
    assert firsts != sorted(firsts, key=lambda t: int(t.split()[-1]))  # shuffled
    # Continuing after the 4th batch's position gives exactly the remaining batches.
    resumed = list(stream.minibatches(epoch=0, skip=batches[3].position))
    assert [b.first for b in resumed] == [b.first for b in batches[4:]]
    # Another epoch, another order.
    assert [b.first for b in stream.minibatches(epoch=1)] != [b.first for b in batches]
    # Two processes: disjoint shares that cover the data.
    shares = [
        [t for b in PairStream(source, 10, 32, seed=3, rank=r, world_size=2).minibatches(0) for t in b.first]
        for r in (0, 1)
    ]
    assert not set(shares[0]) & set(shares[1]) and len(shares[0]) + len(shares[1]) == 103
