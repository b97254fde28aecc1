"""Multilingual distillation with a teacher that embeds every language: the settings, the monolingual text stream.

An English-only teacher (all-MiniLM-L6-v2) can only label the English side of a pair, so both sides of a pair
learn teacher(en) (`--bitext-targets en`, Reimers & Gurevych, 2020). A multilingual teacher (multilingual-e5,
USE-multilingual) labels the other side too, which opens two more targets and a new kind of text:

* `--bitext-targets same`: student(xx) -> teacher(xx) and student(en) -> teacher(en) (each side its own vector);
* `--bitext-targets both`: the mean of the two losses above (student(xx) learns both vectors);
* `--mono-data FILE...`: sentences in any language, one a line (`psp prepare mono` writes such a file with its
  sources and licences beside it); each training step adds a batch of them, student(text) -> teacher(text), at
  `--mono-weight`, `--mono-batch-size` sentences a step. The stream takes the place of the English distillation
  corpus's (`TeacherCorpus`): the same seeded passes and the same checkpointed position, so a resumed run
  continues it.

Every label goes through the run's `--teacher-cache` (keyed by sentence, only what the cache lacks is labelled).
`--dev-bitext FILE` scores checkpoints by mining accuracy on pairs of a file (the PUD sentences for `psp
languages`) instead of a slice held back from `--data`; a pair of the file met in `--data` is skipped.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import PSPInputError
from ..arguments.checks import setting
from .teacher_corpus import TeacherCorpus

logger = logging.getLogger(__name__)

BITEXT_TARGETS = ("auto", "en", "same", "both")
# Teachers known to embed all eight languages (names as `--teacher` and the cache give them); a teacher whose name
# says "multilingual" or "labse" counts too. Others are taken for English-only: --bitext-targets auto means en.
MULTILINGUAL_TEACHERS = ("e5-small", "e5-small-query", "use-multilingual", "e5-small+use-multilingual")
MULTILINGUAL_WORDS = ("multilingual", "labse", "e5-small")
# What auto means with a multilingual teacher (results/multilingual-distillation.md): en, same and both tied (de,
# e5-small, 100 steps: PUD mining accuracy 46.35 / 46.45 / 46.45) and en labels half as much, so en.
MULTILINGUAL_DEFAULT_TARGETS = "en"
# The language's default monolingual text: at full size (e5-small, same steps) PUD dev 99.65 against 99.4 without it
# for tr and 96.9 against 96.0 for ar. (At 2,465 pairs and 100 steps it had cost 8.65 points, before the vocabulary
# was trained on the text too.) Its weight was 0.3 while the text was the language's alone (weight 1 gave tr PUD
# 99.35); with English Wikipedia text beside it, weight 1 won on STS-B dev in six of the seven languages (mean
# +0.23) with PUD dev tied (mean +0.05) and raised English STS12-16 in all seven
# (results/multilingual-distillation.md, "`--mono-weight 1` in all seven languages").
MULTILINGUAL_DEFAULT_MONO = "default"
MONO_WEIGHT = 1.0
# e5's vectors share one large direction; `psp languages` whitens them (`--teacher-transform whiten`): on tr
# (14,589 pairs, 570 steps) PUD dev accuracy 96.7 whitened, 96.0 centred, 90.7 as they come, 94.8 with
# all-MiniLM-L6-v2 (results/multilingual-distillation.md).
E5_TEACHER_TRANSFORM = "whiten"


def default_teacher_transform(teacher: str | None) -> str:
    """The `--teacher-transform` `psp languages` gives a run distilled from `teacher`."""
    return E5_TEACHER_TRANSFORM if teacher is not None and str(teacher).startswith("e5-small") else "none"


@dataclass
class MultilingualArguments:
    """The multilingual-distillation settings of `TrainingArguments` (see the module text)."""

    bitext_targets: str = field(
        default="auto",
        metadata=setting(
            "multilingual distillation: which teacher vectors a pair's sides learn: en (both sides learn "
            "teacher(English side)), same (each side learns the teacher's vector of itself), both (the mean of the "
            "two); auto: en for an English-only teacher, " + MULTILINGUAL_DEFAULT_TARGETS + " for a multilingual one",
            choices=BITEXT_TARGETS,
        ),
    )
    mono_data: list[str] = field(
        default_factory=list,
        metadata=setting(
            "monolingual text for multilingual distillation (one sentence a line, .gz ok; a multilingual "
            "--teacher labels it): a batch of it joins every step, student(text) -> teacher(text)",
            fixed_on_resume=True,
        ),
    )
    mono_weight: float = field(
        default=MONO_WEIGHT, metadata=setting("weight of the --mono-data distillation loss", min=0)
    )
    mono_batch_size: int = field(
        default=128, metadata=setting("--mono-data sentences per training step (beside --batch-size pairs)", min=1)
    )
    dev_bitext: list[str] = field(
        default_factory=list,
        metadata=setting(
            "X-English pairs (TSVs with a header '<lang>\\ten', .gz ok) that score checkpoints by mining accuracy "
            "instead of pairs held back from --data; with several files a checkpoint's score is the mean of theirs "
            "(psp languages: the PUD sentences and XNLI's dev split); their pairs are never trained on",
            fixed_on_resume=True,
        ),
    )


def teacher_is_multilingual(name: str | None) -> bool:
    """Whether a teacher (as `--teacher` or a cache names it) embeds the non-English languages too."""
    if not name:
        return False
    text = str(name).lower()
    return Path(text).name in MULTILINGUAL_TEACHERS or any(word in text for word in MULTILINGUAL_WORDS)


def run_teacher_name(args) -> str | None:
    """The teacher of a run: `--teacher` ('default': all-MiniLM-L6-v2), else the one its cache names."""
    from ...teachers.labels import TeacherCache, teacher_name

    if args.teacher not in (None, "default"):
        return teacher_name(args.teacher)
    if args.teacher == "default":
        return teacher_name(None)
    return (TeacherCache(args.teacher_cache).meta() or {}).get("teacher") if args.teacher_cache else None


def resolved_targets(args, teacher: str | None) -> str:
    """`--bitext-targets` with auto resolved for `teacher`."""
    if args.bitext_targets != "auto":
        return args.bitext_targets
    return MULTILINGUAL_DEFAULT_TARGETS if teacher_is_multilingual(teacher) else "en"


MONO_SETTINGS = ("mono_data", "mono_weight", "mono_batch_size")


def card_settings(info: dict) -> dict:
    """`info` (a run's settings for its card) without the multilingual settings that did not apply to the run."""
    multilingual = info.get("lang") not in (None, "en") and (info.get("teacher") or info.get("teacher_cache"))
    unused: tuple[str, ...] = ()
    if not multilingual:
        unused = ("bitext_targets", *MONO_SETTINGS)
    elif not info.get("mono_data"):
        unused = MONO_SETTINGS
    return {key: value for key, value in info.items() if key not in unused}


def validate_multilingual(args) -> None:
    """Raise `PSPInputError` naming the flag when the multilingual settings of `args` clash."""
    if (args.mono_data or args.bitext_targets in ("same", "both")) and not args.pair_distill():
        flag = "--mono-data" if args.mono_data else f"--bitext-targets {args.bitext_targets}"
        raise PSPInputError(
            f"{flag} is multilingual distillation: it needs X-English --data with --lang and --teacher (or "
            "--teacher-cache and --distill-weight > 0)"
        )
    for path in args.mono_data:
        if not Path(path).is_file():
            raise PSPInputError(f"--mono-data {path}: no such file")
    if isinstance(args.dev_bitext, str):  # one file, as settings written before several dev sets give it
        args.dev_bitext = [args.dev_bitext]
    if args.dev_bitext:
        for path in args.dev_bitext:
            if not Path(path).is_file():
                raise PSPInputError(f"--dev-bitext {path}: no such file")
        if args.resolved_kind() != "bitext" or args.dev not in ("auto", "bitext"):
            raise PSPInputError("--dev-bitext is a bitext dev set: it needs --lang xx and --dev auto or bitext")


# --------------------------------------------------------------------------------------------- reading
def read_mono_sentences(paths: Sequence[str | os.PathLike]) -> list[str]:
    """The distinct non-empty lines of `paths`, in file order (whitespace folded)."""
    sentences: dict[str, None] = {}
    for path in map(Path, paths):
        opener = gzip.open if path.suffix == ".gz" else open
        try:
            with opener(path, "rb") as handle:
                for number, raw in enumerate(handle, 1):  # bytes, so a bad line is named by its number
                    try:
                        text = " ".join(raw.decode("utf-8").split())
                    except UnicodeDecodeError:
                        raise PSPInputError(f"--mono-data {path}:{number}: not UTF-8 text") from None
                    if text:
                        sentences[text] = None
        except (OSError, EOFError) as error:
            raise PSPInputError(f"--mono-data {path}: cannot read ({error})") from None
    if not sentences:
        raise PSPInputError(f"--mono-data {', '.join(map(str, paths))}: no sentences")
    return list(sentences)


def read_dev_pairs(path: str | os.PathLike, lang: str) -> list[tuple[str, str]]:
    """The (xx, en) pairs of a dev file: a header naming `lang` and `en`, then one tab-separated pair a line."""
    from ...io.reading import iter_tsv_columns

    pairs = [
        (other, english)
        for _, (other, english) in iter_tsv_columns(path, (lang, "en"), "--dev-bitext ")
        if other.strip() and english.strip()
    ]
    if not pairs:
        raise PSPInputError(f"--dev-bitext {path}: no pairs")
    return pairs


# --------------------------------------------------------------------------------------------- the stream
class MonoCorpus(TeacherCorpus):
    """`--mono-data` sentences with their teacher vectors: a `TeacherCorpus` whose rows come from a list, not a
    cache."""

    def __init__(self, paths: Sequence[str], sentences: list[str], vectors: np.ndarray, teacher: str, **shares):
        self.paths = [str(path) for path in paths]
        self.directory = None
        self.meta = {}
        self.sentences = sentences
        self.vectors = vectors.astype(np.float16)
        self.teacher = teacher
        self.dim = int(vectors.shape[1])
        self.seed = shares.get("seed", 0)
        self.rank = shares.get("rank", 0)
        self.world_size = shares.get("world_size", 1)
        self.pass_rows = None
        self.pass_size = len(sentences)
        self.shard_size = self.pass_size // self.world_size
        if self.shard_size < 1:
            raise PSPInputError(f"--mono-data: {len(sentences)} sentence(s) for {self.world_size} processes")
        self.tokens = None
        self._index = None
        self._order_epoch = None
        self._order = None

    def text_info(self) -> dict:
        """The monolingual text for the card: sentence count, sources and licences (from `psp prepare mono`)."""
        return {"mono_sentences": len(self.sentences), "training_text": describe_mono(self.paths, len(self))}


def describe_mono(paths: Sequence[str], count: int) -> str:
    """One line on the monolingual text: its sources and their licences when a `psp prepare mono` report is there."""
    parts, non_commercial = [], []
    for path in map(Path, paths):
        report_file = path.parent / "report.json"
        report = json.loads(report_file.read_text(encoding="utf-8")) if report_file.is_file() else {}
        sources = report.get("sources") if report.get("kind") == "mono" else None
        if not sources:
            parts.append(f"`{path.name}`")
            continue
        for name, info in sources.items():
            parts.append(f"{name} {info.get('kept', 0):,} ({info.get('license', 'licence not recorded')})")
            if info.get("non_commercial"):
                non_commercial.append(name)
    text = f"{count:,} monolingual sentences labelled by the teacher: " + "; ".join(parts)
    if non_commercial:
        text += (
            f". NON-COMMERCIAL: trained on {', '.join(non_commercial)} (CC BY-NC-SA 4.0): this model may be used "
            "for research and other non-commercial purposes only"
        )
    return text
