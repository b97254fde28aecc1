"""`psp data fetch`: the data folder's layout built from the Hub, resumable, with a record of where each file came from.

    psp data fetch --for eval -o data            # the evaluation sets psp eval reads (MTEB's copies)
    psp data fetch --for demo -o data            # + what make demo trains on (caption pairs, Wikipedia)
    psp data fetch --for languages --langs de,fr -o data

Every file is written whole or not at all (a temporary file renamed at the end), and listed once done in
`MANIFEST.tsv` (path, records, bytes, sha256: the same columns as the shared folder's, so `psp eval` checks the
files it reads against it) and `SOURCES.tsv` (path, dataset, config, split, revision, licence, protocol). A rerun
skips every file listed with a matching checksum: a killed or failed fetch resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import PSPInputError
from ..evaluation.data import sha256_file
from ..evaluation.hub_data import SOURCES_COLUMNS, SOURCES_FILE, eval_items, sources_of, sts12_train
from ..io.reading import iter_tsv
from ..io.writing import atomic_path
from ..public_data import FetchItem, HubReadError, check_split, forget_revisions, read_rows
from .sources.hub import demo_items, open_for_writing

logger = logging.getLogger(__name__)

PURPOSES = ("eval", "demo", "languages")
MANIFEST_COLUMNS = ("path", "records", "bytes", "sha256")
EVAL_TASKS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "sts17", "tatoeba")
DEMO_TASKS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")
# `psp languages` scores each model on Tatoeba and STS17 for its language, and on the English sets.
LANGUAGES_TASKS = EVAL_TASKS
STS17_BY_LANGUAGE = {"ar": ("ar-ar", "ar-en"), "es": ("es-es", "es-en"), "tr": ("tr-en",)}


def items_for(purpose: str, languages: Sequence[str] | None = None, wikipedia_sentences: int | None = None) -> list:
    """What `--for PURPOSE` fetches (`languages`: the Tatoeba and STS17 sets of those languages)."""
    from ..evaluation.data import STS17_DEFAULT_PAIRS, TATOEBA_DEFAULT_LANGUAGES

    if purpose not in PURPOSES:
        raise PSPInputError(f"--for {purpose!r}: give one of {', '.join(PURPOSES)}")
    langs = list(languages) if languages else list(TATOEBA_DEFAULT_LANGUAGES)
    if purpose == "demo":
        extra = demo_items() if wikipedia_sentences is None else demo_items(wikipedia_sentences)
        return [*eval_items(DEMO_TASKS), sts12_train(), *extra]
    pairs = list(STS17_DEFAULT_PAIRS)
    if languages:
        pairs = ["en-en", *(pair for code in langs for pair in STS17_BY_LANGUAGE.get(code, ()))]
    return eval_items(EVAL_TASKS if purpose == "eval" else LANGUAGES_TASKS, langs, pairs)


def _read_manifest(out: Path) -> dict[str, tuple[str, ...]]:
    path = out / "MANIFEST.tsv"
    if not path.is_file():
        return {}
    return {row[0]: tuple(row) for _, row in iter_tsv(path, header=list(MANIFEST_COLUMNS))}


def _write_table(path: Path, columns: Sequence[str], rows: dict[str, tuple[str, ...]]) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(
            "\t".join(columns) + "\n" + "".join("\t".join(rows[key]) + "\n" for key in sorted(rows)), encoding="utf-8"
        )


def _done(out: Path, item: FetchItem, manifest: dict, sources: dict) -> bool:
    for name in item.paths:
        path = out / name
        if name not in sources or name not in manifest or not path.is_file():
            return False
        if sources[name]["dataset"] != item.hub_set.repo_id or manifest[name][3] != sha256_file(path):
            return False
    return True


def fetch(
    out: str | os.PathLike,
    items: Sequence[FetchItem],
    *,
    progress: bool = False,
    say: Callable[[str], None] = logger.info,
) -> dict:
    """Write `items` under `out` (see the module text); returns {"fetched": [...], "skipped": [...], "folder": ...}."""
    out = Path(out)
    if (out / "MANIFEST.tsv").is_file() and not (out / SOURCES_FILE).is_file():
        raise PSPInputError(
            f"{out} holds a data folder that psp data fetch did not make (MANIFEST.tsv without {SOURCES_FILE}); "
            "fetch into another folder"
        )
    out.mkdir(parents=True, exist_ok=True)
    forget_revisions()
    manifest = _read_manifest(out)
    sources = {name: dict(row) for name, row in sources_of(out).items()}
    todo = [item for item in items if not _done(out, item, manifest, sources)]
    for item in todo:  # every config and split there before any download: a typo costs no waiting
        check_split(item.hub_set, item.config, item.split)
    fetched, skipped = [], []
    for item in items:
        label = f"{item.hub_set.repo_id} {item.config}/{item.split}"
        if _done(out, item, manifest, sources):
            skipped.extend(item.paths)
            continue
        sha, rows = read_rows(item.hub_set, item.config, item.split, limit=item.limit)
        try:
            records = _write_item(out, item, rows, label, progress)
        except HubReadError as error:
            kept = len(fetched) + len(skipped)
            raise HubReadError(
                f"{error}. {kept} file(s) in {out} are complete and kept: run the same command again to resume"
            ) from None
        for name in item.paths:
            path = out / name
            manifest[name] = (name, str(records), str(path.stat().st_size), sha256_file(path))
            sources[name] = {
                "dataset": item.hub_set.repo_id,
                "config": item.config,
                "split": item.split,
                "revision": sha,
                "license": item.hub_set.license,
                "protocol": item.protocol,
            }
        # Both records after each item: a kill later keeps what is done.
        _write_table(out / "MANIFEST.tsv", MANIFEST_COLUMNS, manifest)
        source_rows = {name: (name, *(info[c] for c in SOURCES_COLUMNS[1:])) for name, info in sources.items()}
        _write_table(out / SOURCES_FILE, SOURCES_COLUMNS, source_rows)
        say(f"fetched {label} ({records:,} records, revision {sha[:12]}) -> {', '.join(item.paths)}")
        fetched.extend(item.paths)
    return {"folder": str(out), "fetched": fetched, "skipped": skipped}


def _write_item(out: Path, item: FetchItem, rows, label: str, progress: bool) -> int:
    from tqdm.auto import tqdm

    with contextlib.ExitStack() as stack:
        handles = []
        for name in item.paths:
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            tmp = stack.enter_context(atomic_path(out / name))
            handles.append(stack.enter_context(open_for_writing(tmp, compress=name.endswith(".gz"))))
        bar = stack.enter_context(tqdm(desc=label, unit=" rows", disable=not progress, leave=False))

        def counted():
            for row in rows:
                bar.update(1)
                yield row

        records = item.write(counted(), handles)
        for handle in handles:
            handle.close()  # before atomic_path renames the file
    if records == 0:
        raise PSPInputError(f"{label}: no rows; nothing written")
    return records
