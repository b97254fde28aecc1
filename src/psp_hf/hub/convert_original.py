"""`psp convert-original`: turn a checkpoint of the authors' P-SP code into a psp model folder.

The original code (jwieting/paraphrastic-representations-at-scale) saves a pickled dict with `state_dict`
(the table under `embedding.weight`, a second one under `embedding_fr.weight` when the languages do not share
a vocabulary), `vocab` (piece string -> row, with the unknown entry `UUUNKKK`), `vocab_fr`, `args`,
`optimizer` and `epoch`. Its rows are not sentencepiece ids: the vocabulary was counted from the training
text, so it holds strings the sentencepiece model does not know (the surface form of characters outside the
model, which sentencepiece passes through as pieces) and its order is by frequency.

The conversion therefore maps by piece string: row `i` of the new table is the checkpoint's row for
sentencepiece piece `i`. Two differences from the original code remain, both rare and both counted in the
`ConversionReport`:

- Checkpoint rows whose string is not a sentencepiece piece are dropped. The original code used such a row
  when sentencepiece passed exactly that run of out-of-model characters through; the converted tokenizer
  turns those characters into the unknown piece, which the unknown-piece rule then drops.
- Sentencepiece pieces the checkpoint lacks get the checkpoint's unknown row. With `zero_unk` the original
  code drops such pieces from a sentence, while psp averages them in as that row. They never occurred in the
  authors' training text (the vocabulary was counted from it), so they are rare.
"""

from __future__ import annotations

import argparse
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import PSPInputError
from ..io.writing import publish_folder, staging_folder

#: The original code's name for the unknown entry of its vocabulary.
ORIGINAL_UNK = "UUUNKKK"


@dataclass
class ConversionReport:
    """What a conversion matched, dropped and filled in."""

    checkpoint_rows: int
    sentencepiece_pieces: int
    matched: int
    missing_pieces: list[str] = field(default_factory=list)
    dropped_rows: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """A few lines for the command line."""

        def sample(items: list[str]) -> str:
            shown = ", ".join(repr(item) for item in items[:8])
            return f" ({shown}{', …' if len(items) > 8 else ''})" if items else ""

        lines = [
            f"checkpoint rows: {self.checkpoint_rows:,}; sentencepiece pieces: {self.sentencepiece_pieces:,}; "
            f"matched by piece string: {self.matched:,}",
            f"pieces missing from the checkpoint, given its unknown row: {len(self.missing_pieces):,}"
            + sample(self.missing_pieces),
            f"checkpoint rows that are not sentencepiece pieces, dropped: {len(self.dropped_rows):,}"
            + sample(self.dropped_rows),
        ]
        return "\n".join(lines + [f"warning: {warning}" for warning in self.warnings])


def load_original_checkpoint(path: str | os.PathLike, trust_pickle: bool = False) -> dict[str, Any]:
    """Read a checkpoint of the original code: a pickle, so only when the caller vouches for the file.

    Unpickling can run code stored in the file, and psp otherwise reads safetensors only. Without `trust_pickle`
    nothing is read. With it, torch's restricted loader (tensors, containers and the argument namespace) is
    tried first, and a full unpickle is done only for a file that needs one.
    """
    import pickle

    import torch

    path = Path(path)
    if not path.is_file():
        raise PSPInputError(f"--checkpoint {path}: no such file")
    if not trust_pickle:
        raise PSPInputError(
            f"--checkpoint {path}: the original checkpoints are pickles, and unpickling a file can run code stored "
            "in it; psp reads one only when you vouch for it: pass --trust-pickle if you trust where the file "
            "came from"
        )
    try:
        try:
            # The only class in these files besides tensors and containers is the argparse namespace `args`.
            with torch.serialization.safe_globals([argparse.Namespace]):
                checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError:
            checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, AttributeError, ModuleNotFoundError) as error:
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise PSPInputError(f"--checkpoint {path}: not a readable torch checkpoint ({reason})") from None
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint or "vocab" not in checkpoint:
        keys = sorted(checkpoint) if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise PSPInputError(
            f"--checkpoint {path}: expected the original P-SP format (a dict with 'state_dict' and 'vocab'), got {keys}"
        )
    return checkpoint


