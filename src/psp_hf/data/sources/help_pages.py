"""LibreOffice's help pages in English and in X, paragraph by paragraph: human translations of whole sentences.

Debian ships the offline help as HTML pages, one package a language (`libreoffice-help-en-us`,
`libreoffice-help-fr`, ...; no Arabic one), unpacked under usr/share/libreoffice/help/<locale>/. Every language
has the same pages under the same paths, and each paragraph and heading keeps the identifier of the help's source
file (`<p id="par_id3150543">`, `<h2 id="hd_id3147834">`), so a paragraph of the English page and the paragraph with
that identifier in the translated page are translations of each other. Paragraphs left in English (the
translation's fallback) are skipped; the help's licence is MPL-2.0 (the packages' copyright files).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

# Two-letter code -> the help's locale folder (the Debian package's name follows from it: `help_package`).
HELP_LOCALES = {"de": "de", "es": "es", "fr": "fr", "ru": "ru", "tr": "tr", "zh": "zh-CN"}
ENGLISH_LOCALE = "en-US"
_TEXT_TAGS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "td", "li"}
_ID = re.compile(r"(?:par|hd)_id")


def help_folder(root: Path, locale: str) -> Path:
    """Where the help of `locale` (`en-US`, `zh-CN`, ...) lies under an unpacked root."""
    return root / "usr" / "share" / "libreoffice" / "help" / locale


def help_package(lang: str) -> str:
    """The Debian package of the help in `lang` (a key of `HELP_LOCALES`)."""
    return f"libreoffice-help-{HELP_LOCALES[lang].lower()}"


class _Paragraphs(HTMLParser):
    """Collects the text of each element with a paragraph or heading identifier, inner markup removed."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, str, list[str]]] = []
        self.found: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        ident = dict(attrs).get("id") or ""
        if tag in _TEXT_TAGS and _ID.match(ident):
            self.open.append((tag, ident, []))
        elif tag == "br" and self.open:
            self.open[-1][2].append(" ")

    def handle_endtag(self, tag: str) -> None:
        # An element left open inside this one (HTML lets `</p>` be omitted) ends with it.
        while any(open_tag == tag for open_tag, _, _ in self.open):
            closed, ident, parts = self.open.pop()
            text = " ".join("".join(parts).split())
            if text:
                self.found[ident] = text
            if closed == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.open:
            self.open[-1][2].append(data)


def page_paragraphs(path: Path) -> dict[str, str]:
    """Identifier -> text of the paragraphs and headings of one help page."""
    parser = _Paragraphs()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    return parser.found


def available(root: Path, lang: str) -> bool:
    """Whether the English help and the help in `lang` are unpacked under `root`."""
    return lang in HELP_LOCALES and all(
        (help_folder(root, locale) / "text").is_dir() for locale in (ENGLISH_LOCALE, HELP_LOCALES[lang])
    )


def help_pairs(root: Path, lang: str) -> Iterator[tuple[str, str]]:
    """(xx, English) paragraph pairs of every help page both languages have, page by page in path order."""
    english_folder, other_folder = help_folder(root, ENGLISH_LOCALE), help_folder(root, HELP_LOCALES[lang])
    for english_page in sorted(english_folder.rglob("*.html")):
        other_page = other_folder / english_page.relative_to(english_folder)
        if not other_page.is_file():
            continue
        translated = page_paragraphs(other_page)
        for ident, english in page_paragraphs(english_page).items():
            text = translated.get(ident)
            if text and text != english:
                yield text, english
