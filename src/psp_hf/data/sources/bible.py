"""Verse-aligned Bible translations that Debian ships as SWORD modules, read with Python alone.

Debian packages two public-domain Bibles in SWORD's compressed format: the Spanish Reina-Valera of 1909
(`sword-text-sparv`) and the World English Bible (`sword-text-web`). A verse of one and the same verse of the
other are translations of one text, so the pair is natural Spanish beside natural English (31,077 verses).

A zText module (SWORD's `zverse` layout) is three files per testament: `.bzz`, zlib-compressed blocks of text;
`.bzs`, one (offset, size, uncompressed size) record of three little-endian uint32 per block; `.bzv`, one
(block, offset, size) record (uint32, uint32, uint16) per verse slot in the module's versification order. The
slot before a chapter's first verse holds its `<chapter osisID="Book.N">` tag, so verses are keyed by book,
chapter and number without the versification tables: two modules of different versifications (WEB's NRSVA,
the Reina-Valera's KJV) are matched by key.
"""

from __future__ import annotations

import html
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from ...errors import PSPInputError

ENGLISH_MODULE = "engWEB2015eb"
ENGLISH_PACKAGE = "sword-text-web"
# Modules of other languages that Debian ships, by the language of their `Lang=` line.
MODULES = {"es": "spaRV1909eb"}
PACKAGES = {"es": "sword-text-sparv"}
_CHAPTER = re.compile(r'<chapter\b[^>]*\bosisID="([^".]+)\.(\d+)"')
_DROPPED = re.compile(r"<(note|title)\b.*?</\1>", re.DOTALL)  # footnotes and headings are not the verse's text
_TAG = re.compile(r"<[^>]*>")
_SPACE_BEFORE = re.compile(r"\s+([,.;:!?)\]”’»])")
# The 1909 orthography accents one-letter words and some monosyllables that today's Spanish writes plain.
_OLD_ACCENTS = {"á": "a", "é": "e", "ó": "o", "ú": "u", "fué": "fue", "fuí": "fui", "dió": "dio", "vió": "vio"}
_OLD_WORD = re.compile(r"\b(" + "|".join(_OLD_ACCENTS) + r")\b", re.IGNORECASE)


def module_folder(root: Path, module: str) -> Path:
    return root / "usr" / "share" / "sword" / "modules" / "texts" / "ztext" / module


def module_conf(root: Path, module: str) -> Path:
    return root / "usr" / "share" / "sword" / "mods.d" / f"{module}.conf"


def module_licence(root: Path, module: str) -> str:
    """The module's `DistributionLicense` line from its SWORD configuration file."""
    try:
        conf = module_conf(root, module).read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise PSPInputError(f"{module_conf(root, module)}: cannot read the module's configuration ({error})") from error
    found = re.search(r"^DistributionLicense=(.+)$", conf, flags=re.MULTILINE)
    return found.group(1).strip() if found else f"see {module_conf(root, module)}"


def zverse_slots(folder: Path, testament: str) -> Iterator[str]:
    """The text of each verse slot of one testament ("ot" or "nt") of a zText module, in index order."""
    paths = {suffix: folder / f"{testament}.{suffix}" for suffix in ("bzs", "bzv", "bzz")}
    try:
        blocks_index, verses_index, compressed = (paths[suffix].read_bytes() for suffix in ("bzs", "bzv", "bzz"))
    except OSError as error:
        raise PSPInputError(f"{folder}: cannot read the SWORD module's {testament} files ({error})") from error
    if len(blocks_index) % 12 or len(verses_index) % 10:
        raise PSPInputError(f"{folder}: {testament}.bzs/.bzv are not whole index records (truncated module?)")
    blocks: dict[int, bytes] = {}
    for number in range(len(verses_index) // 10):
        block, offset, size = struct.unpack("<IIH", verses_index[10 * number : 10 * number + 10])
        if not size:
            yield ""
            continue
        if block not in blocks:
            if 12 * block + 12 > len(blocks_index):
                raise PSPInputError(f"{paths['bzv']}: verse slot {number} points at block {block}, past the index")
            start, length, _ = struct.unpack("<III", blocks_index[12 * block : 12 * block + 12])
            try:
                blocks[block] = zlib.decompress(compressed[start : start + length])
            except zlib.error as error:
                raise PSPInputError(f"{paths['bzz']}: block {block} does not decompress ({error})") from error
        yield blocks[block][offset : offset + size].decode("utf-8", errors="replace")


def verse_text(markup: str) -> str:
    """A verse's OSIS markup as plain text: footnotes and headings dropped, tags removed, spaces folded."""
    text = html.unescape(_TAG.sub("", _DROPPED.sub(" ", markup)))
    return _SPACE_BEFORE.sub(r"\1", " ".join(text.split()))


def module_verses(root: Path, module: str) -> dict[tuple[str, int, int], str]:
    """(book, chapter, verse) -> text of every non-empty verse of a zText module unpacked under `root`."""
    folder = module_folder(root, module)
    verses: dict[tuple[str, int, int], str] = {}
    for testament in ("ot", "nt"):
        if not (folder / f"{testament}.bzv").is_file():
            continue
        book, chapter, verse = None, 0, 0
        for slot in zverse_slots(folder, testament):
            heading = _CHAPTER.search(slot)
            if heading:
                book, chapter, verse = heading.group(1), int(heading.group(2)), 0
                continue
            if book is None:  # the module's and the testament's headings, a book's introduction
                continue
            verse += 1
            text = verse_text(slot)
            if text:
                verses[(book, chapter, verse)] = text
    if not verses:
        raise PSPInputError(f"{folder}: no verses found (not a zText module with OSIS chapter tags?)")
    return verses


def modern_spanish(text: str) -> str:
    """The 1909 Spanish accents that today's spelling dropped ("fué á Jerusalén" -> "fue a Jerusalén")."""

    def plain(match: re.Match) -> str:
        word = match.group(0)
        modern = _OLD_ACCENTS[word.lower()]
        return modern.capitalize() if word[0].isupper() else modern

    return _OLD_WORD.sub(plain, text)


def verse_pairs(root: Path, lang: str) -> Iterator[tuple[str, str]]:
    """(xx, English) verse pairs in the English module's order; each key present in both modules once."""
    if lang not in MODULES:
        raise PSPInputError(f"no SWORD Bible for {lang!r} (Debian has {', '.join(MODULES)})")
    english = module_verses(root, ENGLISH_MODULE)
    other = module_verses(root, MODULES[lang])
    spelling = modern_spanish if lang == "es" else str
    for key, text in english.items():
        if key in other:
            yield spelling(other[key]), text


def available(root: Path, lang: str) -> bool:
    """Whether the modules for `lang` and English are unpacked under `root`."""
    modules = (ENGLISH_MODULE, MODULES.get(lang, ""))
    return lang in MODULES and all((module_folder(root, module) / "nt.bzv").is_file() for module in modules)
