"""The papers' other encoders: GRAN and the recurrent heads, word/trigram units, combinations, and every type's
round trip through `AutoModel.from_pretrained(..., trust_remote_code=True)` in a fresh process."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import psp_hf
from psp_hf.encoder import PSPEncoder
from psp_hf.errors import PSPInputError
from psp_hf.modeling import PSPConfig, PSPModel
from psp_hf.modeling.encoders_psp import SentenceHead, codes_to_rows, unit_codes
from psp_hf.tokenization.pieces import train_tokenizer
from psp_hf.tokenization.units import build_units, model_for_units

CORPUS = [
    "a man plays a guitar on the street",
    "a woman is riding a red bike",
    "two dogs run through the snow",
    "a child eats an apple in the kitchen",
    "the old man reads a newspaper",
    "people walk along the beach at sunset",
] * 3
SENTENCES = ["A man plays a guitar.", "", "unseen wordz zzz", "two dogs run through the snow at sunset today"]


# ------------------------------------------------------------------------------------------ GRAN and heads
def test_gran_matches_its_definition_on_each_sentence_alone():
    torch.manual_seed(0)
    head = SentenceHead("gran", 3)
    vectors = torch.randn(5, 3)
    offsets = torch.tensor([0, 3])  # lengths 3 and 2: the batch is padded and packed
    batched = head(vectors, offsets)
    for bag, (start, stop) in enumerate([(0, 3), (3, 5)]):
        x = vectors[start:stop]
        states, _ = head.lstm(x.unsqueeze(0))  # one unpadded sequence
        gated = x * torch.sigmoid(head.gate_input(x) + head.gate_hidden(states[0]))
        torch.testing.assert_close(batched[bag], gated.mean(0))


@pytest.mark.parametrize("encoder_type", ["lstm", "blstm", "lstm_no_output_gate", "gran", "projection"])
def test_heads_ignore_padding(encoder_type):
    torch.manual_seed(1)
    head = SentenceHead(encoder_type, 4)
    vectors = torch.randn(7, 4)
    together = head(vectors, torch.tensor([0, 1, 5]))
    alone = torch.cat([head(vectors[a:b], torch.tensor([0])) for a, b in [(0, 1), (1, 5), (5, 7)]])
    torch.testing.assert_close(together, alone, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("encoder_type", ["lstm", "blstm", "gran"])
def test_packed_and_padded_runs_agree(encoder_type):
    # GPUs run packed sequences, CPUs one padded batch: both must give the same sentence vectors.
    torch.manual_seed(5)
    head = SentenceHead(encoder_type, 4)
    vectors, offsets = torch.randn(9, 4), torch.tensor([0, 2, 2, 8])  # an empty bag too
    head.pack = True
    packed = head(vectors, offsets)
    head.pack = False
    torch.testing.assert_close(head(vectors, offsets), packed)


def test_projection_starts_as_the_mean():
    head = SentenceHead("projection", 3)
    vectors = torch.randn(5, 3)
    torch.testing.assert_close(
        head(vectors, torch.tensor([0, 2])), torch.stack([vectors[:2].mean(0), vectors[2:].mean(0)])
    )


def test_lstm_without_output_gate_is_tanh_of_the_cell():
    torch.manual_seed(2)
    head = SentenceHead("lstm_no_output_gate", 2)
    x = torch.randn(1, 2)
    i, f, g = (head.lstm.input_map(x)).chunk(3, dim=1)  # h0 = 0: the hidden map adds nothing
    expected = torch.tanh(torch.sigmoid(i) * torch.tanh(g))
    torch.testing.assert_close(head(x, torch.tensor([0])), expected[0:1])


def test_blstm_averages_forward_and_backward_states():
    torch.manual_seed(3)
    head = SentenceHead("blstm", 2)
    x = torch.randn(3, 2)
    forward_states, _ = head.lstm(x.unsqueeze(0))
    backward_states, _ = head.lstm_backward(x.flip(0).unsqueeze(0))
    expected = ((forward_states[0] + backward_states[0].flip(0)) / 2).mean(0)
    torch.testing.assert_close(head(x, torch.tensor([0]))[0], expected)


# ------------------------------------------------------------------------------------------ units
def test_trigrams_and_words_from_characters():
    # ids: space 2; "ab c" = [5, 6, 2, 7] -> trigrams #ab, ab#, #c#; words ab, c
    codes, offsets = unit_codes(torch.tensor([5, 6, 2, 7, 7]), torch.tensor([0, 4]), "trigrams", 2, 10)
    assert codes.tolist() == [256, 562, 272, 272] and offsets.tolist() == [0, 3]
    words, word_offsets = unit_codes(torch.tensor([5, 6, 2, 7, 7]), torch.tensor([0, 4]), "words", 2, 10)
    assert words[1] == words[2] != words[0] and word_offsets.tolist() == [0, 2]  # "c" in both sentences
    rows = codes_to_rows(torch.tensor([5, 9, 11]), torch.tensor([5, 11]))
    assert rows.tolist() == [2, 0, 3]  # code i of the sorted buffer is row i + 2; 9 is unknown


def test_word_tokenizer_and_min_count(tmp_path):
    vocabulary = build_units(CORPUS + ["rareword"], "word", min_count=2)
    tokenizer = vocabulary.tokenizer
    assert tokenizer.token_to_id("guitar") is not None and tokenizer.token_to_id("rareword") is None
    assert tokenizer.encode("A  MAN").tokens == ["a", "man"]
    trigram = build_units(CORPUS + ["zebra"], "trigram", min_count=3)
    assert trigram.config["units"] == "trigrams" and trigram.codes[0] == sorted(trigram.codes[0])
    assert len(trigram.codes[0]) < len(build_units(CORPUS + ["zebra"], "trigram", min_count=1).codes[0])


def test_psp_stays_the_plain_average():
    config = PSPConfig(vocab_size=20, hidden_size=4)
    assert config.light_path and config.encoder_type == "psp"
    model = PSPModel(config)
    assert model.head is None and not hasattr(model, "second_embeddings")
    ids, offsets = torch.tensor([3, 4, 5]), torch.tensor([0, 1])
    expected = torch.stack([model.embeddings.weight[3], model.embeddings.weight[4:6].mean(0)])
    torch.testing.assert_close(model.embed(ids, offsets), expected)


def test_config_rejects_bad_combinations():
    with pytest.raises(ValueError, match="encoder_type"):
        PSPConfig(encoder_type="transformer")
    with pytest.raises(ValueError, match="tokens go with tokens"):
        PSPConfig(units="tokens", combination="add", second_encoder={"units": "trigrams"})
    with pytest.raises(ValueError, match="equal hidden sizes"):
        PSPConfig(hidden_size=4, combination="add", second_encoder={"hidden_size": 5})


# ------------------------------------------------------------------------------------------ round trips
SPECS = {
    "piece-psp": ("piece", None, "psp", None, None),
    "piece-max": ("piece", None, "max", None, None),
    "piece-projection": ("piece", None, "projection", None, None),
    "word-mean": ("word", None, "mean", None, None),
    "word-lstm": ("word", None, "lstm", None, None),
    "word-lstm_no_output_gate": ("word", None, "lstm_no_output_gate", None, None),
    "word-blstm": ("word", None, "blstm", None, None),
    "word-gran": ("word", None, "gran", None, None),
    "trigram-mean": ("trigram", None, "mean", None, None),
    "word,trigram-concat": ("word", "trigram", "mean", "concat", "mean"),
    "word,trigram-add-lstm": ("word", "trigram", "lstm", "add", "mean"),
    "piece,piece-concat-gran": ("piece", "piece", "mean", "concat", "gran"),
}

FRESH_PROCESS = """
import sys, json
sys.modules["psp_hf"] = None  # the folders' own remote code must be enough
import torch
from transformers import AutoModel, AutoTokenizer
sentences = json.loads(sys.argv[1])
result = {}
for folder in sys.argv[2:]:
    model = AutoModel.from_pretrained(folder, trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        result[folder] = model(**batch).sentence_embedding.tolist()
print(json.dumps(result))
"""


def _encoder(spec, piece_tokenizer):
    units, second_units, encoder_type, combination, second_type = spec
    if units == "piece":
        kwargs = {}
        if combination:
            kwargs = {"combination": combination, "second_encoder": {"encoder_type": second_type}}
        return PSPEncoder.from_tokenizer(piece_tokenizer, hidden_size=6, seed=4, encoder_type=encoder_type, **kwargs)
    vocabulary = build_units(CORPUS, units, second_units)
    return PSPEncoder(*model_for_units(vocabulary, 6, encoder_type, combination, second_type or "mean", seed=4))


def test_every_encoder_round_trips_through_automodel_in_a_fresh_process(tmp_path):
    piece_tokenizer = train_tokenizer(CORPUS, vocab_size=60)
    encoders, folders = {}, []
    for name, spec in SPECS.items():
        encoder = _encoder(spec, piece_tokenizer)
        folder = tmp_path / name
        encoder.save_pretrained(folder)
        encoders[str(folder)] = encoder
        folders.append(str(folder))
        reloaded = psp_hf.load(folder)
        assert reloaded.dim == encoder.dim == (12 if spec[3] == "concat" else 6)
        # Recurrent heads may round differently (1 ulp) once their weights are loaded into fresh tensors.
        np.testing.assert_allclose(reloaded.encode(SENTENCES), encoder.encode(SENTENCES), atol=1e-6, err_msg=name)
        assert type(reloaded.model.head).__name__ == (
            "NoneType" if spec[2] in ("psp", "max", "mean") else "SentenceHead"
        )
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"), PYTHONPATH="")
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, json.dumps(SENTENCES), *folders],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    for folder, encoder in encoders.items():
        np.testing.assert_allclose(np.asarray(payload[folder], dtype=np.float32), encoder.encode(SENTENCES), atol=1e-6)


def test_recurrent_folders_refuse_smaller_tables(tmp_path):
    vocabulary = build_units(CORPUS, "word")
    encoder = PSPEncoder(*model_for_units(vocabulary, 6, "lstm"))
    with pytest.raises(PSPInputError, match="averaging encoders only"):
        encoder.save_pretrained(tmp_path / "x", quantize_to="int8")
    with pytest.raises(PSPInputError, match="averaging encoders only"):
        encoder.save_pretrained(tmp_path / "x", dimensionality=4)
    plain = PSPEncoder(*model_for_units(vocabulary, 6, "mean"))
    plain.save_pretrained(tmp_path / "plain")
    # WORD averaging keeps the sentence-transformers layout (stock modules over the WordLevel tokenizer).
    from sentence_transformers import SentenceTransformer

    loaded = SentenceTransformer(str(tmp_path / "plain"), device="cpu")
    np.testing.assert_allclose(
        loaded.encode(SENTENCES[:1] + SENTENCES[2:]), plain.encode(SENTENCES[:1] + SENTENCES[2:]), atol=1e-5
    )
    assert not (tmp_path / "lstm").exists()
    encoder.save_pretrained(tmp_path / "lstm")
    assert not (tmp_path / "lstm" / "modules.json").exists()  # an LSTM has no stock-module equivalent
