"""The data folder's sources for the X–English models, by name: bitext, monolingual text, and the PUD dev set.

Every source is one entry of a table (name, where it lies under the data folder, its languages, its licence), so
`psp languages` and `psp prepare language` choose and weight them by name:

    --sources default,python-docs,mlqe-pe=0.5     bitext: the default set, plus two more (mlqe-pe at half)
    --sources everyday                             the everyday-register pairs alone (xsid, ud-atis, storybooks,
                                                   diabla, xpersona: part of `default` too)
    --mono-sources default                         monolingual text of the language (every default source)
    --non-commercial                               lets the non-commercial sources in (saudinewsnet, xnli-test,
                                                   allset-grammar; named, or by `all`): never without this flag

A weight W in (0, 1] keeps that fraction of a source, drawn evenly over it (seeded by its name); 0 leaves it out.
(More than 1 is refused: the preparation drops exact duplicate pairs, so a repeated source would not count more.)
A name the table knows but the language lacks (python-docs for de) is skipped and said so; an unknown name fails.

A source with a cap (`ud-atis`: one narrow domain, flight queries) gives at most that many pairs, drawn evenly,
before its weight applies.

The dev sets are no training sources: `ud-pud` (the PUD treebank sentences, professionally translated: news and
Wikipedia) and `xnli-dev` (XNLI's dev split: speech transcripts, letters, fiction and short crowd-written sentences,
the register Tatoeba tests). `DEV_SETS` names them for `--dev`; the default, `pud+xnli`, scores a checkpoint by the
mean of its mining accuracy on both. `evaluation_filter` counts both among the evaluation sets, so their sentences
are removed from every bitext and monolingual source like STS and Tatoeba ones are; no name here reads them as
training text.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ...errors import PSPInputError
from ...io.writing import atomic_path

logger = logging.getLogger(__name__)

ALL_LANGUAGES = ("ar", "de", "es", "fr", "ru", "tr", "zh")
CC_BY_SA_3 = "CC BY-SA 3.0"


@dataclass(frozen=True)
class Source:
    """One source of the data folder: `pattern` is its file with `{xx}` for the language (`{folder}` for mono)."""

    name: str
    pattern: str
    languages: tuple[str, ...]
    license: str
    default: bool = True
    non_commercial: bool = False
    folder_language: str | None = None  # mono: the unlabeled/ folder when it is not the language's own (arz)
    group: str | None = None  # a name that selects every source of the group at once (`everyday`)
    cap: int | None = None  # at most this many pairs, drawn evenly, before the weight applies

    def path(self, data: Path, code: str) -> Path:
        """The source's file for language `code` under the data folder `data`."""
        return data / self.pattern.format(xx=code, folder=self.folder_language or code)


