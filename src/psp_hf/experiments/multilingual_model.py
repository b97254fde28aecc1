"""`psp languages --multilingual`: one model for all the languages of a run, p-sp-multilingual.

It is built from what the per-language runs prepared, after them, in `OUT/multilingual/`:

    prepare   every language's filtered bitext in one column, `mul` (their English sides in `en`), and their
              monolingual text (duplicates once) -> data/ and mono/; one sentencepiece vocabulary of
              --multilingual-vocab-size pieces is trained on all of it. The dev sets (dev.tsv: PUD; dev-xnli-dev.tsv:
              XNLI's dev split) take each English sentence once, beside its translation into one language, the
              languages in turn: PUD and XNLI are parallel, the same English sentences in every language.
    label     through the run's teacher cache: the per-language runs labelled every sentence already.
    train     the per-language recipe (margin loss + distillation of the English sides and the monolingual text,
              rows started from the English model), --multilingual-epochs within --multilingual-minutes.
    evaluate  Tatoeba of every language of the run, every STS17 track, English STS12-16 and STS-B.
    card      hub_cards/multilingual.md, with every language's sources and licences.

Like the per-language steps, each writes `done-<step>` and a rerun skips it; training resumes from its checkpoint.
"""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from functools import partial
from pathlib import Path

from ..errors import PSPInputError
from ..io.reading import read_json
from ..io.writing import atomic_path, write_json
from .build_steps import run_steps, step_done, step_record
from .language_results import DEV_TASKS, STS17_TRACKS, sts_scores
from .languages import Settings, evaluate_folder, run_training, training_arguments, write_card
from .languages import _label as label_language

NAME = "multilingual"  # the folder, the card template and the model's name (p-sp-multilingual)
DATA_LANG = "mul"  # ISO 639-2's code for several languages: the data column of the mixed X sides
DEV_FILE = "dev.tsv"
STS17_ALL = [*(pair for pairs in STS17_TRACKS.values() for pair in pairs), "en-en"]  # every language's, and English


def build_multilingual(languages: list[str], settings: Settings) -> dict:
    """prepare -> label -> train -> evaluate -> card for the multilingual model, skipping steps already done."""
    folder = settings.out / NAME
    if step_done(folder, "prepare"):  # a rerun: the text it was made of must be the languages named now
        before = step_record(folder, "prepare").get("languages")
        if before != languages:
            raise PSPInputError(
                f"--multilingual: {folder} was built from {', '.join(before or [])}, this run names "
                f"{', '.join(languages)}: give another --output, or delete {folder} to build it again"
            )
    steps = {"prepare": _prepare, "label": _label, "train": _train, "evaluate": _evaluate, "card": _card}
    run_steps(NAME, folder, {step: partial(run, languages, folder, settings) for step, run in steps.items()})
    return multilingual_row(folder)


def _language_folders(languages: list[str], settings: Settings) -> list[tuple[str, Path]]:
    folders = [(code, settings.out / code) for code in languages]
    missing = [code for code, folder in folders if not step_done(folder, "prepare")]
    if missing:
        raise PSPInputError(f"--multilingual: {', '.join(missing)} not prepared yet (run psp languages for them)")
    return folders


