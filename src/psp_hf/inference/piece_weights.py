"""Per-piece weights for the sentence average: SIF-style `a / (a + p(piece))` from corpus frequencies.

Frequent pieces ("▁the", "▁a", ".") carry little meaning; down-weighting them in the average (Arora et al.,
2017, "smooth inverse frequency") helps static embeddings. The weights live in the model itself
(`config.use_piece_weights` and the `piece_weights` parameter of `PSPModel`), so every loader — psp,
`AutoModel` and sentence-transformers — applies them; they can also be trained further as a parameter.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

SIF_A = 1e-3


def piece_counts(
    encoder, sentences: Iterable[str], vocab_size: int | None = None, batch_size: int = 8192
) -> np.ndarray:
    """How often each piece occurs when `encoder` tokenizes `sentences` (int64, one count per table row)."""
    size = vocab_size or encoder.model.config.vocab_size
    counts = np.zeros(size, dtype=np.int64)
    batch: list[str] = []

    def flush() -> None:
        if batch:
            ids, _ = encoder.tokenize(batch)
            counts[:] += np.bincount(ids.numpy(), minlength=size)[:size]
            batch.clear()

    for sentence in sentences:
        batch.append(sentence)
        if len(batch) >= batch_size:
            flush()
    flush()
    return counts


def sif_weights(counts: np.ndarray, a: float = SIF_A) -> np.ndarray:
    """`a / (a + p)` with `p` the relative frequency of each piece; unseen pieces get weight 1."""
    if a <= 0:
        raise ValueError(f"the SIF constant a must be > 0, got {a}")
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if total <= 0:
        raise ValueError("no piece was counted: cannot compute frequencies")
    return (a / (a + counts / total)).astype(np.float32)


def with_piece_weights(encoder, weights: np.ndarray | torch.Tensor):
    """A `PSPEncoder` like `encoder` whose model uses `weights` (one per piece) in its sentence average.

    The model is rebuilt when it had no weights (the table's pooling switches to a weighted sum); the
    embedding table is shared, not copied.
    """
    from ..modeling import PSPConfig, PSPModel

    model = encoder.model
    weights = torch.as_tensor(np.asarray(weights, dtype=np.float32))
    if weights.shape != (model.config.vocab_size,):
        raise ValueError(f"need one weight per piece ({model.config.vocab_size}), got shape {tuple(weights.shape)}")
    if not model.config.use_piece_weights:
        config = PSPConfig.from_dict({**model.config.to_dict(), "use_piece_weights": True})
        rebuilt = PSPModel(config)
        rebuilt.embeddings.weight = model.embeddings.weight
        rebuilt.embeddings.sparse = model.embeddings.sparse
        model = rebuilt
    with torch.no_grad():
        model.piece_weights.copy_(weights)
    return type(encoder)(model, encoder.tokenizer)  # the encoder's own class: inference sits below psp_hf.encoder
