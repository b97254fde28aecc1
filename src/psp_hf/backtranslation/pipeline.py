"""`psp backtranslate` end to end: resumable translation into a folder, then the filters, then the card.

The output folder holds

* `translations.tsv`: `reference <TAB> translation <TAB> score` for every input line, in input order
  (score = the translation's negative log-probability per token);
* `pairs.tsv`: the pairs inside every bound, `sentence1` (reference) `sentence2` (translation), `score`
  (psp paraphrase score, when a psp model was given) and the other measures, ready for
  `psp prepare paraphrases`;
* `report.json` (settings, counts, measure summaries) and `README.md` (the dataset card).

While translating, each chunk of input lines becomes `parts/part-NNNNNN.tsv`, written atomically; a rerun of
the same command skips the chunks that exist, so a killed run continues where it stopped. `run.json` holds
the settings the parts were made with; a rerun with other settings is refused rather than mixed in.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..errors import PSPInputError
from ..io.reading import iter_tsv, read_regular_file
from ..io.writing import atomic_path
from . import filters as bt_filters
from .translate import BitextRow, read_bitext

TRANSLATIONS = "translations.tsv"
PAIRS = "pairs.tsv"
TRANSLATION_HEADER = ["reference", "translation", "score"]
PART_HEADER = ["line", *TRANSLATION_HEADER]


@dataclass
class TranslateSettings:
    """What identifies a translation run (a rerun must match to resume)."""

    bitext: str
    src_lang: str
    model: str
    beam_size: int = 1
    max_new_tokens: int = 256
    max_source_tokens: int = 512
    chunk_size: int = 1024
    columns: list | None = None
    header: str = "auto"
    target_token: str | None = None
    tokenizer_src_lang: str | None = None
    input_size: int = 0
    input_mtime_ns: int = 0


@dataclass
class FilterSettings:
    """Which measures to compute and the bounds to apply."""

    bounds: list[bt_filters.Bound] = field(default_factory=list)
    overlap_order: int = 3
    lm: str | None = None
    classifier: bool = False
    paraphrase_model: str | None = None
    batch_size: int = 32
    device: str | None = None
    seed: int = 0


def _chunks(rows: Iterator[BitextRow], size: int) -> Iterator[list[BitextRow]]:
    chunk: list[BitextRow] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def part_path(out: Path, index: int) -> Path:
    """The file of chunk `index`."""
    return out / "parts" / f"part-{index:06d}.tsv"


def _check_run(out: Path, settings: TranslateSettings, overwrite: bool) -> bool:
    """Prepare `out` for the run; True when `out` already holds its complete translations."""
    state = out / "run.json"
    wanted = asdict(settings)
    # A run that stopped before its first chunk has nothing to resume: a corrected command simply starts over.
    nothing_done = not any((out / "parts").glob("part-*.tsv")) and not (out / TRANSLATIONS).is_file()
    if state.is_file():
        try:
            saved = json.loads(read_regular_file(state).decode("utf-8"))
            if not isinstance(saved.get("settings"), dict):
                raise ValueError("no settings object")
        except (OSError, ValueError, AttributeError) as error:
            if not (overwrite or nothing_done):
                raise PSPInputError(
                    f"{state}: cannot be read ({error}); pass --overwrite to start this folder afresh, or another --out"
                ) from None
            saved = {"settings": None}  # rewritten below
        if overwrite:
            shutil.rmtree(out / "parts", ignore_errors=True)
            for name in (TRANSLATIONS, PAIRS, "report.json", "run.json"):
                (out / name).unlink(missing_ok=True)
        elif saved["settings"] != wanted and not nothing_done:
            changed = sorted(k for k in wanted if saved["settings"].get(k) != wanted[k])
            raise PSPInputError(
                f"{out}: holds a run with other settings ({', '.join(changed)} differ); rerun it with the same "
                "arguments to resume, or pass --overwrite or another --output"
            )
        elif saved["settings"] == wanted:
            return bool(saved.get("complete")) and (out / TRANSLATIONS).is_file()
    elif out.exists() and any(out.iterdir()) and not overwrite:
        raise PSPInputError(
            f"{out}: exists and is not a psp backtranslate folder; pass --overwrite or another --output"
        )
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(state) as tmp:
        tmp.write_text(json.dumps({"settings": wanted, "complete": False}, indent=1))
    # Temporary files of a killed run's chunk writes; the chunk itself is redone.
    for stale in (out / "parts").glob(".part-*.tmp"):
        stale.unlink(missing_ok=True)
    return False


def translate_bitext(
    out: str | os.PathLike,
    settings: TranslateSettings,
    make_translator: Callable[[], object],
    batch_size: int = 32,
    overwrite: bool = False,
    progress: bool = False,
    stop_after_chunks: int | None = None,
) -> dict:
    """Translate the bitext's source side into `out/translations.tsv`, resuming from `out/parts`.

    `make_translator()` returns a `Translator` (called only when a chunk is left to translate).
    `stop_after_chunks` stops after that many newly written chunks, as an interrupted run would. Returns
    counts: pairs, chunks translated now, chunks found done, seconds, pairs per second.
    """
    from tqdm.auto import tqdm

    out = Path(out)
    rows = read_bitext(settings.bitext, settings.src_lang, settings.columns, settings.header)
    first = next(rows, None)
    if first is None:  # said of the input, before the output folder is touched (the filter would name the output)
        raise PSPInputError(
            f"{settings.bitext}: no sentence pairs to back-translate (the file is empty, or holds only a header)"
        )
    rows = itertools.chain([first], rows)
    if _check_run(out, settings, overwrite):
        return {"pairs": _count_rows(out / TRANSLATIONS), "chunks_translated": 0, "already_complete": True}
    translator = None
    done = skipped = pairs = 0
    started = time.perf_counter()
    translated_pairs = 0
    busy = 0.0  # translating and writing, without loading the model
    bar = tqdm(desc="translating", unit="pair", disable=not progress, dynamic_ncols=True)
    try:
        for index, chunk in enumerate(_chunks(rows, settings.chunk_size)):
            pairs += len(chunk)
            path = part_path(out, index)
            if path.is_file():
                skipped += 1
                bar.update(len(chunk))
                continue
            if stop_after_chunks is not None and done >= stop_after_chunks:
                return {"pairs": pairs, "chunks_translated": done, "chunks_found": skipped, "interrupted": True}
            if translator is None:
                translator = make_translator()
            chunk_started = time.perf_counter()
            translations, costs = translator.translate([row.source for row in chunk], batch_size, progress=bar)
            with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
                handle.write("\t".join(PART_HEADER) + "\n")
                for row, translation, cost in zip(chunk, translations, costs, strict=True):
                    reference = " ".join(row.reference.split())
                    handle.write(f"{row.line}\t{reference}\t{translation}\t{cost:.6f}\n")
            done += 1
            translated_pairs += len(chunk)
            busy += time.perf_counter() - chunk_started
    finally:
        bar.close()
    seconds = time.perf_counter() - started
    _join_parts(out, index + 1 if pairs else 0)
    state = out / "run.json"
    with atomic_path(state) as tmp:
        tmp.write_text(json.dumps({"settings": asdict(settings), "complete": True, "pairs": pairs}, indent=1))
    shutil.rmtree(out / "parts", ignore_errors=True)
    return {
        "pairs": pairs,
        "chunks_translated": done,
        "chunks_found": skipped,
        "seconds": round(seconds, 3),
        "pairs_per_second": round(translated_pairs / busy, 2) if busy > 0 and translated_pairs else None,
    }


def _join_parts(out: Path, count: int) -> None:
    with atomic_path(out / TRANSLATIONS) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        handle.write("\t".join(TRANSLATION_HEADER) + "\n")
        for index in range(count):
            for _, fields in iter_tsv(part_path(out, index), header=PART_HEADER):
                handle.write("\t".join(fields[1:]) + "\n")


def _count_rows(path: Path) -> int:
    return sum(1 for _ in iter_tsv(path, header=True))


def read_translations(path: str | os.PathLike) -> tuple[list[str], list[str], np.ndarray]:
    """References, translations and costs of a `translations.tsv`; errors name FILE:LINE."""
    references, translations, costs = [], [], []
    for number, (reference, translation, score) in iter_tsv(path, header=TRANSLATION_HEADER):
        try:
            costs.append(float(score))
        except ValueError:
            raise PSPInputError(f"{path}:{number}: score {score!r} is not a number") from None
        references.append(reference)
        translations.append(translation)
    return references, translations, np.asarray(costs, dtype=np.float64)


def compute_measures(
    references: Sequence[str], translations: Sequence[str], costs: np.ndarray, settings: FilterSettings
) -> dict[str, np.ndarray]:
    """Every measure the settings ask for (the model-free ones always)."""
    measures = {
        "length": bt_filters.translation_lengths(translations),
        "cost": np.asarray(costs, dtype=np.float64),
        "overlap": bt_filters.overlaps(references, translations, settings.overlap_order),
        "bleu": bt_filters.sentence_bleus(references, translations),
    }
    if settings.lm:
        measures["lm"] = bt_filters.language_model_nll(
            translations, settings.lm, batch_size=settings.batch_size, device=settings.device
        )
    if settings.classifier:
        measures["machine"] = bt_filters.machine_scores(references, translations, seed=settings.seed)
    if settings.paraphrase_model:
        measures["score"] = bt_filters.paraphrase_scores(references, translations, settings.paraphrase_model)
    return measures


def filter_translations(out: str | os.PathLike, settings: FilterSettings) -> dict:
    """Measure and filter `out/translations.tsv` into `out/pairs.tsv`; returns the filter report."""
    out = Path(out)
    references, translations, costs = read_translations(out / TRANSLATIONS)
    if not references:
        raise PSPInputError(f"{out / TRANSLATIONS}: no pairs to filter")
    measures = compute_measures(references, translations, costs, settings)
    result = bt_filters.apply_bounds(measures, settings.bounds)
    columns = [name for name in ("score", "cost", "length", "overlap", "bleu", "lm", "machine") if name in measures]
    with atomic_path(out / PAIRS) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        handle.write("\t".join(["sentence1", "sentence2", *columns]) + "\n")
        for index in np.flatnonzero(result.keep):
            values = [f"{measures[name][index]:.6g}" for name in columns]
            handle.write("\t".join([references[index], translations[index], *values]) + "\n")
    report = result.report()
    report["overlap_order"] = settings.overlap_order
    report["measures"] = {name: bt_filters.summary(values) for name, values in measures.items()}
    return report