def _prepare(languages: list[str], folder: Path, settings: Settings) -> dict:
    from ..data.prepare import prepare_bitext

    folders = _language_folders(languages, settings)
    mono = write_mono(folders, folder / "mono")  # also the vocabulary's text
    staging = Path(tempfile.mkdtemp(prefix="psp-multilingual-"))
    try:
        inputs = [stage_language(code, language_folder, staging) for code, language_folder in folders]
        report = prepare_bitext(
            inputs,
            DATA_LANG,
            folder / "data",
            min_tokens=1,  # each language's own filter ran already; this pass removes only cross-language duplicates
            length_unit="words",
            overwrite=True,
            vocab_size=settings.multilingual_vocab_size,
            tokenizer_texts=mono,
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    write_dev_sets(languages, folder, settings)
    return {"pairs": report["pairs_out"], "languages": languages, "mono_sentences": len(mono)}


def stage_language(code: str, language_folder: Path, staging: Path) -> Path:
    """One language's prepared pairs as `<code>.tsv` with the columns `mul` and `en` (named after the language, so
    the report counts each)."""
    import pyarrow.parquet as pq

    path = staging / f"{code}.tsv"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"{DATA_LANG}\ten\n")
        for shard in sorted((language_folder / "data" / "data").glob("*.parquet")):
            table = pq.read_table(shard, columns=[code, "en"])
            for other, english in zip(table.column(code).to_pylist(), table.column("en").to_pylist(), strict=True):
                handle.write(f"{other}\t{english}\n")
    return path


def write_mono(folders: list[tuple[str, Path]], out: Path) -> list[str]:
    """Every language's monolingual text in one file (a sentence once), with a report naming each source: returns
    the sentences written (none, and no folder, when no language has any)."""
    from .languages_data import mono_path

    shutil.rmtree(out, ignore_errors=True)
    paths = [(code, mono_path(language_folder)) for code, language_folder in folders]
    paths = [(code, path) for code, path in paths if path is not None]
    if not paths:
        return []
    out.mkdir(parents=True)
    seen: dict[str, None] = {}  # insertion-ordered: the sentences in the order written
    sources: dict[str, dict] = {}
    with atomic_path(out / "sentences.txt.gz") as tmp, gzip.open(tmp, "wt", encoding="utf-8") as handle:
        for code, path in paths:
            with gzip.open(path, "rt", encoding="utf-8") as lines:
                for line in lines:
                    sentence = line.rstrip("\n")
                    if sentence and sentence not in seen:
                        seen[sentence] = None
                        handle.write(sentence + "\n")
            report = json.loads((path.parent / "report.json").read_text(encoding="utf-8"))
            sources.update({f"{code}/{name}": info for name, info in report.get("sources", {}).items()})
    report = {"kind": "mono", "lang": DATA_LANG, "sources": sources, "sentences": len(seen)}
    write_json(out / "report.json", report)
    return list(seen)


def dev_paths(folder: Path, settings: Settings) -> dict:
    """{dev set (a `Source`): its file in `folder`} for the dev sets of `--dev` (PUD's is dev.tsv, as before)."""
    from ..data.sources.language_sources import DEV_SOURCE, dev_sets

    return {
        source: folder / (DEV_FILE if source == DEV_SOURCE else f"dev-{source.name}.tsv")
        for source in dev_sets(settings.dev)
    }


def write_dev_sets(languages: list[str], folder: Path, settings: Settings, missing_only: bool = False) -> list[Path]:
    """The dev files of `--dev` in `folder` (with `missing_only`: only those an earlier version did not write)."""
    paths = dev_paths(folder, settings)
    for source, path in paths.items():
        if not (missing_only and path.is_file()):
            write_dev(languages, settings.data, path, source)
    return list(paths.values())


def write_dev(languages: list[str], data: Path, out: Path, source=None) -> int:
    """The dev pairs of `source` (PUD unless named), each English sentence once, beside its translation into
    languages[i % n] for the i-th English sentence (in the first language's order); the dev sets are parallel."""
    from ..data.sources.language_sources import DEV_SOURCE, dev_file
    from ..training.data.multilingual import read_dev_pairs

    source = source or DEV_SOURCE
    translations: dict[str, dict[str, str]] = {}  # English -> language -> its X side
    for code in languages:
        for other, english in read_dev_pairs(dev_file(data, code, source), code):
            translations.setdefault(english, {}).setdefault(code, other)
    count = 0
    with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        handle.write(f"{DATA_LANG}\ten\n")
        for index, (english, by_language) in enumerate(translations.items()):
            code = languages[index % len(languages)]
            other = by_language.get(code) or next(iter(by_language.values()))
            handle.write(f"{other}\t{english}\n")
            count += 1
    return count


