"""AutoModel's per-token output (`last_hidden_state`) and the feature-extraction pipeline."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer, pipeline

from psp_hf import PSPEncoder
from psp_hf.tokenization.pieces import train_tokenizer

CORPUS = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "Two dogs run across the green field.",
    "The children are playing football in the park.",
] * 20


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokens")
    tokenizer = train_tokenizer(CORPUS, vocab_size=60, output_dir=root / "tok")
    PSPEncoder.from_tokenizer(tokenizer, hidden_size=8, seed=2).save_pretrained(root / "model")
    return root / "model"


def test_last_hidden_state_is_each_piece_row_zero_at_padding(folder):
    model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    batch = tokenizer(["A man is playing.", "Dogs run."], padding=True, return_tensors="pt")
    with torch.no_grad():
        output = model(**batch)
    table = model.embeddings.weight.detach()
    mask = batch["attention_mask"].bool()
    assert mask.sum() < mask.numel()  # the second sentence is padded
    assert output.last_hidden_state.shape == (*batch["input_ids"].shape, 8)
    torch.testing.assert_close(output.last_hidden_state[mask], table[batch["input_ids"][mask]])
    assert bool((output.last_hidden_state[~mask] == 0).all())
    # The sentence embedding is unchanged and, without unknown pieces, the masked mean of the token rows.
    expected = PSPEncoder.from_pretrained(folder).encode(["A man is playing.", "Dogs run."])
    np.testing.assert_allclose(output.sentence_embedding.numpy(), expected, rtol=1e-6, atol=1e-6)
    mean = output.last_hidden_state.sum(1) / mask.sum(1, keepdim=True)
    torch.testing.assert_close(mean, output.pooler_output)
    # The flat path and an explicit opt-out build no per-token tensor.
    flat = model(torch.tensor([3, 4, 5]), offsets=torch.tensor([0, 2]))
    assert flat.last_hidden_state is None
    assert model(**batch, output_token_embeddings=False).last_hidden_state is None
    assert len(model(**batch, return_dict=False)) == 3


def test_feature_extraction_pipeline_returns_per_token_vectors(folder):
    extractor = pipeline("feature-extraction", model=str(folder), trust_remote_code=True)
    features = np.array(extractor("A man is playing a guitar."))
    ids = AutoTokenizer.from_pretrained(folder)("A man is playing a guitar.")["input_ids"]
    table = AutoModel.from_pretrained(folder, trust_remote_code=True).embeddings.weight.detach().numpy()
    assert features.shape == (1, len(ids), 8)
    np.testing.assert_allclose(features[0], table[ids], rtol=1e-6)
