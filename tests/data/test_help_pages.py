"""LibreOffice's help pages as a registry source (help_pages.py), on pages written by the test."""

from __future__ import annotations

from pathlib import Path

from psp_hf.data.sources import help_pages
from psp_hf.data.sources.registry_bitext import bitext_sources


def write_page(root: Path, locale: str, page: str, body: str) -> None:
    path = help_pages.help_folder(root, locale) / "text" / page
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"<html><head><title>x</title></head><body>{body}</body></html>", encoding="utf-8")


ENGLISH = """
<h1 id="hd_id3150543"><a href="#">Character</a></h1>
<p id="par_id3147834" class="paragraph">Choose <emph>Format - Character</emph> to change the<br/>font.</p>
<p id="par_id3149095" class="paragraph">Sets the font &amp; its size.</p>
<p id="par_id3156326" class="paragraph">LibreOffice Writer</p>
<p class="paragraph">A paragraph without an identifier.</p>
<div id="par_id3100000">A division, not a paragraph.</div>
<table><tr><td id="par_id3153104"><p id="par_id3153105">Bold</p></td></tr></table>
"""
FRENCH = """
<h1 id="hd_id3150543"><a href="#">Caractère</a></h1>
<p id="par_id3147834" class="paragraph">Choisissez <emph>Format - Caractère</emph> pour changer la<br/>police.</p>
<p id="par_id3156326" class="paragraph">LibreOffice Writer</p>
<p class="paragraph">Un paragraphe sans identifiant.</p>
<div id="par_id3100000">Une division.</div>
<table><tr><td id="par_id3153104"><p id="par_id3153105">Gras</td></tr></table>
"""


def test_paragraphs_pair_by_identifier_without_markup(tmp_path):
    write_page(tmp_path, "en-US", "swriter/format.html", ENGLISH)
    write_page(tmp_path, "fr", "swriter/format.html", FRENCH)
    write_page(tmp_path, "en-US", "swriter/only_english.html", '<p id="par_id1">Not translated yet.</p>')
    assert help_pages.available(tmp_path, "fr") and not help_pages.available(tmp_path, "de")
    assert not help_pages.available(tmp_path, "ar")  # Debian has no Arabic help
    pairs = list(help_pages.help_pairs(tmp_path, "fr"))
    # The untranslated paragraph (the English fallback) and the one the translation lacks give nothing; the inner
    # paragraph of a table cell is the cell's text, once, even where the French page leaves its </p> out.
    assert pairs == [
        ("Caractère", "Character"),
        ("Choisissez Format - Caractère pour changer la police.", "Choose Format - Character to change the font."),
        ("Gras", "Bold"),
    ]


def test_the_help_is_a_registry_source_with_its_licence(tmp_path):
    write_page(tmp_path, "en-US", "shared/a.html", '<p id="par_id1">Opens the Macro dialog.</p>')
    write_page(tmp_path, "zh-CN", "shared/a.html", '<p id="par_id1">打开宏对话框。</p>')
    (source,) = bitext_sources("zh", tmp_path, ("help",))
    assert source.name == "libreoffice-help-zh" and "MPL-2.0" in source.license
    assert "libreoffice-help-zh-cn" in source.license
    assert list(source.pairs()) == [("打开宏对话框。", "Opens the Macro dialog.")]
    assert bitext_sources("fr", tmp_path, ("help",)) == []