def _label(languages: list[str], folder: Path, settings: Settings) -> dict:
    return label_language(DATA_LANG, folder, settings)


def multilingual_arguments(folder: Path, settings: Settings, resume: bool = False):
    """The per-language training settings with the multilingual run's data, dev set, epochs and minutes."""
    # Everything else, the SIF piece weights and the margin of 0.6 included, is the seven's recipe: its dev sets
    # chose those too (results/languages.md).
    overrides = {
        "epochs": settings.multilingual_epochs,
        "max_minutes": settings.multilingual_minutes,
        "vocab_size": settings.multilingual_vocab_size,  # the prepared vocabulary's size, as the card records it
    }
    overrides["dev_bitext"] = [str(path) for path in dev_paths(folder, settings).values()]
    return training_arguments(DATA_LANG, folder, settings, resume=resume, overrides=overrides)


def _train(languages: list[str], folder: Path, settings: Settings) -> dict:
    resume = (folder / "model" / "training" / "checkpoint.json").is_file()
    if not resume:  # prepared by an earlier version: the dev sets it did not write yet
        write_dev_sets(languages, folder, settings, missing_only=True)
    return run_training(NAME, folder, multilingual_arguments(folder, settings, resume))


def _evaluate(languages: list[str], folder: Path, settings: Settings) -> dict:
    return evaluate_folder(folder, settings, tatoeba_languages=languages, sts17_pairs=STS17_ALL)


def _card(languages: list[str], folder: Path, settings: Settings) -> dict:
    from .languages_data import card_training_text

    def describe(info: dict) -> tuple[str, bool]:
        parts, non_commercial = [], False
        for code in languages:
            text, restricted = card_training_text(settings.out / code, None)
            parts.append(f"{code}: {text}")
            non_commercial = non_commercial or restricted
        pairs = step_record(folder, "prepare")["pairs"]
        text = f"the {len(languages)} languages' prepared text, {pairs:,} pairs after removing duplicates. "
        text += " | ".join(parts)
        if info.get("dev_bitext"):
            sets = "; ".join(f"{source.name} ({source.license})" for source in dev_paths(folder, settings))
            several = len(info["dev_bitext"]) > 1 if isinstance(info["dev_bitext"], list) else False
            rule = ", scored by the mean of their mining accuracies" if several else ""
            text += (
                f". Dev sets (checkpoints chosen on them{rule}, never trained on): {sets}, each English sentence "
                "once, beside one of its translations"
            )
        return text, non_commercial

    return write_card(NAME, folder, settings, describe)


def multilingual_row(folder: Path) -> dict:
    """The summary's row of the multilingual model: Tatoeba of every language and their mean, STS17, English STS."""
    prepared, trained = step_record(folder, "prepare"), step_record(folder, "train")
    results = read_json(folder / "eval.json", what="psp eval's report")["results"]
    found = results.get("tatoeba", {})
    tatoeba = {
        code: {"error": found[code].get("error_rate"), "margin": found[code].get("error_rate_margin")}
        for code in prepared["languages"]
        if isinstance(found.get(code), dict)
    }

    def mean(key: str) -> float | None:
        values = [scores[key] for scores in tatoeba.values() if scores[key] is not None]
        return sum(values) / len(values) if values else None

    return {
        "language": NAME,
        "data": f"the prepared text of {', '.join(prepared['languages'])}",
        "pairs": prepared["pairs"],
        "minutes": round((trained.get("train_seconds") or 0) / 60, 1),
        "tatoeba_error": mean("error"),  # the mean over the languages
        "tatoeba_error_margin": mean("margin"),
        "tatoeba": tatoeba,
        # The dev sets' error, the mean over the languages, as Tatoeba's.
        **{f"{task.replace('-', '_')}_error": results.get(task, {}).get("error_rate_mean") for task in DEV_TASKS},
        **sts_scores(results),
    }
