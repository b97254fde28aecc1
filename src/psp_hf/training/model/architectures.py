"""Training the papers' other encoders: their flags, the run's WORD/TRIGRAM tokenizer, the new model, and the
training-time embedding with unit scrambling and the L2 pull toward the initial table (lambda_w).

* Scrambling (ParaNMT-50M): each training sentence has its units (words, trigrams or pieces) shuffled with
  probability `--scramble-rate`; an average does not notice, a recurrent encoder learns not to lean on order.
* lambda_w (ICLR 2016): `--init-l2` adds `lambda_w * sum ||W_r - W0_r||^2` over the table rows `r` that the
  step looks up (the rows the sparse optimizer updates), W0 being the table after initialisation. With
  --init-rows-from only the rows copied from that model are pulled: the others start random, and a pull toward
  random values would only hold back the new language's pieces. The initial tables (and the pulled rows) are kept
  in `training/initial_tables.safetensors`, so a resumed run pulls toward the same values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import PSPInputError
from ..arguments.checks import setting

if TYPE_CHECKING:  # torch is imported where it is used: `psp train --help` and argument parsing stay light
    import torch

ENCODER_TYPES = ("psp", "mean", "max", "projection", "lstm", "lstm_no_output_gate", "blstm", "gran")
UNITS = ("piece", "word", "trigram")
COMBINATIONS = ("none", "add", "concat")
NEGATIVE_SELECTIONS = ("megabatch", "max", "mix")
UNITS_FILE = "units.json"
INITIAL_TABLES = "initial_tables.safetensors"
PULLED_ROWS = "pulled-rows"  # in INITIAL_TABLES: 1 for the first table's rows that --init-l2 pulls, 0 for the rest


@dataclass
class EncoderArguments:
    """The encoder, unit and objective settings of the ICLR 2016 / EMNLP 2017 / ParaNMT-50M papers."""

    encoder_type: str = field(
        default="psp",
        metadata=setting(
            "sentence encoder: psp (P-SP: mean of units), mean, max, projection (mean, then a learned linear "
            "map), lstm, lstm_no_output_gate, blstm, gran",
            choices=ENCODER_TYPES,
            fixed_on_resume=True,
        ),
    )
    units: str = field(
        default="piece",
        metadata=setting(
            "units: sentencepiece pieces, whitespace words, character trigrams", choices=UNITS, fixed_on_resume=True
        ),
    )
    min_count: int = field(
        default=1,
        metadata=setting("--units word/trigram: keep units seen at least this often", min=1, fixed_on_resume=True),
    )
    combination: str = field(
        default="none",
        metadata=setting(
            "add or concatenate a second encoder (with its own table)", choices=COMBINATIONS, fixed_on_resume=True
        ),
    )
    second_encoder_type: str = field(
        default="mean",
        metadata=setting("--combination: the second encoder's type", choices=ENCODER_TYPES[1:], fixed_on_resume=True),
    )
    second_units: str | None = field(
        default=None,
        metadata=setting("--combination: its units (default: --units)", choices=UNITS, fixed_on_resume=True),
    )
    scramble_rate: float = field(
        default=0.0,
        metadata=setting("shuffle the units of a training sentence with this probability (LSTMs: 0.3)", min=0, max=1),
    )
    negative_selection: str = field(
        default="megabatch",
        metadata=setting(
            "megabatch: hardest negative of the mega-batch; max: hardest of the mini-batch; mix: hardest of the "
            "mini-batch half of the time, a random one otherwise (ICLR 2016)",
            choices=NEGATIVE_SELECTIONS,
        ),
    )
    init_l2: float = field(
        default=0.0,
        metadata=setting(
            "lambda_w: L2 pull of the looked-up table rows toward their initial values (with --init-rows-from, "
            "only the rows copied from that model)",
            min=0,
        ),
    )

    def plain_encoder(self) -> bool:
        """True for P-SP's own model: a mean of sentencepiece pieces with one table."""
        return self.encoder_type == "psp" and self.units == "piece" and self.combination == "none"

    def validate_encoder_options(self) -> None:
        """Raise `PSPInputError` naming the flag when the encoder settings do not fit together."""
        # Choices and bounds are declared in the fields' metadata (`argument_checks.check_rules` checks them).
        second = self.second_units or self.units
        if self.combination != "none" and "piece" in (self.units, second) and self.units != second:
            raise PSPInputError("--combination: pieces combine with pieces only (words and trigrams share characters)")
        characters = self.units == "trigram" or (self.combination != "none" and "trigram" in (self.units, second))
        if characters and self.init != "random":
            raise PSPInputError(f"--init {self.init} needs a table of tokenizer pieces or words; not with trigrams")
        if self.units != "piece" and (self.tokenizer or self.init_from):
            raise PSPInputError("--units word/trigram builds its own vocabulary: drop --tokenizer / --init-from")
        if self.piece_weights != "none" and (self.encoder_type not in ("psp", "mean") or characters):
            raise PSPInputError("--piece-weights applies to averaging encoders (psp, mean) of pieces or words only")
        if self.dropout > 0 and "max" in (
            self.encoder_type,
            self.second_encoder_type if self.combination != "none" else "",
        ):
            raise PSPInputError("--dropout is implemented for mean pooling and the other encoders, not max")