def _setting(args: Any, name: str, default: Any) -> Any:
    if isinstance(args, dict):
        return args.get(name, default)
    return getattr(args, name, default)


def _table(state_dict: dict, key: str, path: Path):
    import torch

    # Checkpoints saved from nn.DataParallel prefix every key with "module.".
    for candidate in (key, f"module.{key}"):
        if candidate in state_dict:
            table = state_dict[candidate]
            if not isinstance(table, torch.Tensor) or table.dim() != 2:
                raise PSPInputError(f"--checkpoint {path}: {candidate} is not a 2-D tensor")
            return table.detach().to(torch.float32)
    raise PSPInputError(f"--checkpoint {path}: no {key} in state_dict (keys: {', '.join(sorted(state_dict))})")


def _sentencepiece_tokenizer(sp_model: Path, lowercase: bool):
    import sentencepiece as spm
    from transformers import PreTrainedTokenizerFast

    from ..tokenization.pieces import PAD_PIECE, fast_tokenizer_from_sentencepiece

    if not sp_model.is_file():
        raise PSPInputError(f"--sp-model {sp_model}: no such file")
    try:
        processor = spm.SentencePieceProcessor(model_file=str(sp_model))
    except (RuntimeError, OSError) as error:
        raise PSPInputError(f"--sp-model {sp_model}: not a sentencepiece model ({error})") from None
    unk_piece = processor.id_to_piece(processor.unk_id())
    pad_piece = processor.id_to_piece(processor.pad_id()) if processor.pad_id() >= 0 else PAD_PIECE
    # The paper's vocabularies were trained on text as it came: no folding of Chinese scripts.
    backend = fast_tokenizer_from_sentencepiece(sp_model, lowercase=lowercase, fold_chinese=False)
    # Control pieces (<s>, </s>, ...) never come out of text; they need no row of their own.
    control = {processor.id_to_piece(i) for i in range(processor.get_piece_size()) if processor.is_control(i)}
    # A model without a pad piece gets one appended; it never comes out of text either.
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token=unk_piece,
        pad_token=pad_piece,
        model_max_length=1_000_000,
        clean_up_tokenization_spaces=False,
    )
    return tokenizer, control | {tokenizer.unk_token, tokenizer.pad_token}


