"""The sentence-transformers layout written beside a psp model folder, so `SentenceTransformer(repo_id)` loads it.

sentence-transformers 6 refuses every module class outside its own namespace unless the caller passes
`trust_remote_code=True`, even a class from an installed package. So the layout uses only built-in modules:

    0_Transformer  the piece table as a zero-layer OPT model: no attention layer, no final layer norm and an
                   all-zero position table, so each token's output is exactly its row of the P-SP table.
    1_WordWeights  weight 1 for every piece (or the model's own piece weights) and a tiny weight for the
                   unknown piece, so unknown pieces vanish from the mean unless nothing else is left.
    2_Pooling      weighted mean (WordWeights hands Pooling the sum of the weights as the divisor).

The tokenizer in `0_Transformer` appends one unknown piece to every sentence. With the tiny weight it changes
nothing when a sentence has a known piece, and it gives an empty or all-unknown sentence the unknown piece's
embedding: P-SP's unknown-piece rule, built from stock parts. `StaticEmbedding` cannot express that rule (it
averages unknown pieces like any other and maps an empty sentence to zeros).

Two differences are left. Length: the Transformer module truncates at `max_seq_length` pieces (the size of
the zero position table), while psp embeds sentences of any length. Sentences made only of out-of-vocabulary
characters: psp gives them the unknown piece, but the tokenizer puts a bare word-boundary piece before such a
word and a fixed per-piece weight cannot drop it only when nothing else is left, so here they get that piece.

Only the standard library, numpy, torch, safetensors, tokenizers and transformers are used here, so
`PSPEncoder.save_pretrained` can write the layout without sentence-transformers installed.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..io.writing import write_json

TRANSFORMER_DIR = "0_Transformer"
WORD_WEIGHTS_DIR = "1_WordWeights"
POOLING_DIR = "2_Pooling"

#: Pieces beyond this are cut off by sentence-transformers (psp itself has no limit).
DEFAULT_MAX_SEQ_LENGTH = 2048

#: Weight of the unknown piece. Pooling clamps the weight sum at 1e-9, so a sentence of only unknown pieces
#: (at least the appended one) must weigh more than that; next to any known piece (weight 1, float32 ulp
#: 1.2e-7) it is lost in rounding, which is what dropping it means.
UNKNOWN_PIECE_WEIGHT = 2e-9

#: Files of the layout at the top of the folder (the module folders above hold the rest).
ROOT_FILES = ("modules.json", "config_sentence_transformers.json")

# modules.json keeps the pre-6.0 class paths: sentence-transformers 6 maps them to the new modules, and
# older releases (3.x-5.x) still import them directly.
_MODULE_TYPES = {
    TRANSFORMER_DIR: "sentence_transformers.models.Transformer",
    WORD_WEIGHTS_DIR: "sentence_transformers.models.WordWeights",
    POOLING_DIR: "sentence_transformers.models.Pooling",
}


def _library_versions() -> dict[str, str]:
    from importlib import metadata

    import torch
    import transformers

    versions = {"transformers": transformers.__version__, "pytorch": torch.__version__}
    # The installed version without importing the (slow to import) package.
    with contextlib.suppress(metadata.PackageNotFoundError):
        versions = {"sentence_transformers": metadata.version("sentence-transformers"), **versions}
    return versions


def _piece_table(encoder):
    import torch

    model = encoder.model
    table = model.embeddings.weight.detach().to(device="cpu", dtype=torch.float32).contiguous()
    weights = None
    if getattr(model, "piece_weights", None) is not None:
        weights = model.piece_weights.detach().to(device="cpu", dtype=torch.float32)
    return table, weights


def _write_transformer_module(folder: Path, encoder, table, max_seq_length: int, append_unknown: bool) -> None:
    import torch
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, processors
    from transformers import OPTConfig

    config = encoder.model.config
    vocab_size, hidden_size = table.shape
    opt_config = OPTConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        word_embed_proj_dim=hidden_size,
        num_hidden_layers=0,
        num_attention_heads=1,
        ffn_dim=hidden_size,
        max_position_embeddings=max_seq_length,
        # Post-norm placement with no layers means no layer norm anywhere: outputs are the raw table rows.
        do_layer_norm_before=False,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        layerdrop=0.0,
        enable_bias=False,
        pad_token_id=config.pad_token_id,
        bos_token_id=None,
        eos_token_id=None,
        architectures=["OPTModel"],
    )
    opt_config.to_json_file(folder / "config.json")
    # OPT offsets positions by 2; every position row is zero, so adding positions changes nothing.
    positions = torch.zeros(max_seq_length + 2, hidden_size, dtype=torch.float32)
    save_file(
        {"decoder.embed_tokens.weight": table, "decoder.embed_positions.weight": positions},
        str(folder / "model.safetensors"),
        metadata={"format": "pt"},
    )

    backend = Tokenizer.from_str(encoder.tokenizer.backend_tokenizer.to_str())
    backend.no_padding()
    backend.no_truncation()
    unk_piece = encoder.tokenizer.convert_ids_to_tokens(config.unk_token_id)
    if append_unknown:
        backend.post_processor = processors.TemplateProcessing(
            single=f"$A {unk_piece}",
            pair=f"$A {unk_piece} $B:1 {unk_piece}:1",
            special_tokens=[(unk_piece, config.unk_token_id)],
        )
    else:
        backend.post_processor = None
    backend.save(str(folder / "tokenizer.json"))
    tokenizer_config = {
        # The class name every transformers release resolves (4.x and 5.x alike).
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": unk_piece,
        "pad_token": encoder.tokenizer.pad_token,
        "model_max_length": max_seq_length,
        "clean_up_tokenization_spaces": False,
    }
    write_json(folder / "tokenizer_config.json", tokenizer_config)
    # Lowercasing, if any, is inside tokenizer.json's normalizer: sentence-transformers must not add its own.
    write_json(folder / "sentence_bert_config.json", {"max_seq_length": max_seq_length, "do_lower_case": False})


def write_sentence_transformers_files(
    directory: str | os.PathLike, encoder, max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH
) -> list[Path]:
    """Add the sentence-transformers layout (modules.json and three module folders) to a saved psp folder.

    `encoder` is a `PSPEncoder`. Returns the files written. With mean pooling the result equals psp's
    embeddings to float32 rounding (unknown-piece rule included) for sentences of up to `max_seq_length - 1`
    pieces; with max pooling, unknown pieces take part in the maximum (psp drops them).
    """
    if max_seq_length < 2:
        raise ValueError(f"max_seq_length must be at least 2, got {max_seq_length}")
    directory = Path(directory)
    config = encoder.model.config
    table, piece_weights = _piece_table(encoder)
    vocab_size, hidden_size = table.shape
    mean_pooling = config.pooling == "mean"
    drop_unknown = bool(getattr(config, "drop_unknown", True))

    transformer_dir = directory / TRANSFORMER_DIR
    transformer_dir.mkdir(parents=True, exist_ok=True)
    # The appended unknown piece only works together with its tiny weight, i.e. with mean pooling.
    _write_transformer_module(
        transformer_dir, encoder, table, max_seq_length, append_unknown=mean_pooling and drop_unknown
    )

    modules = [TRANSFORMER_DIR]
    if mean_pooling:
        # Rows past the tokenizer's pieces are never looked up; they only need distinct names.
        pieces = [
            piece if piece is not None else f"<psp-unused-{index}>"
            for index, piece in enumerate(encoder.tokenizer.convert_ids_to_tokens(list(range(vocab_size))))
        ]
        if len(set(pieces)) != len(pieces):
            raise ValueError("the tokenizer maps two ids to the same piece string; WordWeights needs unique pieces")
        weights = [1.0] * vocab_size if piece_weights is None else [float(w) for w in piece_weights]
        if drop_unknown:
            weights[config.unk_token_id] = UNKNOWN_PIECE_WEIGHT
        word_weights_dir = directory / WORD_WEIGHTS_DIR
        word_weights_dir.mkdir(exist_ok=True)
        # WordWeights rebuilds its table from this config alone; no weights file is needed.
        write_json(
            word_weights_dir / "config.json",
            {
                "vocab": pieces,
                "word_weights": dict(zip(pieces, weights, strict=True)),
                "unknown_word_weight": 1.0,
            },
        )
        modules.append(WORD_WEIGHTS_DIR)

    pooling_dir = directory / POOLING_DIR
    pooling_dir.mkdir(exist_ok=True)
    write_json(
        pooling_dir / "config.json",
        {
            "word_embedding_dimension": hidden_size,
            "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": mean_pooling,
            "pooling_mode_max_tokens": not mean_pooling,
            "pooling_mode_mean_sqrt_len_tokens": False,
            "pooling_mode_weightedmean_tokens": False,
            "pooling_mode_lasttoken": False,
            "include_prompt": True,
        },
    )
    modules.append(POOLING_DIR)

    modules_json = [
        {"idx": index, "name": str(index), "path": name, "type": _MODULE_TYPES[name]}
        for index, name in enumerate(modules)
    ]
    write_json(directory / "modules.json", modules_json)
    write_json(
        directory / "config_sentence_transformers.json",
        {
            "__version__": _library_versions(),
            "model_type": "SentenceTransformer",
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    )
    written = [directory / name for name in ROOT_FILES]
    for name in modules:
        written += sorted(path for path in (directory / name).iterdir() if not path.name.startswith("."))
    return written


__all__ = [
    "DEFAULT_MAX_SEQ_LENGTH",
    "POOLING_DIR",
    "ROOT_FILES",
    "TRANSFORMER_DIR",
    "UNKNOWN_PIECE_WEIGHT",
    "WORD_WEIGHTS_DIR",
    "write_sentence_transformers_files",
]
