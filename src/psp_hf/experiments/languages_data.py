"""`psp languages`' data: the sources chosen by name, the monolingual text, what is labelled, what the card says.

The prepare step writes `<xx>/data/` (the chosen bitext sources, each staged as one file named after it, plus the
Debian registry pairs) and, when monolingual text is chosen, `<xx>/mono/` (`language_sources.prepare_mono`).
The label step labels every sentence the run's teacher will be asked for: the English sides, the other sides when
the bitext targets need them (a multilingual teacher), and the monolingual text. The PUD pairs are the dev set.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..data.sources.hub import split_selection, stage_hub_bitext
from ..data.sources.language_sources import (
    bitext_sources,
    dev_files,
    dev_sets,
    mono_sources,
    prepare_mono,
    source_licences,
    stage_bitext,
)
from ..training.data.multilingual import (
    MULTILINGUAL_DEFAULT_MONO,
    MULTILINGUAL_DEFAULT_TARGETS,
    default_teacher_transform,
    describe_mono,
    teacher_is_multilingual,
)

MONO_FILE = Path("mono") / "sentences.txt.gz"
NON_COMMERCIAL_LICENSE = "cc-by-nc-sa-4.0"


def mono_selection(settings) -> str:
    """What `--mono-sources auto` stands for with the run's teacher."""
    if settings.mono_sources != "auto":
        return settings.mono_sources
    multilingual = not settings.margin_only and teacher_is_multilingual(settings.teacher)
    return MULTILINGUAL_DEFAULT_MONO if multilingual else "none"


def check_data(code: str, settings) -> None:
    """Fail before any work when a dev set or a chosen source is missing or a name is wrong (a non-commercial
    source without --non-commercial is refused here too)."""
    dev_files(settings.data, code, settings.dev)
    bitext_sources(code, split_selection(settings.sources)[0], settings.non_commercial)
    mono_sources(code, mono_selection(settings), settings.non_commercial)


def stage_sources(code: str, settings, staging: Path) -> tuple[list[Path], dict]:
    """The chosen bitext sources as staged files, and their licences as the report records them."""
    local, hub = split_selection(settings.sources)  # `hub:NAME` items stream from the Hub (data/sources/hub.py)
    chosen = bitext_sources(code, local, settings.non_commercial)
    if not chosen and not hub:
        raise_nothing(code, settings.sources)
    files, licences = stage_bitext(chosen, settings.data, code, staging), source_licences(chosen, "data folder")
    if hub:
        hub_files, hub_licences = stage_hub_bitext(hub, code, staging, settings.limit)
        files, licences = [*files, *hub_files], {**licences, **hub_licences}
    return files, licences


def raise_nothing(code: str, selection: str) -> None:
    from ..errors import PSPInputError

    raise PSPInputError(f"{code}: --sources {selection!r} selects no bitext for {code}")


def prepare_mono_text(code: str, folder: Path, settings) -> dict | None:
    """`<xx>/mono/` from the chosen monolingual sources (None, and no `<xx>/mono/`, when none is chosen)."""
    chosen = mono_sources(code, mono_selection(settings), settings.non_commercial)
    if not chosen:
        import shutil

        shutil.rmtree(folder / MONO_FILE.parent, ignore_errors=True)  # an earlier run's text must not come along
        return None
    return prepare_mono(chosen, settings.data, code, folder / "mono", limit=settings.mono_limit)


def add_fragments(code: str, folder: Path, settings) -> dict[str, int]:
    """Short spans of the bitext and the monolingual text, appended to `<xx>/mono/` (`--mono-fragments`)."""
    from ..data.evaluation_filter import all_evaluation_keys
    from ..data.sources.fragments import FRAGMENT_SIDES, append_fragments, default_fragments

    count = default_fragments(code) if settings.mono_fragments is None else settings.mono_fragments
    if count <= 0:
        return {}
    sides = [code if side == "xx" else side for side in FRAGMENT_SIDES]
    shards = sorted((folder / "data" / "data").glob("*.parquet"))
    keys = all_evaluation_keys(settings.data)
    return append_fragments(folder / MONO_FILE.parent, shards, code, count, sides, keys)


