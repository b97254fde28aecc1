"""p-sp-multilingual (`psp languages --multilingual`): its inputs made from the languages' prepared folders, its
dev set, its training settings, its card and its table. The whole pipeline runs in test_languages.py."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest


def _gz(path: Path, header: str, rows: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("".join(f"{line}\n" for line in ([header] if header else []) + rows))


def _language(out: Path, code: str, pairs: list[tuple[str, str]], mono: list[str] | None) -> None:
    """A language folder as `psp languages`' prepare step leaves it: data/ (prepared), mono/, done-prepare."""
    from psp_hf.data.prepare import prepare_bitext

    out.mkdir(parents=True, exist_ok=True)
    source = out / f"{code}-pairs.tsv"
    source.write_text(f"{code}\ten\n" + "".join(f"{a}\t{b}\n" for a, b in pairs), encoding="utf-8")
    prepare_bitext([source], code, out / code / "data", min_tokens=1, vocab_size=60)
    if mono is not None:
        _gz(out / code / "mono" / "sentences.txt.gz", "", mono)
        sources = {"wiki": {"kept": len(mono), "license": f"CC0 ({code})", "non_commercial": False}}
        report = {"kind": "mono", "sources": sources, "sentences": len(mono)}
        (out / code / "mono" / "report.json").write_text(json.dumps(report), encoding="utf-8")
    (out / code / "done-prepare").write_text("{}", encoding="utf-8")


@pytest.fixture
def two_languages(tmp_path):
    """de and fr prepared under tmp_path/out, and a data folder with their PUD and XNLI dev pairs."""
    from psp_hf.data.sources.language_sources import DEV_SOURCE, XNLI_DEV

    out, data = tmp_path / "out", tmp_path / "data"
    words = ["hund", "katze", "haus", "baum", "auto", "see", "berg", "stadt"]
    english = ["dog", "cat", "house", "tree", "car", "lake", "mountain", "town"]
    pairs = enumerate(zip(words, english, strict=True))
    german = [(f"der {a} ist hier {i}", f"the {b} is here {i}") for i, (a, b) in pairs]
    french = [(f"le {b}x est là {i}", f"the {b} is there {i}") for i, b in enumerate(english)]
    _language(out, "de", german, ["ein satz", "shared sentence"])
    _language(out, "fr", french, ["une phrase", "shared sentence"])
    english_dev = [f"english sentence {i}" for i in range(5)]
    for code in ("de", "fr"):
        rows = [f"{code} satz {i}\t{english}" for i, english in enumerate(english_dev)]
        _gz(DEV_SOURCE.path(data, code), f"{code}\ten", rows)
        # XNLI's files are sorted by their X side, so pairs are not in the same order in every language.
        rows = [f"{code} kurz {i}\tshort {i}" for i in range(4)]
        _gz(XNLI_DEV.path(data, code), f"{code}\ten", rows if code == "de" else rows[::-1])
    return out, data