_DOCS = "bitext/docs/{name}/{{xx}}-en.tsv.gz"
_EVERYDAY = "bitext/everyday/{name}/{{xx}}-en.tsv.gz"
EVERYDAY = "everyday"  # the group of the everyday-register training pairs (data README, section 17)
# UD-ATIS is one narrow domain (flight-booking queries, English side lowercase without punctuation): capped so that
# it cannot outweigh the other everyday sources of tr (xsid 693, storybooks 368 pairs). Not yet set by a dev-set
# measurement: a weight (`ud-atis=0.5`) or a longer cap is a one-line change here.
UD_ATIS_CAP = 1_000
BITEXT_SOURCES = {
    source.name: source
    for source in (
        Source(
            "multi30k",
            "bitext/multi30k/{xx}-en/train.tsv.gz",
            ("de", "fr"),
            "research / non-commercial use (Multi30K README; Flickr terms of use)",
        ),
        Source(
            "multi30k-nllb",
            "bitext/multi30k-nllb/{xx}-en/train.tsv.gz",
            ("ar", "es", "zh"),
            "Multi30k English (research use) machine-translated by NLLB-200 (ufdatastudio/multi30k-extension)",
        ),
        Source(
            "wmt-news",
            "bitext/wmt-news/{xx}-en.tsv.gz",
            ("de", "es", "fr", "ru", "tr", "zh"),
            "WMT test sets, research use",
        ),
        Source(
            "python-docs",
            _DOCS.format(name="python-docs"),
            ("es", "fr", "tr", "zh"),
            "English: PSF documentation licence; translations contributed to the PSF under CC0 1.0",
            default=False,
        ),
        Source(
            "django-docs", _DOCS.format(name="django-docs"), ("es", "fr", "zh"), "BSD-3-Clause (Django)", default=False
        ),
        Source(
            "debian-handbook",
            _DOCS.format(name="debian-handbook"),
            ("ar", "de", "es", "fr", "ru", "zh"),
            "GPL-2.0-or-later / CC BY-SA 3.0 (The Debian Administrator's Handbook)",
            default=False,
        ),
        Source(
            "gnome-user-docs",
            _DOCS.format(name="gnome-user-docs"),
            ("de", "es", "fr", "ru", "zh"),
            f"{CC_BY_SA_3} (GNOME help)",
            default=False,
        ),
        Source(
            "mlqe-pe",
            "bitext/mlqe-pe/{xx}-en.tsv.gz",
            ("de", "ru", "zh"),
            "CC0 1.0 (post-edits; source text from Wikipedia, CC BY-SA)",
            default=False,
        ),
        # The everyday register (section 17 of the data README): in `default` since the dev rule chose them
        # (results/everyday.md, "The full build"); `everyday` names them alone.
        Source(
            "xsid",
            _EVERYDAY.format(name="xsid"),
            ("ar", "de", "tr", "zh"),
            "CC BY-SA 4.0 (xSID voice-assistant requests)",
            group=EVERYDAY,
        ),
        Source(
            "ud-atis",
            _EVERYDAY.format(name="ud-atis"),
            ("tr",),
            "CC BY-SA 4.0 (UD Turkish-Atis / English-Atis flight queries)",
            group=EVERYDAY,
            cap=UD_ATIS_CAP,
        ),
        Source(
            "storybooks",
            _EVERYDAY.format(name="storybooks"),
            ALL_LANGUAGES,
            "CC BY 3.0 / 4.0 (Global-ASP children's storybooks)",
            group=EVERYDAY,
        ),
        Source(
            "diabla",
            _EVERYDAY.format(name="diabla"),
            ("fr",),
            "CC BY-SA 4.0 (DiaBLa dialogue, reference translations)",
            group=EVERYDAY,
        ),
        Source(
            "xpersona",
            _EVERYDAY.format(name="xpersona"),
            ("fr", "zh"),
            "MIT (XPersona chit-chat, machine translation corrected by people)",
            group=EVERYDAY,
        ),
        # Opt-in only: non-commercial licences. Only with --non-commercial (named, or `all`); never in `default` or
        # `everyday`.
        Source(
            "xnli-test",
            "bitext/everyday/xnli/test/{xx}-en.tsv.gz",
            ALL_LANGUAGES,
            "CC BY-NC 4.0 (XNLI test split): non-commercial",
            default=False,
            non_commercial=True,
        ),
        Source(
            "allset-grammar",
            _EVERYDAY.format(name="allset-grammar"),
            ("zh",),
            "CC BY-NC-SA 3.0 (AllSet Chinese grammar wiki example sentences): non-commercial",
            default=False,
            non_commercial=True,
        ),
    )
}
DEV_SOURCE = Source("ud-pud", "bitext/ud-pud/{xx}-en.tsv.gz", ALL_LANGUAGES, f"{CC_BY_SA_3} (UD PUD treebanks)")
XNLI_DEV = Source(
    "xnli-dev",
    "bitext/everyday/xnli/dev/{xx}-en.tsv.gz",
    ALL_LANGUAGES,
    "CC BY-NC 4.0 (XNLI dev split; a dev set only: never trained on, nothing of it is in the model)",
)
# `--dev` of psp languages: the bitext dev sets by name. Every choice a build makes (its checkpoint; the sources,
# weights, margins and teacher mix measured in results/) is made on the mean of the mining accuracies of
# `DEFAULT_DEV`'s sets: PUD (news and Wikipedia) alone tied on changes that moved Tatoeba (everyday speech) by points.
DEV_SETS: dict[str, tuple[Source, ...]] = {
    "pud+xnli": (DEV_SOURCE, XNLI_DEV),
    "pud": (DEV_SOURCE,),
    "xnli": (XNLI_DEV,),
}
DEFAULT_DEV = "pud+xnli"
# Names that can never be training text (the dev sets), refused by --sources with the reason.
DEV_NAMES = {source.name for sources in DEV_SETS.values() for source in sources} | {"xnli", "xnli-dev", "ud-pud"}
_MONO = "unlabeled/{folder}/%s/sentences.txt.gz"
_MONO_TABLE = (  # (language, name, folder name, licence, non-commercial, folder language)
    ("ar", "saudinewsnet", "saudinewsnet", "CC BY-NC-SA 4.0 (SaudiNewsNet): non-commercial, research only", True, None),
    ("ar", "arz-wikipedia", "wikipedia", "CC BY-SA 4.0 (Egyptian Arabic Wikipedia)", False, "arz"),
    ("zh", "commonvoice", "commonvoice", "CC0 1.0 (Common Voice sentences)", False, None),
    ("zh", "wikipedia", "wikipedia", f"{CC_BY_SA_3} (Wikipedia)", False, None),
    ("ru", "commonvoice", "commonvoice", "CC0 1.0 (Common Voice sentences)", False, None),
    ("ru", "fortunes", "fortunes", "GPL-2+ (fortune files)", False, None),
    ("ru", "ud", "ud", "CC BY-SA 4.0 (UD_Russian-Taiga dev/test text)", False, None),
    ("tr", "commonvoice", "commonvoice", "CC0 1.0 (Common Voice sentences)", False, None),
    ("tr", "ud", "ud", "CC BY-SA 4.0 (UD Turkish treebanks' dev/test text)", False, None),
    ("fr", "commonvoice", "commonvoice", "CC0 1.0 (Common Voice sentences)", False, None),
    ("fr", "commonvoice-assemblee", "commonvoice-assemblee", "CC0 1.0 (Assemblée nationale debates)", False, None),
    ("es", "commonvoice", "commonvoice", "CC0 1.0 (Common Voice sentences)", False, None),
    ("es", "fortunes", "fortunes", "GPL-2+ (fortune files)", False, None),
    ("de", "commonvoice", "commonvoice", "CC0 1.0 (Common Voice sentences)", False, None),
    ("de", "fortunes", "fortunes", "GPL-2+ (fortune files)", False, None),
    ("zh", "dialogue", "dialogue", "Apache-2.0 (KdConv and CrossWOZ dialogue utterances)", False, None),
    # English text for every language: the teacher's vectors of general English keep the English rows where the
    # English student put them, while the bitext's English sides (software strings, captions) pull them toward their
    # register. Measured (results/multilingual-distillation.md, "English text beside the language's own"): 50,000
    # sentences raised STS-B dev by 1.4 (tr) and 0.7 (ar) and PUD dev by 0.05 and 0.4, so it is part of `default`.
    *(
        (code, "en-wikipedia", "wikipedia-2015", f"{CC_BY_SA_3} (English Wikipedia)", False, "en")
        for code in ALL_LANGUAGES
    ),
)
# language -> name -> Source: the same name may mean different folders in different languages.
MONO_SOURCES: dict[str, dict[str, Source]] = {}
# The everyday register's monolingual text (data README section 17): in `default` as its bitext is; `everyday`
# names it alone.
_MONO_EVERYDAY = {("zh", "dialogue")}
for _code, _name, _folder, _licence, _nc, _folder_language in _MONO_TABLE:
    _everyday = (_code, _name) in _MONO_EVERYDAY
    MONO_SOURCES.setdefault(_code, {})[_name] = Source(
        _name,
        _MONO % _folder,
        (_code,),
        _licence,
        not _nc,
        _nc,
        _folder_language,
        EVERYDAY if _everyday else None,
    )


