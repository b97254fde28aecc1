"""The English model whose rows start every language's table: `psp languages --init-rows-from e5-student`.

The seven models start the pieces their vocabulary shares with English from an English psp model's rows. With
e5-small as the teacher, those rows should live in e5's space: an English student of e5's whitened "query: "
labels gives every language a lower Tatoeba error, a higher or equal PUD dev score and a higher English STS12-16
than `make demo`'s student of all-MiniLM-L6-v2 (results/multilingual-distillation.md, "With English rows from an
English student of e5"). This module builds that student once, resumably, under ``OUT/english/``:

    corpus/      the English distillation corpus (`psp prepare distill-corpus --no-registry`: `make demo`'s corpus)
    labels/      e5-small-query's labels of its first ENGLISH_SENTENCES sentences (ONNX int8; a killed run resumes)
    model/       the student (`make demo`'s distillation recipe on the whitened labels; a killed run resumes)
    done-<step>  written when a step succeeded; a later run skips that step

The measured student (results/teachers-english.md, "At 300,000 corpus sentences") is this recipe: STS-B dev 84.24,
STS12-16 74.72; built by this module, STS-B dev 84.07 and STS12-16 74.47 (its own 30,000-piece vocabulary).
Labelling is most of the cost: 300,000 sentences at e5's 320 sentences/s on two idle cores is about 16 minutes
(35 minutes here beside other work; about a minute on a GPU), training about two minutes.
"""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from .build_steps import run_steps, step_record

if TYPE_CHECKING:
    from .languages import Settings

# The value of --init-rows-from that asks for this student.
E5_STUDENT = "e5-student"
# 300,000 measured (150,000 gave STS12-16 74.4); labels of the whole 1.2M-sentence corpus would take over an hour.
ENGLISH_SENTENCES = 300_000
ENGLISH_TEACHER = "e5-small-query"
# `make demo`'s distillation recipe (experiments.demo.DEMO_DISTILL_SETTINGS) at the measured 30,000 pieces, on e5's
# labels whitened with shrinkage 1 (STS-B dev 84.24 whitened against 63.54 as they come; S = 1 led on dev).
ENGLISH_STUDENT_SETTINGS = {
    "dim": 384, "vocab_size": 30_000, "lr": 0.01, "init_std": 0.1, "distill_weight": 1.0, "distill_batch_size": 512,
    "epochs": 10, "teacher_transform": "whiten", "teacher_whiten_shrink": 1.0,
}  # fmt: skip


def english_folder(out: Path) -> Path:
    """Where `psp languages --output OUT` keeps the English student's steps."""
    return out / "english"


def english_student(settings: Settings, sentences: int | None = None) -> Path:
    """The English student's model folder, built (or finished) first: corpus -> label -> train; `sentences` (default
    `settings.english_sentences`, else ENGLISH_SENTENCES) is how many corpus sentences are labelled."""
    sentences = sentences or settings.english_sentences or ENGLISH_SENTENCES
    folder = english_folder(settings.out)
    steps = {"corpus": _corpus, "label": _label, "train": _train}
    run_steps("en", folder, {step: partial(run, folder, settings, sentences) for step, run in steps.items()})
    return folder / "model"


def _corpus(folder: Path, settings: Settings, sentences: int) -> dict:
    from ..data.distill_corpus import build_distill_corpus

    result = build_distill_corpus(folder / "corpus", settings.data)
    return {"sentences": len(result.sentences)}


def _label(folder: Path, settings: Settings, sentences: int) -> dict:
    from ..data.distill_corpus import label_corpus

    labelled, total, seconds = label_corpus(
        folder / "corpus",
        folder / "labels",
        teacher=ENGLISH_TEACHER,
        threads=settings.threads or os.cpu_count() or 1,
        max_sentences=sentences,
    )
    return {"teacher": ENGLISH_TEACHER, "sentences": total, "labelled_now": labelled, "label_seconds": seconds}


def training_arguments(folder: Path, settings: Settings):
    """The student's `TrainingArguments` (resuming a killed run)."""
    from ..training import TrainingArguments
    from ..training.arguments.command_line import with_flags

    model = folder / "model"
    values = {
        **ENGLISH_STUDENT_SETTINGS,
        "teacher_cache": str(folder / "labels"),
        "output_dir": str(model),
        "quiet": True,
        "resume": (model / "training" / "checkpoint.json").is_file(),
    }
    if settings.threads:
        values["threads"] = settings.threads
    return with_flags(TrainingArguments(**values), ())


def _train(folder: Path, settings: Settings, sentences: int) -> dict:
    from ..errors import PSPInputError
    from ..training import Trainer
    from ..training.arguments.command_line import command_line
    from ..training.reporting.metrics_log import end_record

    arguments = training_arguments(folder, settings)
    trainer = Trainer(arguments)
    trainer.train()
    if trainer.push_status:
        raise PSPInputError(f"English student: training ended with status {trainer.push_status}")
    end = end_record(folder / "model")
    return {"arguments": command_line(arguments), "steps": end.get("step"), "kept": end.get("kept")}


def rows_description(out: Path, init_rows_from: str | None) -> str | None:
    """What a language's card says its English rows came from, when they came from this student (None otherwise):
    the teacher, the corpus and each of the corpus's sources with its licence."""
    folder = english_folder(out)
    if init_rows_from is None or Path(init_rows_from).resolve() != (folder / "model").resolve():
        return None
    labelled = step_record(folder, "label")["sentences"]
    report = json.loads((folder / "corpus" / "report.json").read_text(encoding="utf-8"))
    sources = "; ".join(f"{name}: {entry['license']}" for name, entry in report.get("sources", {}).items())
    return (
        f'an English student of {ENGLISH_TEACHER}\'s whitened labels (e5-small with its "query: " prompt, MIT) of '
        f"{labelled:,} sentences of make demo's English corpus ({sources})"
    )
