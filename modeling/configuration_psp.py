"""Configuration of P-SP models (averaged sentencepiece embeddings)."""

from transformers import PretrainedConfig

ENCODER_TYPES = ("psp", "mean", "max", "projection", "lstm", "lstm_no_output_gate", "blstm", "gran")
UNIT_TYPES = ("tokens", "words", "trigrams")


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
        encoder_type (`str`, *optional*, defaults to `"psp"`):
            How unit embeddings become a sentence embedding (the papers' encoders): `"psp"` (mean or max as
            `pooling` says; P-SP), `"mean"`, `"max"`, `"projection"` (mean, then a learned linear map),
            `"lstm"` (mean of an LSTM's hidden states), `"lstm_no_output_gate"` (the same LSTM without output
            gate), `"blstm"` (mean over time of the average of the forward and backward states) or `"gran"`
            (gated recurrent averaging: an LSTM's state gates each unit vector, the gated vectors are averaged).
        units (`str`, *optional*, defaults to `"tokens"`):
            `"tokens"`: the tokenizer's ids are the units (sentencepiece pieces, or whitespace words). `"words"` /
            `"trigrams"`: the tokenizer gives characters (`word_separator_id` between words) and the model forms
            the units, whitespace words or character trigrams of each word with boundary marks, looking them up
            in `unit_codes` (a sorted buffer; unit code i is table row i + 2, rows 0 and 1 are unknown and pad).
        word_separator_id (`int`, *optional*, defaults to -1):
            Id of the word separator of a character tokenizer (`units` words or trigrams).
        char_vocab_size (`int`, *optional*, defaults to 0):
            Size of the character tokenizer's vocabulary (trigram codes are base-`char_vocab_size` numbers).
        unit_count (`int`, *optional*, defaults to 0):
            Number of units in `unit_codes` (`units` words or trigrams): `vocab_size - 2`.
        combination (`str`, *optional*):
            `"add"` or `"concat"`: the sentence embedding is the sum or concatenation of this encoder's and a
            second encoder's (`second_encoder`, with its own table), both fed the same tokenizer output.
        second_encoder (`dict`, *optional*):
            The second encoder: `encoder_type`, `units`, `vocab_size`, `unit_count` and `hidden_size` keys.
    """

    model_type = "psp"

    @property
    def sentence_dim(self) -> int:
        """Width of the sentence embedding (`hidden_size`, plus the second encoder's with `"concat"`)."""
        if self.combination == "concat":
            return self.hidden_size + self.second_encoder["hidden_size"]
        return self.hidden_size

    @property
    def light_path(self) -> bool:
        """True when a sentence is a plain (weighted) mean or max of the tokenizer's ids' rows (psp's numpy path)."""
        return self.encoder_type in ("psp", "mean", "max") and self.units == "tokens" and self.combination is None

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
        encoder_type: str = "psp",
        units: str = "tokens",
        word_separator_id: int = -1,
        char_vocab_size: int = 0,
        unit_count: int = 0,
        combination: str | None = None,
        second_encoder: dict | None = None,
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
        if encoder_type not in ENCODER_TYPES:
            raise ValueError(f"encoder_type must be one of {', '.join(ENCODER_TYPES)}; got {encoder_type!r}")
        if encoder_type in ("mean", "max"):
            self.pooling = pooling = encoder_type
        if use_piece_weights and encoder_type not in ("psp", "mean"):
            raise ValueError("use_piece_weights applies to averaging encoders (psp, mean) only")
        if units not in UNIT_TYPES:
            raise ValueError(f"units must be one of {', '.join(UNIT_TYPES)}; got {units!r}")
        if combination not in (None, "add", "concat"):
            raise ValueError(f"combination must be 'add', 'concat' or None, got {combination!r}")
        if (combination is None) != (second_encoder is None):
            raise ValueError("combination and second_encoder go together")
        if second_encoder is not None:
            second_encoder = {"encoder_type": "mean", "units": "tokens", "unit_count": 0, **second_encoder}
            second_encoder.setdefault("hidden_size", hidden_size)
            second_encoder.setdefault("vocab_size", vocab_size)
            if second_encoder["encoder_type"] not in ENCODER_TYPES or second_encoder["encoder_type"] == "psp":
                raise ValueError(f"second_encoder encoder_type must be one of {', '.join(ENCODER_TYPES[1:])}")
            if second_encoder["units"] not in UNIT_TYPES:
                raise ValueError(f"second_encoder units must be one of {', '.join(UNIT_TYPES)}")
            if combination == "add" and second_encoder["hidden_size"] != hidden_size:
                raise ValueError("combination 'add' needs equal hidden sizes")
            if "tokens" in (units, second_encoder["units"]) and units != second_encoder["units"]:
                raise ValueError(
                    "both encoders read the same tokenizer: tokens go with tokens, characters with words/trigrams"
                )
        self.encoder_type = encoder_type
        self.units = units
        self.word_separator_id = word_separator_id
        self.char_vocab_size = char_vocab_size
        self.unit_count = unit_count
        self.combination = combination
        self.second_encoder = second_encoder
        super().__init__(pad_token_id=pad_token_id, **kwargs)


__all__ = ["ENCODER_TYPES", "UNIT_TYPES", "PSPConfig"]
