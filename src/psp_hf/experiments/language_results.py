"""What a `psp languages` build scores, and its rows: the languages it knows, the tasks each model is evaluated
on, and summary.json / summary.md (one row per language evaluated in the output folder)."""

from __future__ import annotations

from pathlib import Path

from ..data.sources.registry_bitext import SOURCE_PREFIXES
from ..io.reading import read_json
from ..io.writing import atomic_path, write_json
from .build_steps import step_done, step_record

LANGUAGES = ("ar", "de", "es", "fr", "ru", "tr", "zh")
# The STS17 tracks that involve each language (the others have none).
STS17_TRACKS = {"ar": ["ar-ar", "ar-en"], "es": ["es-es", "es-en", "es-en-wmt"], "tr": ["tr-en"]}
ENGLISH_TASKS = ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb"]
# The dev sets, scored on the finished model beside the tests (error %, both directions): XNLI's dev split (the
# everyday register) and PUD (news, Wikipedia). They chose the checkpoint; they are reported, never a target.
DEV_TASKS = ["xnli-dev", "pud-dev"]
# Tatoeba is also scored by ratio margin over this many neighbours (Artetxe & Schwenk), beside nearest cosine.
TATOEBA_MARGIN_K = 4


def data_description(inputs: list[str]) -> str:
    """The data folder's files by name, and how many registry sources came with them."""
    files = [name for name in inputs if not name.startswith(SOURCE_PREFIXES)]
    sources = len(inputs) - len(files)
    return ", ".join(files) + (f" + {sources} registry source{'s' if sources > 1 else ''}" if sources else "")


def language_row(code: str, folder: Path) -> dict:
    """One summary row: data, pairs, minutes, Tatoeba, STS17, English STS."""
    prepared, trained = step_record(folder, "prepare"), step_record(folder, "train")
    results = read_json(folder / "eval.json", what="psp eval's report")["results"]
    row = {
        "language": code,
        "data": data_description(prepared["inputs"]),
        "pairs": prepared["pairs"],
        "minutes": round((trained.get("train_seconds") or 0) / 60, 1),
        "tatoeba_error": results.get("tatoeba", {}).get(code, {}).get("error_rate"),
        "tatoeba_error_margin": results.get("tatoeba", {}).get(code, {}).get("error_rate_margin"),
        **dev_errors(results, code),
    }
    row.update(sts_scores(results))
    return row


def folder_rows(out: Path, rows: list[dict]) -> list[dict]:
    """`rows` (this run's languages) and the rows of every other language evaluated in `out` by an earlier run, in
    the order of LANGUAGES: the summary is the folder's, so languages built one command at a time share one table."""
    built = {row["language"]: row for row in rows}
    for code in LANGUAGES:
        if code not in built and step_done(out / code, "evaluate") and (out / code / "eval.json").is_file():
            built[code] = language_row(code, out / code)
    order = {code: index for index, code in enumerate(LANGUAGES)}
    return sorted(built.values(), key=lambda row: order.get(row["language"], len(order)))


def dev_errors(results: dict, code: str) -> dict:
    """XNLI-dev and PUD-dev retrieval error (%) of `code` in `psp eval`'s results (None where not scored)."""
    return {
        f"{task.replace('-', '_')}_error": results.get(task, {}).get(code, {}).get("error_rate") for task in DEV_TASKS
    }


def sts_scores(results: dict) -> dict:
    """STS17 by track, English STS12-16 (the mean of the five years) and STS-B test of `psp eval`'s results."""
    sts17 = results.get("sts17", {})
    years = [results[task]["pearson_mean"] for task in ENGLISH_TASKS[:5] if task in results]
    return {
        "sts17": {pair: scores["pearson"] for pair, scores in sts17.items() if isinstance(scores, dict)},
        "sts12_16": sum(years) / len(years) if len(years) == 5 else None,
        "stsb_test": results.get("stsb", {}).get("test", {}).get("pearson"),
    }


def write_summary(out: Path, rows: list[dict], multilingual: dict | None = None) -> str:
    """summary.json and summary.md in `out` (with `multilingual`: its row last, and its Tatoeba language by language
    beside the per-language models'); returns summary.md's text."""
    every = rows + ([multilingual] if multilingual else [])
    write_json(out / "summary.json", every)
    text = summary_markdown(every)
    if multilingual:
        text += "\n\np-sp-multilingual's Tatoeba is the mean of its languages'; by language:\n\n"
        text += comparison_markdown(rows, multilingual)
    with atomic_path(out / "summary.md") as tmp:
        tmp.write_text(text + "\n", encoding="utf-8")
    return text


def summary_markdown(rows: list[dict]) -> str:
    """The table of results/languages.md: one row per language."""

    def number(value, digits: int = 1) -> str:
        return "—" if value is None else f"{value:.{digits}f}"

    lines = [
        "| model | data | pairs | minutes | XNLI-dev error % | PUD-dev error % | Tatoeba error % | margin k=4 | STS17 "
        "| STS12-16 | STS-B test |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        sts17 = ", ".join(f"{pair} {value:.1f}" for pair, value in row["sts17"].items()) or "—"
        lines.append(
            f"| p-sp-{row['language']} | {row['data']} | {row['pairs']:,} | {row['minutes']} | "
            f"{number(row.get('xnli_dev_error'), 2)} | {number(row.get('pud_dev_error'), 2)} | "
            f"{number(row['tatoeba_error'])} | {number(row.get('tatoeba_error_margin'))} | {sts17} | "
            f"{number(row['sts12_16'])} | {number(row['stsb_test'])} |"
        )
    return "\n".join(lines)


def comparison_markdown(rows: list[dict], multilingual: dict) -> str:
    """p-sp-multilingual beside the per-language models, language by language (Tatoeba error %, nearest cosine
    and by margin)."""

    def number(value) -> str:
        return "—" if value is None else f"{value:.2f}"

    lines = [
        "| language | p-sp-xx Tatoeba % | p-sp-multilingual | p-sp-xx margin k=4 | p-sp-multilingual margin |",
        "|---|---|---|---|---|",
    ]
    by_language = {row["language"]: row for row in rows}
    for code, scores in multilingual["tatoeba"].items():
        own = by_language.get(code, {})
        lines.append(
            f"| {code} | {number(own.get('tatoeba_error'))} | {number(scores['error'])} | "
            f"{number(own.get('tatoeba_error_margin'))} | {number(scores['margin'])} |"
        )
    return "\n".join(lines)
