"""`psp convert-original`: a checkpoint in the authors' format becomes a psp model that embeds like the original.

The checkpoint is written here in that format (a torch.save'd dict with `state_dict`, a frequency-ordered
piece-string `vocab` with entries the sentencepiece model does not know, `args`, `optimizer`, `epoch`), and
the original algorithm is re-implemented in a few lines as the reference: lowercase, sentencepiece pieces,
look each piece string up, drop the ones the vocabulary lacks (`zero_unk`), fall back to the unknown row,
average.
"""

from __future__ import annotations

import argparse
import io
import random

import numpy as np
import pytest
import torch

from psp_hf.cli import main
from psp_hf.encoder import PSPEncoder
from psp_hf.errors import PSPInputError
from psp_hf.hub.convert_original import ORIGINAL_UNK, convert_original_checkpoint

spm = pytest.importorskip("sentencepiece")

CORPUS = [
    "A man is playing a guitar on the street.",
    "Two dogs are running through a green field.",
    "A woman slices an onion in the kitchen.",
    "Children play football in the park after school.",
    "The old man reads a newspaper on a bench.",
    "A girl in a red dress jumps over a puddle.",
] * 20
DIM = 6
# Pieces left out of the checkpoint's vocabulary on purpose (they must get the unknown row).
LEFT_OUT = 3


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    """An sp model with the sentencepiece defaults the authors used, and a checkpoint in their format."""
    folder = tmp_path_factory.mktemp("original")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(line.lower() for line in CORPUS), model_writer=model, model_type="unigram",
        vocab_size=80, hard_vocab_limit=False, minloglevel=2,
    )  # fmt: skip
    sp_path = folder / "spm.model"
    sp_path.write_bytes(model.getvalue())
    processor = spm.SentencePieceProcessor(model_file=str(sp_path))
    assert processor.id_to_piece(0) == "<unk>" and processor.pad_id() == -1  # the defaults: no pad piece

    rng = random.Random(0)
    # The vocabulary is counted from training text: real pieces, surface forms sentencepiece passes through
    # (characters outside its model) and the unknown entry, in an order that is not the sentencepiece ids.
    pieces = [processor.id_to_piece(i) for i in range(3, processor.get_piece_size())]
    rng.shuffle(pieces)
    left_out, kept = pieces[:LEFT_OUT], pieces[LEFT_OUT:]
    strings = kept + ["☃", "▁Zebra", "é", ORIGINAL_UNK]
    rng.shuffle(strings)
    vocab = {piece: row for row, piece in enumerate(strings)}
    torch.manual_seed(0)
    table = torch.randn(len(vocab), DIM)
    args = argparse.Namespace(
        model="avg", pool="mean", dim=DIM, zero_unk=1, lower_case=1, tokenize=0, share_vocab=1, ngrams=0,
    )  # fmt: skip
    checkpoint = {
        "state_dict": {"embedding.weight": table},
        "vocab": vocab,
        "vocab_fr": None,
        "args": args,
        "optimizer": {"state": {}, "param_groups": [{"lr": 0.001, "params": [0]}]},
        "epoch": 3,
    }
    checkpoint_path = folder / "model.pt"
    torch.save(checkpoint, checkpoint_path)
    return {"sp": sp_path, "checkpoint": checkpoint_path, "processor": processor, "vocab": vocab,
            "table": table, "left_out": left_out}  # fmt: skip


def original_embed(original, sentence: str) -> np.ndarray:
    """The original code's embedding of one sentence (zero_unk=1, mean pooling)."""
    vocab, table = original["vocab"], original["table"]
    rows = [vocab[piece] for piece in original["processor"].encode(sentence.strip().lower(), out_type=str)
            if piece in vocab]  # fmt: skip
    if not rows:
        rows = [vocab[ORIGINAL_UNK]]
    return table[rows].mean(dim=0).numpy()


def test_converted_model_embeds_like_the_original(original):
    encoder, report = convert_original_checkpoint(original["checkpoint"], original["sp"], trust_pickle=True)
    processor = original["processor"]
    assert report.checkpoint_rows == len(original["vocab"])
    assert sorted(report.missing_pieces) == sorted(original["left_out"])
    # Rows that are not sentencepiece pieces are dropped (the unknown entry maps onto the unk piece instead).
    assert sorted(report.dropped_rows) == sorted(["☃", "▁Zebra", "é"])
    assert report.sentencepiece_pieces == processor.get_piece_size() + 1  # plus the appended pad piece
    left_out = set(original["left_out"])
    sentences = [
        "A man is playing a guitar.",
        "Two girls read in the park!",
        "the ♫ dog runs ♫♫",  # characters outside both vocabularies: dropped, as with zero_unk
        "♫♫",  # nothing else: the unknown row
        "",
        "Ein Mann spielt Gitarre.",
    ]
    usable = [s for s in sentences if not left_out & set(processor.encode(s.lower(), out_type=str))]
    assert len(usable) >= 5
    expected = np.stack([original_embed(original, s) for s in usable])
    np.testing.assert_allclose(encoder.encode(usable), expected, atol=1e-6)