def test_prepare_puts_every_language_in_one_column_with_one_vocabulary(two_languages):
    import pyarrow.parquet as pq

    from psp_hf.experiments.languages import Settings
    from psp_hf.experiments.multilingual_model import DATA_LANG, DEV_FILE, _prepare

    out, data = two_languages
    settings = Settings(out=out, data=data, multilingual_vocab_size=80)
    folder = out / "multilingual"
    info = _prepare(["de", "fr"], folder, settings)
    assert info["pairs"] == 16 and info["languages"] == ["de", "fr"]
    table = pq.read_table(next((folder / "data" / "data").glob("*.parquet")))
    assert table.column_names == [DATA_LANG, "en"]
    others = set(table.column(DATA_LANG).to_pylist())
    assert "der hund ist hier 0" in others and "le dogx est là 0" in others
    vocabulary = json.loads((folder / "data" / "tokenizer" / "tokenizer.json").read_text())["model"]["vocab"]
    pieces = {piece for piece, _ in vocabulary}
    assert {"à", "▁dog", "atz"} <= pieces  # French, English, and German (katze; the monolingual "satz")
    # The monolingual text: each sentence once, each source named with its language and licence.
    with gzip.open(folder / "mono" / "sentences.txt.gz", "rt", encoding="utf-8") as handle:
        assert handle.read().splitlines() == ["ein satz", "shared sentence", "une phrase"]
    report = json.loads((folder / "mono" / "report.json").read_text())
    assert report["sentences"] == info["mono_sentences"] == 3
    assert report["sources"]["fr/wiki"]["license"] == "CC0 (fr)"
    # The dev set: the X side from each language in turn, so every English sentence appears once.
    lines = (folder / DEV_FILE).read_text(encoding="utf-8").splitlines()
    assert lines[0] == f"{DATA_LANG}\ten"
    expected = ["de satz 0", "fr satz 1", "de satz 2", "fr satz 3", "de satz 4"]
    assert [line.split("\t")[0] for line in lines[1:]] == expected
    assert len({line.split("\t")[1] for line in lines[1:]}) == 5
    # XNLI's dev split too, paired by English sentence (its files are in a different order in each language).
    lines = (folder / "dev-xnli-dev.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[1:] == ["de kurz 0\tshort 0", "fr kurz 1\tshort 1", "de kurz 2\tshort 2", "fr kurz 3\tshort 3"]


def test_prepare_refuses_a_language_that_is_not_prepared(two_languages):
    from psp_hf.errors import PSPInputError
    from psp_hf.experiments.languages import Settings
    from psp_hf.experiments.multilingual_model import _prepare

    out, data = two_languages
    with pytest.raises(PSPInputError, match="--multilingual: tr not prepared yet"):
        _prepare(["de", "tr"], out / "multilingual", Settings(out=out, data=data))


def test_training_takes_the_multilingual_data_dev_set_epochs_and_minutes(two_languages):
    from psp_hf.experiments.languages import Settings
    from psp_hf.experiments.multilingual_model import DEV_FILE, _prepare, multilingual_arguments

    out, data = two_languages
    settings = Settings(
        out=out, data=data, multilingual_vocab_size=80, multilingual_epochs=2, multilingual_minutes=7.5,
        extra=("--seed", "3"),
    )  # fmt: skip
    folder = out / "multilingual"
    _prepare(["de", "fr"], folder, settings)
    arguments = multilingual_arguments(folder, settings)
    assert arguments.lang == "mul" and arguments.data == [str(folder / "data")]
    assert arguments.dev_bitext == [str(folder / DEV_FILE), str(folder / "dev-xnli-dev.tsv")]
    only_pud = multilingual_arguments(folder, Settings(out=out, data=data, dev="pud"))
    assert only_pud.dev_bitext == [str(folder / DEV_FILE)]
    assert (arguments.epochs, arguments.max_minutes, arguments.seed, arguments.vocab_size) == (2, 7.5, 3, 80)
    assert arguments.piece_weights == "sif"  # the seven's recipe, which its dev sets chose too
    assert arguments.margin == 0.6
    held_back = multilingual_arguments(folder, Settings(out=out, data=data, dev="bitext"))
    assert held_back.dev_bitext == []


def test_the_card_lists_the_eight_languages_and_the_papers_seven_models():
    from psp_hf.hub.card import render_model_card
    from psp_hf.modeling.configuration_psp import PSPConfig

    card = render_model_card(PSPConfig(vocab_size=10, hidden_size=4), "multilingual")
    front = card.split("---")[1]
    for code in ("ar", "de", "en", "es", "fr", "ru", "tr", "zh"):
        assert f"- {code}\n" in front
    assert "<org>/p-sp-multilingual" in card
    assert "For reference, the paper's seven models, one per language: STS17" in card
    assert "For reference, the paper's own model for this language:" in render_model_card(
        PSPConfig(vocab_size=10, hidden_size=4), "de"
    )
    # `psp train --lang mul` writes the same card.
    assert render_model_card(PSPConfig(vocab_size=10, hidden_size=4), "mul") == card
    # Dev pairs from a file (PUD): the card does not claim training pairs were held back.
    run = {"lang": "mul", "kind": "auto", "dev": "auto", "dev_pairs": 1000, "dev_bitext": "out/dev.tsv"}
    settings = render_model_card(PSPConfig(vocab_size=10, hidden_size=4), "mul", training_info=run)
    assert "| dev set | bitext (the dev pairs below, mining accuracy) |" in settings
    assert "held back" not in settings and "`out/dev.tsv`" in settings
    run.pop("dev_bitext")
    held = render_model_card(PSPConfig(vocab_size=10, hidden_size=4), "mul", training_info=run)
    assert "| dev set | bitext (held-back pairs, mining accuracy) |" in held and "held back (bitext) | 1,000" in held


def test_the_comparison_puts_each_language_beside_its_own_model():
    from psp_hf.experiments.language_results import comparison_markdown

    rows = [{"language": "de", "tatoeba_error": 3.65, "tatoeba_error_margin": 1.7}]
    multilingual = {"tatoeba": {"de": {"error": 4.1, "margin": 2.0}, "fr": {"error": 9.5, "margin": None}}}
    lines = comparison_markdown(rows, multilingual).splitlines()
    assert lines[2] == "| de | 3.65 | 4.10 | 1.70 | 2.00 |"
    assert lines[3] == "| fr | — | 9.50 | — | — |"


def test_a_rerun_naming_other_languages_is_refused_before_any_work(two_languages):
    from psp_hf.errors import PSPInputError
    from psp_hf.experiments.languages import Settings
    from psp_hf.experiments.multilingual_model import NAME, build_multilingual

    out, data = two_languages
    (out / NAME).mkdir()
    (out / NAME / "done-prepare").write_text(json.dumps({"languages": ["de", "fr"], "pairs": 16}))
    with pytest.raises(PSPInputError, match=r"was built from de, fr, this run names de: give another --output"):
        build_multilingual(["de"], Settings(out=out, data=data))
    assert sorted(path.name for path in (out / NAME).iterdir()) == ["done-prepare"]