# ------------------------------------------------------------------------------------------ tokenizer and model
def build_run_units(args, folder: Path, texts) -> None:
    """Build the WORD/TRIGRAM tokenizer and unit codes from the training text; save them in `folder`."""
    from ...tokenization.pieces import wrap_fast_tokenizer
    from ...tokenization.units import build_units

    second = (args.second_units or args.units) if args.combination != "none" else None
    vocabulary = build_units(texts, args.units, second, min_count=args.min_count, lowercase=args.lowercase)
    folder.mkdir(parents=True, exist_ok=True)
    wrap_fast_tokenizer(vocabulary.tokenizer).save_pretrained(folder)
    (folder / UNITS_FILE).write_text(json.dumps(vocabulary.to_json()), encoding="utf-8")


def new_encoder(args, tokenizer, folder: Path, **config_kwargs):
    """The run's fresh `PSPEncoder`: P-SP's model, or the encoder `args` asks for over the run's tokenizer."""
    from ...encoder import PSPEncoder

    if args.plain_encoder():
        return PSPEncoder.from_tokenizer(tokenizer, **config_kwargs)
    combination = None if args.combination == "none" else args.combination
    if args.units == "piece":
        if combination is not None:
            config_kwargs.update(combination=combination, second_encoder={"encoder_type": args.second_encoder_type})
        return PSPEncoder.from_tokenizer(tokenizer, encoder_type=args.encoder_type, **config_kwargs)
    from ...tokenization.units import UnitVocabulary, model_for_units

    saved = json.loads((folder / UNITS_FILE).read_text(encoding="utf-8"))
    vocabulary = UnitVocabulary(tokenizer.backend_tokenizer, saved["config"], saved["codes"])
    hidden_size, seed = config_kwargs.pop("hidden_size"), config_kwargs.pop("seed")
    model, unit_tokenizer = model_for_units(
        vocabulary, hidden_size, args.encoder_type, combination, args.second_encoder_type, seed=seed, **config_kwargs
    )
    return PSPEncoder(model, unit_tokenizer)


def model_tables(model) -> list[torch.nn.Parameter]:
    """The embedding tables of a model (two for a combination)."""
    return [model.stream_table(index).weight for index in range(model.stream_count)]


