"""Configuration of P-SP models (averaged sentencepiece embeddings)."""

from transformers import PretrainedConfig


class PSPConfig(PretrainedConfig):
    r"""Configuration of a [`PSPModel`]: a sentence is the mean (or max) of its sentencepiece-piece embeddings.

    Args:
        vocab_size (`int`, *optional*, defaults to 50000):
            Number of sentencepiece pieces, i.e. rows of the embedding table.
        hidden_size (`int`, *optional*, defaults to 1024):
            Dimension of the piece and sentence embeddings.
        pooling (`str`, *optional*, defaults to `"mean"`):
            How piece embeddings become a sentence embedding: `"mean"` (P-SP) or `"max"`.
        pad_token_id (`int`, *optional*, defaults to 1):
            Id of the padding piece (never part of a sentence).
        unk_token_id (`int`, *optional*, defaults to 0):
            Id of the unknown piece.
        drop_unknown (`bool`, *optional*, defaults to `True`):
            P-SP's rule: unknown pieces are dropped unless a sentence has nothing else, in which case the
            sentence is the unknown piece's embedding (an empty sentence too).
        word_boundary_token_id (`int`, *optional*):
            Id of the bare word-boundary piece ("▁"). With `drop_unknown`, a sentence made only of it and unknown
            pieces (out-of-vocabulary characters) counts as having nothing else, so it gets the unknown piece's
            embedding rather than the boundary piece's. -1: no such rule (the original P-SP code's behaviour);
            unset: psp takes the tokenizer's boundary piece.
        use_piece_weights (`bool`, *optional*, defaults to `False`):
            Weighted mean with one learned or frequency-based weight per piece (SIF-style).
        initializer_range (`float`, *optional*, defaults to 1.0):
            Standard deviation of the normal initialisation of the table (1.0 is `nn.Embedding`'s default,
            which the P-SP code used).
        table_dtype (`str`, *optional*, defaults to `"float32"`):
            How `model.safetensors` stores the table: `"float32"`, `"float16"`, or `"int8"` with one float32
            scale per row in `table_scales` (row i = int8 row i x scale i, the scale being max|row| / 127).
            The model dequantises to float32 when loaded, so it computes in float32 whatever the storage.
    """

    model_type = "psp"

    def __init__(
        self,
        vocab_size: int = 50000,
        hidden_size: int = 1024,
        pooling: str = "mean",
        pad_token_id: int = 1,
        unk_token_id: int = 0,
        drop_unknown: bool = True,
        use_piece_weights: bool = False,
        word_boundary_token_id: int | None = None,
        initializer_range: float = 1.0,
        table_dtype: str = "float32",
        **kwargs,
    ):
        if pooling not in ("mean", "max"):
            raise ValueError(f"pooling must be 'mean' or 'max', got {pooling!r}")
        if use_piece_weights and pooling != "mean":
            raise ValueError("use_piece_weights requires pooling='mean'")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.pooling = pooling
        self.unk_token_id = unk_token_id
        self.drop_unknown = drop_unknown
        self.use_piece_weights = use_piece_weights
        self.word_boundary_token_id = word_boundary_token_id
        self.initializer_range = initializer_range
        if table_dtype not in ("float32", "float16", "int8"):
            raise ValueError(f"table_dtype must be 'float32', 'float16' or 'int8', got {table_dtype!r}")
        self.table_dtype = table_dtype
        super().__init__(pad_token_id=pad_token_id, **kwargs)


__all__ = ["PSPConfig"]