# ------------------------------------------------------------------------------------------------ choosing
def parse_selection(text: str, flag: str) -> dict[str, float]:
    """`default,python-docs,mlqe-pe=0.5` as {name: weight} (`default`, `all` and `none` kept as names)."""
    chosen: dict[str, float] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, _, value = item.partition("=")
        try:
            weight = float(value) if value else 1.0
        except ValueError:
            weight = -1.0
        if not 0.0 <= weight <= 1.0:
            raise PSPInputError(
                f"{flag} {text!r}: give NAME or NAME=WEIGHT with a weight in [0, 1] (the fraction of the source kept; "
                f"bad: {item!r})"
            )
        chosen[name.strip()] = weight
    return chosen


def choose(
    table: dict[str, Source], text: str, flag: str, code: str, non_commercial: bool = False
) -> list[tuple[Source, float]]:
    """The sources of `table` that `text` (`--sources` / `--mono-sources`) selects for language `code`."""
    chosen = parse_selection(text, flag)
    dev = sorted(name for name in chosen if name in DEV_NAMES and name not in table)
    if dev:
        raise PSPInputError(
            f"{flag}: {', '.join(dev)} is a dev set (it chooses checkpoints and recipes): never training text"
        )
    known = set(table) | {"default", "all", "none", EVERYDAY}
    everywhere = set(BITEXT_SOURCES) | {name for sources in MONO_SOURCES.values() for name in sources}
    unknown = [name for name in chosen if name not in known and name not in everywhere]
    if unknown:
        raise PSPInputError(f"{flag}: no source {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    table = {name: source for name, source in table.items() if code in source.languages}
    names: dict[str, float] = {}
    for name, weight in chosen.items():
        if name in ("default", "all", EVERYDAY):
            for source in table.values():
                if name == "all" or (source.default if name == "default" else source.group == name):
                    if source.non_commercial and not non_commercial:
                        continue  # an opt-in source: named alone, and only with --non-commercial
                    names.setdefault(source.name, weight)
        elif name == "none":
            continue
        elif name not in table:
            logger.info("%s: source %s has no %s text, skipped", flag, name, code)
        else:
            names[name] = weight
    selected = [(table[name], weight) for name, weight in names.items() if weight > 0]
    refused = [source.name for source, _ in selected if source.non_commercial and not non_commercial]
    if refused:
        raise PSPInputError(
            f"{flag}: {', '.join(refused)} is licensed for non-commercial use only: pass --non-commercial to use it "
            "(the model card then says so)"
        )
    return selected


def bitext_sources(code: str, text: str = "default", non_commercial: bool = False) -> list[tuple[Source, float]]:
    """The bitext sources that `--sources` selects for `code` (a non-commercial one only with `non_commercial`)."""
    return choose(BITEXT_SOURCES, text, "--sources", code, non_commercial)


def mono_sources(code: str, text: str = "default", non_commercial: bool = False) -> list[tuple[Source, float]]:
    """The monolingual sources that `--mono-sources` selects for `code`."""
    return choose(MONO_SOURCES.get(code, {}), text, "--mono-sources", code, non_commercial)


def dev_file(data: Path, code: str, source: Source = DEV_SOURCE) -> Path:
    """The dev pairs of `code` in `source` (PUD unless named; fails naming the file when the data folder lacks it)."""
    path = source.path(data, code)
    if not path.is_file():
        raise PSPInputError(f"{code}: the {source.name} dev set is missing: {path}")
    return path


def dev_sets(selection: str) -> tuple[Source, ...]:
    """The dev sets `--dev` names (none for `bitext`: pairs held back from the training data)."""
    if selection == "bitext":
        return ()
    if selection not in DEV_SETS:
        raise PSPInputError(f"--dev {selection!r}: give one of {', '.join([*DEV_SETS, 'bitext'])}")
    return DEV_SETS[selection]


def dev_files(data: Path, code: str, selection: str) -> list[Path]:
    """The files of the dev sets `--dev` names for `code`, each checked to exist."""
    return [dev_file(data, code, source) for source in dev_sets(selection)]


# ------------------------------------------------------------------------------------------------ reading
def _lines(path: Path) -> Iterator[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        yield from handle


def read_bitext(path: Path, code: str) -> list[tuple[str, str]]:
    """The (xx, en) pairs of a data-folder TSV whose header names `code` and `en` (other columns ignored)."""
    from ...io.reading import iter_tsv_columns

    return [
        (" ".join(other.split()), " ".join(english.split()))
        for _, (other, english) in iter_tsv_columns(path, (code, "en"))
    ]


def stage_bitext(chosen: list[tuple[Source, float]], data: Path, code: str, folder: Path) -> list[Path]:
    """One `<code>\\ten` TSV per chosen source in `folder` (named after it, so the report counts each), weighted."""
    from .registry_bitext import even_sample

    files = []
    for source, weight in chosen:
        path = source.path(data, code)
        if not path.is_file():
            raise PSPInputError(f"{code}: bitext source {source.name} missing: {path}")
        pairs = read_bitext(path, code)
        if source.cap is not None and len(pairs) > source.cap:
            pairs = even_sample(pairs, source.cap, source.name)
        pairs = even_sample(pairs, round(weight * len(pairs)), source.name) if weight < 1 else pairs
        staged = folder / f"{source.name}.tsv"
        staged.write_text(f"{code}\ten\n" + "".join(f"{a}\t{b}\n" for a, b in pairs), encoding="utf-8")
        files.append(staged)
    return files


def source_licences(chosen: list[tuple[Source, float]], kind: str) -> dict[str, dict]:
    """`{name: {license, kind, weight, non_commercial}}` as `registry_bitext.add_licences` records sources."""
    return {
        source.name: {
            "license": source.license,
            "kind": kind,
            "weight": weight,
            "non_commercial": source.non_commercial,
            **({"cap": source.cap} if source.cap is not None else {}),
        }
        for source, weight in chosen
    }


def prepare_mono(
    chosen: list[tuple[Source, float]],
    data: str | os.PathLike,
    code: str,
    out: str | os.PathLike,
    limit: int | None = 50_000,
    max_tokens: int = 100,
    exclude_evaluation: bool = True,
) -> dict:
    """Monolingual text of `code` into `out/sentences.txt.gz` and `out/report.json` (sources, licences, counts).

    Per source: whitespace folded, empty lines and lines over `max_tokens` tokens (characters for zh) dropped,
    evaluation sentences (STS, Tatoeba, PUD, ...: `evaluation_filter`) and duplicates removed, then at most
    `weight x min(limit, what is left)` sentences drawn evenly over what is left (seeded by the source's name).
    Original case is kept: the teacher reads the text as written; the student's tokenizer lowercases for itself."""
    from ..distill_corpus import normalize_key
    from ..evaluation_filter import all_evaluation_keys
    from ..filters import length_unit_for
    from .registry_bitext import even_sample

    data, out = Path(data), Path(out)
    keys = all_evaluation_keys(data) if exclude_evaluation else set()
    seen: set[str] = set()
    sentences: list[str] = []
    report = {"kind": "mono", "lang": code, "sources": {}, "limit_per_source": limit}
    for source, weight in chosen:
        path = source.path(data, code)
        if not path.is_file():
            raise PSPInputError(f"{code}: monolingual source {source.name} missing: {path}")
        counts = {"read": 0, "too_long": 0, "evaluation": 0, "duplicates": 0}
        by_characters = length_unit_for(source.folder_language or code) == "chars"  # English text in zh's run: words
        kept = []
        for line in _lines(path):
            text = " ".join(line.split())
            if not text:
                continue
            counts["read"] += 1
            if (len(text) if by_characters else len(text.split())) > max_tokens:
                counts["too_long"] += 1
            elif normalize_key(text) in keys:
                counts["evaluation"] += 1
            elif text in seen:
                counts["duplicates"] += 1
            else:
                seen.add(text)
                kept.append(text)
        count = min(len(kept), limit) if limit is not None else len(kept)
        if weight < 1 or count < len(kept):
            kept = even_sample(kept, round(weight * count), source.name)
        sentences += kept
        report["sources"][source.name] = {
            **counts,
            "kept": len(kept),
            "language": source.folder_language or code,
            "weight": weight,
            "license": source.license,
            "non_commercial": source.non_commercial,
        }
    report["sentences"] = len(sentences)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / "sentences.txt.gz") as tmp, gzip.open(tmp, "wt", encoding="utf-8") as handle:
        handle.write("".join(f"{text}\n" for text in sentences))
    with atomic_path(out / "report.json") as tmp:
        tmp.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return report