def configure_training_encoder(module, args, training_dir: Path, resuming: bool, pulled_rows: Any = None) -> None:
    """Give a `TrainingEncoder` the scrambling rate and, with --init-l2, the initial tables (saved for resume).

    `pulled_rows` (row ids of the first table, e.g. those --init-rows-from copied) limits the pull to those rows.
    """
    import torch

    module.scramble_rate = args.scramble_rate
    module.init_l2 = args.init_l2
    if args.init_l2 <= 0:
        return
    from safetensors.torch import load_file, save_file

    path = training_dir / INITIAL_TABLES
    if resuming and path.is_file():
        saved = load_file(path)
        module.initial_tables = [saved[str(index)] for index in range(len(model_tables(module.model)))]
        module.pulled_rows = saved.get(PULLED_ROWS)
        return
    module.initial_tables = [table.detach().clone() for table in model_tables(module.model)]
    tensors = {str(i): table.cpu().contiguous() for i, table in enumerate(module.initial_tables)}
    module.pulled_rows = None
    if pulled_rows is not None:
        mask = torch.zeros(module.initial_tables[0].shape[0], dtype=torch.float32)
        mask[torch.as_tensor(pulled_rows, dtype=torch.long)] = 1.0
        module.pulled_rows = tensors[PULLED_ROWS] = mask
    from ...io.writing import atomic_path

    with atomic_path(path) as temporary:  # a link planted at the name is replaced, not written through
        save_file(tensors, temporary)


# ------------------------------------------------------------------------------------------ training embedding
def scramble_bags(
    ids: torch.Tensor, offsets: torch.Tensor, rate: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """`ids` with the order inside each bag shuffled, each bag with probability `rate` (bags stay in place)."""
    import torch

    from ...modeling.encoders_psp import bag_positions

    if rate <= 0 or ids.numel() == 0:
        return ids
    bag, position, lengths = bag_positions(offsets, ids.numel())
    chosen = torch.rand(offsets.numel(), generator=generator, device=ids.device) < rate
    noise = torch.rand(ids.numel(), generator=generator, device=ids.device)
    within = torch.where(chosen[bag], noise, position.to(noise.dtype) / (lengths[bag].to(noise.dtype) + 1))
    order = torch.argsort(bag.to(torch.float64) + within.to(torch.float64))
    return ids[order]


def train_embed(module, flat_ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Sentence embeddings while training, for any encoder: units, scrambling, a compact (sparse-gradient)
    lookup of each distinct row, dropout, the head; sets `module.l2_penalty` (0 without --init-l2)."""
    import torch
    from torch.nn import functional as F

    model = module.model
    parts = []
    penalty = flat_ids.new_zeros((), dtype=torch.float32)
    for index in range(model.stream_count):
        ids, bag_offsets = model.stream_units(index, flat_ids, offsets)
        ids = scramble_bags(ids, bag_offsets, getattr(module, "scramble_rate", 0.0), module.generator)
        table = model.stream_table(index)
        distinct, local_ids = torch.unique(ids, return_inverse=True)
        rows = F.embedding(distinct, table.weight, sparse=table.sparse)
        initial = getattr(module, "initial_tables", None)
        if getattr(module, "init_l2", 0.0) > 0 and initial is not None:
            squared = (rows - initial[index].to(rows.device)[distinct]).pow(2)
            pulled = getattr(module, "pulled_rows", None)
            if pulled is not None and index == 0:
                squared = squared * pulled.to(rows.device)[distinct].unsqueeze(1)
            penalty = penalty + squared.sum()
        if module.dropout > 0:
            rows = rows[local_ids]
            keep = torch.rand(rows.shape, generator=module.generator, device=rows.device) >= module.dropout
            rows, local_ids = rows * keep / (1.0 - module.dropout), torch.arange(rows.shape[0], device=rows.device)
        parts.append(model.pool_stream(index, rows, local_ids, bag_offsets, table_ids=ids))
    module.l2_penalty = penalty
    return model.combine(parts)


__all__ = [
    "EncoderArguments",
    "build_run_units",
    "configure_training_encoder",
    "model_tables",
    "new_encoder",
    "scramble_bags",
    "train_embed",
]
