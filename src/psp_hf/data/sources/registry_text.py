"""English text that Debian packages ship, as sources of the distillation corpus.

* wordnet-glosses (Debian wordnet-base): WordNet 3.0 definitions and their quoted usage examples;
  WordNet 3.0 licence (BSD-style).
* fortunes (fortunes-min, fortunes): the BSD fortune quotation collections, attribution lines dropped; BSD.
* gcide (dict-gcide): GNU Collaborative International Dictionary of English, definitions and quotations;
  GPL-2+.
* devils-dictionary (dict-devil): Ambrose Bierce, The Devil's Dictionary; public domain.
* jargon-file (dict-jargon): The Jargon File 4.4.7; public domain.

The files are found under `registry_root()`, so the packages can be installed (``apt-get install``) or only
unpacked (``apt-get download`` + ``dpkg -x <deb> <root>``, no dependencies, no daemon). A package
that is absent is skipped; `registry_sources` reports which were found.
"""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Iterator
from pathlib import Path

from ...data_folder import cache_dir
from ..distill_corpus import CorpusSource, split_sentences

DEBIAN_PACKAGES = ("wordnet-base", "fortunes-min", "fortunes", "dict-gcide", "dict-devil", "dict-jargon")


def registry_root(root: str | os.PathLike | None = None) -> Path:
    """Where the packages' files are: `root`, else $PSP_REGISTRY_TEXT, else ``.cache/registry-text/root`` (see
    `cache_dir`) when the Makefile unpacked them there, else the file system root."""
    if root is not None:
        return Path(root)
    if os.environ.get("PSP_REGISTRY_TEXT"):
        return Path(os.environ["PSP_REGISTRY_TEXT"])
    unpacked = cache_dir() / "registry-text" / "root"
    return unpacked if unpacked.is_dir() else Path("/")


# ----------------------------------------------------------------------------------------------- WordNet
def wordnet_glosses(directory: Path) -> Iterator[str]:
    """Definitions and quoted examples from WordNet's ``data.*`` files (the text after ``|``)."""
    for part_of_speech in ("noun", "verb", "adj", "adv"):
        path = directory / f"data.{part_of_speech}"
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("  ") or " | " not in line:
                    continue  # the licence header lines start with two spaces
                gloss = line.split(" | ", 1)[1].strip()
                for piece in gloss.split(";"):
                    piece = piece.strip().strip('"').strip()
                    if piece:
                        yield piece


# ----------------------------------------------------------------------------------------------- fortunes
_ATTRIBUTION = re.compile(r"^\s*(--|―|- )\s*\S")
_NOT_ENGLISH_PROSE = {"ascii-art", "translate-me", "debian", "linux", "perl", "zippy"}


def fortune_texts(directory: Path) -> Iterator[str]:
    """Sentences of every fortune file (``%``-separated cookies), attribution lines dropped."""
    for path in sorted(directory.iterdir()):
        if path.suffix in (".dat", ".u8") or path.is_dir() or path.name in _NOT_ENGLISH_PROSE:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for cookie in re.split(r"^%\s*$", text, flags=re.MULTILINE):
            lines = [line for line in cookie.splitlines() if line.strip() and not _ATTRIBUTION.match(line)]
            yield from split_sentences(" ".join(lines))


# ----------------------------------------------------------------------------------------------- dictd files
_DICT_MARKUP = [
    (re.compile(r"\\[^\\\n]*\\"), " "),  # GCIDE pronunciations: \Af*fat"u*ate\
    (re.compile(r"\[[^\]]*\]"), " "),  # etymologies, [1913 Webster], [Obs.]
    (re.compile(r"--\s*[A-Z][\w.' ]{0,30}\.?\s*$"), " "),  # trailing "--Milton." attributions
    (re.compile(r"[{}]"), ""),  # cross-reference braces
]


def _strip_dict_markup(text: str) -> str:
    for pattern, replacement in _DICT_MARKUP:
        text = pattern.sub(replacement, text)
    return text


def dictd_texts(path: Path, skip_headword: bool = True) -> Iterator[str]:
    """Sentences from a dictd ``.dict.dz`` (gzip-compatible) text: blank-line separated blocks, markup removed.

    The first line of an entry block ("Word \\pron\\, n. [etym.]" or "WORD, n.") carries the headword; with
    `skip_headword` only the text after its part-of-speech abbreviation is kept.
    """
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    for block in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in block.splitlines()]
        lines = [line for line in lines if line and not line.startswith("--")]
        if not lines:
            continue
        if skip_headword and not block.startswith((" ", "\t")):
            # "ABSOLUTE, adj.  Independent, irresponsible." -> "Independent, irresponsible."
            head = re.match(r"^[^,]{1,60},\s*(?:[a-z]{1,5}\.\s*){1,3}", lines[0])
            if head:
                lines[0] = lines[0][head.end() :]
            else:
                lines = lines[1:]
        body = _strip_dict_markup(" ".join(lines))
        # Numbered senses ("1. To act upon; ...") read as separate sentences.
        body = re.sub(r"(?:^|\s)\d{1,2}\.\s+", " \n", body)
        for segment in body.split("\n"):
            yield from split_sentences(segment)


# ----------------------------------------------------------------------------------------------- sources
def registry_sources(root: str | os.PathLike | None = None) -> list[CorpusSource]:
    """Every registry source whose files exist under `root` (see the module docstring)."""
    base = registry_root(root)
    share = base / "usr" / "share"
    candidates = [
        (
            "wordnet-glosses",
            share / "wordnet",
            "WordNet 3.0 licence (BSD-style); Debian package wordnet-base",
            "WordNet 3.0 definitions and quoted usage examples",
            lambda p: wordnet_glosses(p),
            lambda p: (p / "data.noun").is_file(),
        ),
        (
            "fortunes",
            share / "games" / "fortunes",
            "BSD licence (fortune-mod data as distributed by Debian); packages fortunes-min, fortunes",
            "BSD fortune quotation files, attributions dropped",
            lambda p: fortune_texts(p),
            lambda p: p.is_dir(),
        ),
        (
            "gcide",
            share / "dictd" / "gcide.dict.dz",
            "GPL-2+ (GNU Collaborative International Dictionary of English); Debian package dict-gcide",
            "GCIDE definitions and literary quotations",
            lambda p: dictd_texts(p),
            lambda p: p.is_file(),
        ),
        (
            "devils-dictionary",
            share / "dictd" / "devil.dict.dz",
            "public domain (Ambrose Bierce, 1911); Debian package dict-devil",
            "The Devil's Dictionary",
            lambda p: dictd_texts(p),
            lambda p: p.is_file(),
        ),
        (
            "jargon-file",
            share / "dictd" / "jargon.dict.dz",
            "public domain (The Jargon File 4.4.7); Debian package dict-jargon",
            "The Jargon File",
            lambda p: dictd_texts(p),
            lambda p: p.is_file(),
        ),
    ]
    sources = []
    for name, path, license_text, description, reader, present in candidates:
        if present(path):
            sources.append(CorpusSource(name, license_text, description, lambda r=reader, p=path: r(p)))
    return sources