def mono_path(folder: Path) -> Path | None:
    """The language's prepared monolingual text, when the prepare step wrote some."""
    path = folder / MONO_FILE
    report = path.parent / "report.json"
    if path.is_file() and report.is_file() and json.loads(report.read_text(encoding="utf-8")).get("sentences"):
        return path
    return None


def mono_text(folder: Path) -> list[str]:
    """The prepared monolingual sentences of a language folder ([] without any)."""
    from ..training.data.multilingual import read_mono_sentences

    path = mono_path(folder)
    return read_mono_sentences([path]) if path is not None else []


def multilingual_training_values(code: str, folder: Path, settings) -> dict:
    """The training settings for the dev set, the bitext targets and the monolingual text."""
    # The paths only: check_data checked them before any work (p-sp-multilingual sets its own).
    values: dict = {"dev_bitext": [str(source.path(settings.data, code)) for source in dev_sets(settings.dev)]}
    if settings.margin_only:
        return values
    values["bitext_targets"] = settings.bitext_targets
    transform = default_teacher_transform(settings.teacher)
    if transform != "none":  # a --teacher-transform in --train-args goes on top and wins
        values["teacher_transform"] = transform
    mono = mono_path(folder)
    if mono is not None:
        values.update(mono_data=[str(mono)], mono_weight=settings.mono_weight, mono_batch_size=settings.mono_batch_size)
    return values


def sentences_to_label(code: str, folder: Path, settings) -> list[str]:
    """Every sentence the training run will ask the teacher for (see the module text)."""
    import pyarrow.parquet as pq

    from ..training.data.multilingual import read_mono_sentences

    targets = settings.bitext_targets
    if targets == "auto":
        targets = MULTILINGUAL_DEFAULT_TARGETS if teacher_is_multilingual(settings.teacher) else "en"
    columns = ["en"] if targets == "en" else [code, "en"]
    sentences: dict[str, None] = {}
    for shard in sorted((folder / "data" / "data").glob("*.parquet")):
        table = pq.read_table(shard, columns=columns)
        for column in columns:
            sentences.update(dict.fromkeys(table.column(column).to_pylist()))
    mono = mono_path(folder)
    if mono is not None:
        sentences.update(dict.fromkeys(read_mono_sentences([mono])))
    return [sentence for sentence in sentences if sentence]


def card_training_text(folder: Path, dev_bitext: list[str] | str | None) -> tuple[str, bool]:
    """The card's 'Training text' line (every source with its licence) and whether a source is non-commercial
    (a bitext source such as xnli-test, or monolingual text such as the Arabic news)."""
    report_file = folder / "data" / "report" / "report.json"
    report = json.loads(report_file.read_text(encoding="utf-8")) if report_file.is_file() else {}
    pairs = {Path(item["path"]).stem: item.get("pairs", 0) for item in report.get("inputs", [])}
    parts = [
        f"{name} {pairs.get(name, 0):,} pairs read ({info.get('license', 'licence not recorded')})"
        for name, info in report.get("sources", {}).items()
    ]
    text = f"bitext ({report.get('pairs_out', 0):,} pairs after filtering): " + "; ".join(parts)
    mono = mono_path(folder)
    non_commercial = any(info.get("non_commercial") for info in report.get("sources", {}).values())
    if mono is not None:
        mono_report = json.loads((mono.parent / "report.json").read_text(encoding="utf-8"))
        text += ". Monolingual: " + describe_mono([str(mono)], mono_report["sentences"])
        non_commercial = non_commercial or any(info.get("non_commercial") for info in mono_report["sources"].values())
    if dev_bitext:
        text += ". " + dev_description(dev_bitext)
    return text, non_commercial


def dev_description(dev_bitext: list[str] | str) -> str:
    """What the card says of the dev sets a run's checkpoint was chosen on (runs before several sets named one)."""
    files = [dev_bitext] if isinstance(dev_bitext, str) else list(dev_bitext)
    known = [source for source in dev_sets("pud+xnli") if any(source.pattern.split("{")[0] in f for f in files)]
    names = "; ".join(f"{source.name} ({source.license})" for source in known) or ", ".join(files)
    if len(files) > 1:
        rule = "checkpoints chosen on them, scored by the mean of their mining accuracies, never trained on"
        return f"Dev sets ({rule}): {names}"
    return f"Dev set (checkpoints chosen on it, never trained on): {names}"
