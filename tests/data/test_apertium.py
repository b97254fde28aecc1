"""Apertium translations as a registry source, on a made-up unpacked root whose "translator" is sed.

The pipeline code (mode files read from the root, the unpacked programs found first, marks of untranslated
words, line alignment) is what is tested; the real programs are tried on the packages `make apertium` unpacks
(`make test` does it first), so that test fails rather than skips where they are missing.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from psp_hf.data.sources.apertium import APERTIUM_MODES, available, clean_translation, mode_command, translate
from psp_hf.data.sources.registry_bitext import bitext_sources, limited_pairs
from psp_hf.data_folder import cache_dir
from psp_hf.errors import PSPInputError


def write_program(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def fake_root(tmp_path: Path, modes: dict[str, str]) -> Path:
    """A root with pass-through deformatters, an `lt-proc` that only marks its presence, and `modes`.

    Each mode's command may name its data as /usr/share/apertium/..., as Debian's mode files do."""
    root = tmp_path / "root"
    bin_folder = root / "usr" / "bin"
    write_program(bin_folder / "apertium-destxt", "cat")
    write_program(bin_folder / "apertium-retxt", "cat")
    write_program(bin_folder / "lt-proc", "cat")
    folder = root / "usr" / "share" / "apertium" / "modes"
    folder.mkdir(parents=True)
    for name, command in modes.items():
        (folder / f"{name}.mode").write_text(command + "\n")
    return root


# English -> "Spanish": two words known; "zorp" is unknown (marked *), a line with BREAK is swallowed whole.
ENG_SPA = "sed -e 's/\\bthe\\b/el/g; s/\\bdog\\b/perro/g; s/\\bzorp\\b/*zorp/g; /BREAK/d'"
ES_FR = "sed -e 's/\\bel\\b/le/g; s/\\bperro\\b/chien/g'"


def test_marks_of_untranslated_words_are_removed_and_counted():
    assert clean_translation("el *maze de *UUCP conexiones") == ("el maze de UUCP conexiones", 2)
    assert clean_translation("un @subject y #vino, 3*4 e-mail@host") == ("un subject y vino, 3*4 e-mail@host", 2)


def test_mode_command_reads_the_data_from_the_unpacked_root(tmp_path):
    root = fake_root(tmp_path, {"eng-spa": "lt-proc $1 '/usr/share/apertium/apertium-eng-spa/x.bin' | tagger $2 y"})
    command = mode_command(root, "eng-spa")
    assert f"'{root}/usr/share/apertium/apertium-eng-spa/x.bin'" in command
    assert "lt-proc -g" in command and "$2" not in command
    with pytest.raises(PSPInputError, match=r"es-fr\.mode"):
        mode_command(root, "es-fr")


def test_translation_keeps_order_drops_broken_and_mostly_unknown_lines(tmp_path):
    root = fake_root(tmp_path, {"eng-spa": ENG_SPA})
    assert available("es", root) and not available("fr", root) and not available("de", root)
    english = ["the dog", "  ", "the zorp", "BREAK the dog", "the dog zorp dog the dog", "the\tdog\n"]
    pairs = list(translate(english, "es", root, chunk_lines=4))
    # "the zorp": half its words unknown; the BREAK line broke the alignment and was found by splitting its chunk.
    assert pairs == [
        ("el perro", "the dog"),
        ("el perro zorp perro el perro", "the dog zorp dog the dog"),
        ("el perro", "the dog"),
    ]


def test_french_goes_through_spanish(tmp_path):
    root = fake_root(tmp_path, {"eng-spa": ENG_SPA, "es-fr": ES_FR})
    assert APERTIUM_MODES["fr"] == ("eng-spa", "es-fr")
    assert list(translate(["the dog", "BREAK"], "fr", root)) == [("le chien", "the dog")]


def test_a_failing_program_is_a_clear_error(tmp_path):
    root = fake_root(tmp_path, {"eng-spa": "sh -c 'echo broken data >&2; exit 3'"})
    with pytest.raises(PSPInputError, match="Apertium failed \\(exit 3\\): broken data"):
        list(translate(["the dog"], "es", root))
    with pytest.raises(PSPInputError, match="no Apertium translation into 'de'"):
        list(translate(["the dog"], "de", root))


def test_registry_text_becomes_a_translated_source_with_both_licences(tmp_path, monkeypatch):
    root = fake_root(tmp_path, {"eng-spa": ENG_SPA})
    text = tmp_path / "text"
    fortunes = text / "usr" / "share" / "games" / "fortunes"
    fortunes.mkdir(parents=True)
    (fortunes / "dogs").write_text("the dog\n%\nthe zorp\n%\nBREAK\n%\nthe dog dog\n%\n")
    monkeypatch.setenv("PSP_REGISTRY_TEXT", str(text))
    (source,) = bitext_sources("es", root, ("apertium",))
    assert source.name == "apertium-fortunes-es" and source.kind == "apertium"
    assert (
        source.license.startswith("English text: BSD licence") and "translated by Apertium (eng-spa" in source.license
    )
    every = limited_pairs(source, None)
    assert every == [("el perro", "the dog"), ("el perro perro", "the dog dog")]
    # A limit draws English sentences before translating (2 of the 4), so fewer pairs may come out.
    sampled = limited_pairs(source, 2)
    assert len(sampled) <= 2 and set(sampled) <= set(every) and sampled == limited_pairs(source, 2)
    assert bitext_sources("de", root, ("apertium",)) == []


@pytest.mark.debian
def test_the_unpacked_apertium_translates_english_into_spanish_and_french():
    root = cache_dir() / "apertium" / "root"
    assert available("es", root) and available("fr", root), f"Apertium is not unpacked under {root}: make apertium"
    (spanish, _), (french, _) = (next(translate(["The dog is sleeping."], lang, root)) for lang in ("es", "fr"))
    assert "perro" in spanish.lower()
    assert "chien" in french.lower()