def convert_original_checkpoint(
    checkpoint: str | os.PathLike,
    sp_model: str | os.PathLike,
    side: str = "first",
    trust_pickle: bool = False,
):
    """Build a `PSPEncoder` from an original P-SP checkpoint and its sentencepiece model.

    `side` picks the table: `first` (`embedding`, the only one when the vocabulary is shared) or `second`
    (`embedding_fr`, the other language's table when it is not). Returns `(encoder, ConversionReport)`.
    """
    import torch

    from ..encoder import PSPEncoder

    checkpoint_path, sp_path = Path(checkpoint), Path(sp_model)
    if side not in ("first", "second"):
        raise PSPInputError(f"--side must be 'first' or 'second', got {side!r}")
    data = load_original_checkpoint(checkpoint_path, trust_pickle=trust_pickle)
    args = data.get("args") or {}
    warnings = []
    model_kind = _setting(args, "model", "avg")
    if model_kind != "avg":
        raise PSPInputError(
            f"--checkpoint {checkpoint_path}: an {model_kind!r} model; only averaging models ('avg') convert to psp"
        )
    pooling = _setting(args, "pool", "mean")
    if pooling not in ("mean", "max"):
        raise PSPInputError(f"--checkpoint {checkpoint_path}: pooling {pooling!r} is neither 'mean' nor 'max'")
    if _setting(args, "tokenize", 0):
        warnings.append(
            "the checkpoint was trained on Moses-tokenized text; psp segments raw text, so embeddings differ "
            "slightly where Moses would split punctuation (tokenize the input yourself to match)"
        )
    shared = bool(_setting(args, "share_vocab", 1))
    if side == "second":
        if shared or data.get("vocab_fr") is None:
            raise PSPInputError(f"--checkpoint {checkpoint_path}: one shared vocabulary; there is no second table")
        vocab, table = data["vocab_fr"], _table(data["state_dict"], "embedding_fr.weight", checkpoint_path)
    else:
        vocab, table = data["vocab"], _table(data["state_dict"], "embedding.weight", checkpoint_path)
        if not shared and data.get("vocab_fr") is not None:
            warnings.append("the languages have separate tables; converted the first (--side second: the other)")
    if not isinstance(vocab, dict) or not vocab:
        raise PSPInputError(f"--checkpoint {checkpoint_path}: 'vocab' is not a non-empty dict of piece -> row")
    bad_rows = [piece for piece, row in vocab.items() if not isinstance(row, int) or not 0 <= row < table.shape[0]]
    if bad_rows:
        raise PSPInputError(
            f"--checkpoint {checkpoint_path}: vocab rows outside the {table.shape[0]}-row table, e.g. {bad_rows[0]!r}"
        )

    lowercase = bool(_setting(args, "lower_case", 1))
    tokenizer, special = _sentencepiece_tokenizer(sp_path, lowercase=lowercase)
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    if ORIGINAL_UNK in vocab:
        unk_row = table[vocab[ORIGINAL_UNK]]
    elif tokenizer.unk_token in vocab:
        unk_row = table[vocab[tokenizer.unk_token]]
    else:
        unk_row = torch.zeros(table.shape[1])
        warnings.append(f"the vocabulary has no {ORIGINAL_UNK!r} entry; pieces it lacks get a zero vector")

    rows = torch.empty(len(pieces), table.shape[1], dtype=torch.float32)
    missing = []
    matched = 0
    for index, piece in enumerate(pieces):
        row = vocab.get(piece)
        matched += row is not None
        if row is None:
            rows[index] = unk_row
            # Unknown, padding and control pieces have no row of their own in the original code's vocabulary.
            if piece not in special:
                missing.append(piece)
        else:
            rows[index] = table[row]
    known = set(pieces)
    dropped = [piece for piece in vocab if piece not in known and piece != ORIGINAL_UNK]

    encoder = PSPEncoder.from_tokenizer(
        tokenizer,
        hidden_size=table.shape[1],
        pooling=pooling,
        # zero_unk is the original code's name for the unknown-piece rule.
        drop_unknown=bool(_setting(args, "zero_unk", 1)),
        # The original code keeps the bare word-boundary piece of an all-unknown sentence: embed as it did.
        word_boundary_token_id=-1,
    )
    with torch.no_grad():
        encoder.model.embeddings.weight.copy_(rows)
    report = ConversionReport(
        checkpoint_rows=len(vocab),
        sentencepiece_pieces=len(pieces),
        matched=matched,
        missing_pieces=missing,
        dropped_rows=dropped,
        warnings=warnings,
    )
    return encoder, report


def save_converted(encoder, sp_model: str | os.PathLike, output_dir: str | os.PathLike, overwrite: bool = False):
    """Write the converted model folder (with the sentence-transformers layout and the sentencepiece model).

    The folder is built beside `output_dir` and moved into place at the end, so a failure leaves no
    half-written folder; an existing non-empty `output_dir` is replaced only with `overwrite`.
    """
    from ..persistence.sentence_transformers_layout import write_sentence_transformers_files
    from ..tokenization.pieces import SPM_FILENAME

    output = Path(output_dir)
    if output.exists() and (not output.is_dir() or any(output.iterdir())) and not overwrite:
        raise PSPInputError(f"--output {output}: exists and is not empty; pass --overwrite to replace it")
    staging = staging_folder(output)
    try:
        encoder.save_pretrained(staging)
        if not (staging / "modules.json").is_file():
            write_sentence_transformers_files(staging, encoder)
        shutil.copyfile(sp_model, staging / SPM_FILENAME)
        publish_folder(staging, output)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return output


__all__ = [
    "ORIGINAL_UNK",
    "ConversionReport",
    "convert_original_checkpoint",
    "load_original_checkpoint",
    "save_converted",
]
