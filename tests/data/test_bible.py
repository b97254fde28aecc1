"""The SWORD Bible reader (bible.py) on zText modules written by the test, in SWORD's index layout."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from psp_hf.data.sources import bible
from psp_hf.data.sources.registry_bitext import bitext_sources
from psp_hf.errors import PSPInputError


def write_module(root: Path, module: str, testaments: dict[str, list[str]], block_slots: int = 3) -> None:
    """A zText module: each testament's slots (OSIS markup, "" for an empty slot) in blocks of `block_slots`."""
    folder = bible.module_folder(root, module)
    folder.mkdir(parents=True)
    for testament, slots in testaments.items():
        blocks, verse_index = [], b""
        for number, slot in enumerate(slots):
            if number % block_slots == 0:
                blocks.append(b"")
            data = slot.encode("utf-8")
            verse_index += struct.pack("<IIH", len(blocks) - 1, len(blocks[-1]), len(data))
            blocks[-1] += data
        compressed, block_index = b"", b""
        for block in blocks:
            packed = zlib.compress(block)
            block_index += struct.pack("<III", len(compressed), len(packed), len(block))
            compressed += packed
        (folder / f"{testament}.bzs").write_bytes(block_index)
        (folder / f"{testament}.bzv").write_bytes(verse_index)
        (folder / f"{testament}.bzz").write_bytes(compressed)
    conf = bible.module_conf(root, module)
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(f"[{module}]\nModDrv=zText\nDistributionLicense=Public Domain\n", encoding="utf-8")


SPANISH = {
    "ot": [
        "",
        '<milestone type="x-importer"/>',
        '<div osisID="Gen" type="book"/><title type="main">Génesis</title>',
        '<chapter n="1" osisID="Gen.1" sID="Gen.1"/>',
        '<w lemma="strong:H7225">EN el principio</w> <w>crió</w> Dios los cielos.',
        "Y dijo Dios: Sea la luz: y fué la luz.",
        "",  # a verse this translation leaves out
        '<chapter n="2" osisID="Gen.2" sID="Gen.2"/>',
        "Y fueron acabados los cielos; Él dió á Isaac el pan.",
    ],
    "nt": ["", '<chapter osisID="John.11" sID="John.11"/>', "Y lloró Jesús."],
}
ENGLISH = {
    "ot": [
        "",
        "",
        '<div type="front"/><title>Preface</title>',  # WEB's preface, before any chapter: not a verse
        '<chapter n="1" osisID="Gen.1" sID="Gen.1"/>',
        'In the beginning, God<note placement="foot">The Hebrew word for “God” is Elohim.</note> created the heavens.',
        'God said, &#8220;Let there be light,&#8221; and there was light <title type="x-gen">Day</title>.',
        "God saw the light.",
        '<chapter n="2" osisID="Gen.2" sID="Gen.2"/>',
        "The heavens were finished; he gave Isaac the bread.",
        '<chapter n="1" osisID="Tob.1" sID="Tob.1"/>',  # a deuterocanonical book the Spanish module lacks
        "The book of the words of Tobit.",
    ],
    "nt": ["", '<chapter osisID="John.11" sID="John.11"/>', "Jesus wept."],
}


def test_verses_are_keyed_by_the_chapter_tags_and_stripped_of_markup(tmp_path):
    write_module(tmp_path, "engWEB2015eb", ENGLISH, block_slots=4)
    verses = bible.module_verses(tmp_path, "engWEB2015eb")
    assert verses[("Gen", 1, 1)] == "In the beginning, God created the heavens."
    assert verses[("Gen", 1, 2)] == "God said, “Let there be light,” and there was light."
    assert verses[("Gen", 2, 1)] == "The heavens were finished; he gave Isaac the bread."
    assert verses[("John", 11, 1)] == "Jesus wept." and ("Tob", 1, 1) in verses
    assert len(verses) == 6  # the preface before the first chapter is not a verse


def test_spanish_and_english_verses_pair_by_key_in_modern_spelling(tmp_path):
    write_module(tmp_path, "engWEB2015eb", ENGLISH, block_slots=4)
    write_module(tmp_path, "spaRV1909eb", SPANISH, block_slots=2)
    assert bible.available(tmp_path, "es") and not bible.available(tmp_path, "fr")
    with pytest.raises(PSPInputError, match="no SWORD Bible for 'fr'"):
        next(bible.verse_pairs(tmp_path, "fr"))
    assert list(bible.verse_pairs(tmp_path, "es")) == [
        ("EN el principio crió Dios los cielos.", "In the beginning, God created the heavens."),
        ("Y dijo Dios: Sea la luz: y fue la luz.", "God said, “Let there be light,” and there was light."),
        ("Y fueron acabados los cielos; Él dio a Isaac el pan.", "The heavens were finished; he gave Isaac the bread."),
        ("Y lloró Jesús.", "Jesus wept."),
    ]
    assert bible.modern_spanish("Fué á Roma; Ó sea, á él") == "Fue a Roma; O sea, a él"
    (source,) = bitext_sources("es", tmp_path, ("bible",))
    assert source.name == "bible-es" and source.license.count("Public Domain") == 2
    assert "sword-text-sparv" in source.license and "sword-text-web" in source.license
    assert len(list(source.pairs())) == 4


def test_a_truncated_module_is_a_clear_error(tmp_path):
    write_module(tmp_path, "engWEB2015eb", ENGLISH)
    folder = bible.module_folder(tmp_path, "engWEB2015eb")
    index = (folder / "ot.bzv").read_bytes()
    (folder / "ot.bzv").write_bytes(index[:-3])  # a download cut short
    with pytest.raises(PSPInputError, match=r"engWEB2015eb: ot\.bzs/\.bzv are not whole index records"):
        bible.module_verses(tmp_path, "engWEB2015eb")
    (folder / "ot.bzv").write_bytes(index)
    (folder / "ot.bzz").write_bytes(b"not zlib")
    with pytest.raises(PSPInputError, match=r"ot\.bzz: block 0 does not decompress"):
        bible.module_verses(tmp_path, "engWEB2015eb")