def test_piece_missing_from_checkpoint_gets_the_unknown_row(original):
    encoder, _ = convert_original_checkpoint(original["checkpoint"], original["sp"], trust_pickle=True)
    piece = original["left_out"][0]
    piece_id = encoder.tokenizer.convert_tokens_to_ids(piece)
    unk_row = original["table"][original["vocab"][ORIGINAL_UNK]]
    torch.testing.assert_close(encoder.model.embeddings.weight[piece_id].detach(), unk_row)
    # Rows are looked up by string: a known piece's row is the checkpoint row of that string, not of its id.
    known = next(p for p in original["vocab"] if p.startswith("▁") and p in encoder.tokenizer.get_vocab())
    torch.testing.assert_close(
        encoder.model.embeddings.weight[encoder.tokenizer.convert_tokens_to_ids(known)].detach(),
        original["table"][original["vocab"][known]],
    )


def test_cli_writes_a_loadable_folder_and_keeps_existing_output(original, tmp_path, capsys):
    out = tmp_path / "converted"
    argv = ["convert-original", "--checkpoint", str(original["checkpoint"]), "--sp-model", str(original["sp"]),
            "-o", str(out), "--trust-pickle"]  # fmt: skip
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"pieces missing from the checkpoint, given its unknown row: {LEFT_OUT}" in err
    loaded = PSPEncoder.from_pretrained(out)
    assert (out / "sentencepiece.model").read_bytes() == original["sp"].read_bytes()
    assert (out / "modules.json").is_file()
    sentence = "A man is playing a guitar."
    np.testing.assert_allclose(loaded.encode([sentence])[0], original_embed(original, sentence), atol=1e-6)

    # A second run must not clobber the folder unless asked to.
    before = (out / "model.safetensors").read_bytes()
    assert main(argv) == 2
    assert "exists and is not empty; pass --overwrite" in capsys.readouterr().err
    assert (out / "model.safetensors").read_bytes() == before
    assert main([*argv, "--overwrite", "-q"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["converted"]  # no staging folders left behind


def test_bad_inputs_name_the_argument(original, tmp_path):
    with pytest.raises(PSPInputError, match="--sp-model .*no such file"):
        convert_original_checkpoint(original["checkpoint"], tmp_path / "missing.model", trust_pickle=True)
    not_a_checkpoint = tmp_path / "junk.pt"
    torch.save({"weights": torch.zeros(2)}, not_a_checkpoint)
    with pytest.raises(PSPInputError, match="expected the original P-SP format"):
        convert_original_checkpoint(not_a_checkpoint, original["sp"], trust_pickle=True)
    lstm = tmp_path / "lstm.pt"
    checkpoint = torch.load(original["checkpoint"], weights_only=False)
    checkpoint["args"].model = "lstm"
    torch.save(checkpoint, lstm)
    with pytest.raises(PSPInputError, match="only averaging models"):
        convert_original_checkpoint(lstm, original["sp"], trust_pickle=True)
    with pytest.raises(PSPInputError, match="no second table"):
        convert_original_checkpoint(original["checkpoint"], original["sp"], side="second", trust_pickle=True)


def test_a_pickle_is_read_only_with_trust_pickle(original, tmp_path, capsys):
    out = tmp_path / "converted"
    argv = ["convert-original", "--checkpoint", str(original["checkpoint"]), "--sp-model", str(original["sp"]),
            "-o", str(out)]  # fmt: skip
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"psp: error: --checkpoint {original['checkpoint']}:")
    assert "can run code" in lines[0] and "pass --trust-pickle" in lines[0]  # why, and how
    assert not out.exists()
    with pytest.raises(PSPInputError, match="pass --trust-pickle"):
        convert_original_checkpoint(original["checkpoint"], original["sp"])

    # With the flag, a checkpoint holding an object beyond tensors and the namespace is unpickled in full.
    odd = tmp_path / "odd.pt"
    checkpoint = torch.load(original["checkpoint"], weights_only=False)
    checkpoint["extra"] = io.StringIO("not a tensor")
    torch.save(checkpoint, odd)
    encoder, _ = convert_original_checkpoint(odd, original["sp"], trust_pickle=True)
    assert encoder.dim == DIM
    garbled = tmp_path / "garbled.pt"
    garbled.write_bytes(original["checkpoint"].read_bytes()[:100])
    with pytest.raises(PSPInputError, match="not a readable torch checkpoint"):
        convert_original_checkpoint(garbled, original["sp"], trust_pickle=True)
