"""The everyday register: XNLI's dev split as a dev set beside PUD, the everyday training sources by name, and the
non-commercial ones only by choice. Tiny data folders built by each test."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from language_data import PUD_PAIR, TATOEBA, XNLI_PAIR, _gz, tiny_data_folder
from toy_bitext import make_bitext

from psp_hf.data.sources.language_sources import (
    BITEXT_SOURCES,
    DEV_SOURCE,
    EVERYDAY,
    MONO_SOURCES,
    UD_ATIS_CAP,
    XNLI_DEV,
    bitext_sources,
    dev_files,
    mono_sources,
    read_bitext,
    stage_bitext,
)
from psp_hf.errors import PSPInputError

EVERYDAY_SOURCES = ("xsid", "ud-atis", "storybooks", "diabla", "xpersona")
NON_COMMERCIAL = ("xnli-test", "allset-grammar")


def _language_of(name: str) -> str:
    """A language the source has (tr where it has it: xsid, ud-atis, storybooks, xnli-test)."""
    languages = BITEXT_SOURCES[name].languages
    return "tr" if "tr" in languages else languages[0]


# ------------------------------------------------------------------------------------------ the dev sets
def test_dev_sets_by_name_and_never_training_text(tmp_path):
    data = tiny_data_folder(tmp_path / "data", make_bitext(tmp_path / "pairs.tsv", 20))
    pud, xnli = DEV_SOURCE.path(data, "de"), XNLI_DEV.path(data, "de")
    assert dev_files(data, "de", "pud+xnli") == [pud, xnli]  # the default rule: both, scored by their mean
    assert dev_files(data, "de", "xnli") == [xnli] and dev_files(data, "de", "pud") == [pud]
    assert dev_files(data, "de", "bitext") == []  # pairs held back from the training data instead
    with pytest.raises(PSPInputError, match="the xnli-dev dev set is missing: .*fr-en.tsv.gz"):
        dev_files(data, "fr", "xnli")
    # No name reads a dev set as training text, and saying one is refused with the reason.
    for name in ("xnli-dev", "ud-pud", "xnli"):
        with pytest.raises(PSPInputError, match=f"--sources: {name} is a dev set"):
            bitext_sources("de", f"default,{name}")
    assert "xnli-dev" not in {s.name for s, _ in bitext_sources("de", "all", non_commercial=True)}


def test_xnli_dev_sentences_are_dropped_from_training_bitext(tmp_path, monkeypatch):
    from psp_hf.data.evaluation_filter import evaluation_keys
    from psp_hf.data.prepare import prepare_bitext

    pairs = make_bitext(tmp_path / "pairs.tsv", 60)
    data = tiny_data_folder(tmp_path / "data", pairs)
    monkeypatch.setenv("PSP_DATA", str(data))  # the evaluation filter reads the data folder's sets
    keys = evaluation_keys(data)
    assert {"PUD", "XNLI-dev"} <= set(keys) and "doyoulikecoffeeinthemorning" in keys["XNLI-dev"]
    source = tmp_path / "mixed.tsv"
    rows = [*pairs, ("magst du tee", XNLI_PAIR[1].upper() + "!"), (XNLI_PAIR[0], "something else entirely here")]
    source.write_text("de\ten\n" + "".join(f"{a}\t{b}\n" for a, b in rows), encoding="utf-8")
    report = prepare_bitext([source], "de", tmp_path / "out", min_tokens=1, vocab_size=60)
    import pyarrow.parquet as pq

    kept = set()
    for shard in (tmp_path / "out" / "data").glob("*.parquet"):
        table = pq.read_table(shard)
        kept |= set(zip(table.column("de").to_pylist(), table.column("en").to_pylist(), strict=True))
    assert not any(XNLI_PAIR[0] == a or "coffee" in b for a, b in kept)  # either side matching drops the pair
    assert report["pairs_out"] == len(kept) == len(pairs)


def test_the_xnli_dev_task_scores_retrieval_error_both_directions(tmp_path):
    from psp_hf.evaluation import evaluate_model

    data = tmp_path / "data"
    rows = [(f"satz {i}", f"sentence {i}") for i in range(4)]
    _gz(data / XNLI_DEV.pattern.format(xx="de"), "de\ten\n" + "".join(f"{a}\t{b}\n" for a, b in rows))
    _gz(data / DEV_SOURCE.pattern.format(xx="de"), "de\ten\n" + "\t".join(PUD_PAIR) + "\n")

    def embed(sentences: list[str]) -> np.ndarray:
        # Pair i shares the one-hot of i, except "satz 3", which lands on pair 0: one error xx->en (1 of 4) and one
        # en->xx (sentence 0's nearest X side is tied between satz 0 and satz 3; the first, satz 0, wins: none).
        index = [3 if s == "sentence 3" else (0 if s == "satz 3" else int(s.split()[-1])) for s in sentences]
        return np.eye(4, dtype=np.float32)[index]

    result = evaluate_model(encoder=embed, tasks=["xnli-dev"], data_dir=data, tatoeba_languages=["deu", "fr"])
    scores = result["results"]["xnli-dev"]["de"]  # fr has no file: left out; deu is de
    assert scores["error_rate_xx_to_en"] == 25.0 and scores["error_rate_en_to_xx"] == 25.0
    assert scores["error_rate"] == 25.0 and scores["n"] == 4
    assert result["results"]["xnli-dev"]["error_rate_mean"] == 25.0
    with pytest.raises(PSPInputError, match="xnli-dev: none of the languages"):
        evaluate_model(encoder=embed, tasks=["xnli-dev"], data_dir=data, tatoeba_languages=["fr"])


def test_a_checkpoint_is_chosen_on_the_mean_of_pud_and_xnli_dev(tmp_path):
    """The chooser: the run scores both dev files at every evaluation, records each, and keeps the best mean."""
    from psp_hf.training import Trainer, TrainingArguments

    pairs = make_bitext(tmp_path / "pairs.tsv", 300)
    pud, xnli = tmp_path / "pud.tsv", tmp_path / "xnli.tsv"
    pud.write_text("de\ten\n" + "".join(f"{a}\t{b}\n" for a, b in pairs[:20]), encoding="utf-8")
    xnli.write_text("de\ten\n" + "".join(f"{a}\t{b}\n" for a, b in pairs[20:50]), encoding="utf-8")
    args = TrainingArguments(
        data=[str(tmp_path / "pairs.tsv")], lang="de", output_dir=str(tmp_path / "run"),
        dev_bitext=[str(pud), str(xnli)], dim=8, vocab_size=80, batch_size=16, megabatch_size=2, megabatch_anneal=0,
        lr=0.05, init_std=0.1, epochs=3,
        eval_every=10, save_every=0, threads=1, quiet=True,
    )  # fmt: skip
    args.validate()
    Trainer(args).train()
    lines = (tmp_path / "run" / "training" / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    evaluations = [record for record in map(json.loads, lines) if record.get("event") == "eval"]
    assert len(evaluations) >= 3
    for record in evaluations:
        first, second = record["dev_bitext_scores"]  # PUD's and XNLI dev's accuracy, in --dev-bitext's order
        assert record["dev_bitext_accuracy"] == pytest.approx((first + second) / 2)
    trained = [record for record in evaluations if record["step"] > 0]
    best = max(trained, key=lambda record: record["dev_bitext_accuracy"])  # the first of equals, as the run keeps
    assert evaluations[-1]["best_step"] == best["step"]
    assert evaluations[-1]["dev_bitext_accuracy"] > evaluations[0]["dev_bitext_accuracy"]  # it learnt something


# ------------------------------------------------------------------------------------- the everyday sources
@pytest.mark.parametrize("name", [*EVERYDAY_SOURCES, *NON_COMMERCIAL])
def test_each_new_source_reads_its_header_records_its_licence_and_loses_evaluation_pairs(tmp_path, monkeypatch, name):
    from psp_hf.data.prepare import prepare_bitext
    from psp_hf.data.sources.language_sources import source_licences

    code = _language_of(name)
    source = BITEXT_SOURCES[name]
    data = tiny_data_folder(tmp_path / "data", make_bitext(tmp_path / "pairs.tsv", 5))
    tatoeba = (f"tatoeba cümlesi {code}", TATOEBA[1].capitalize() + ".")  # its English side is a Tatoeba sentence
    rows = [(f"{code} cümle {i} burada", f"sentence {i} is here") for i in range(30)] + [tatoeba]
    _gz(source.path(data, code), f"{code}\ten\n" + "".join(f"{a}\t{b}\n" for a, b in rows))
    chosen = bitext_sources(code, name, non_commercial=source.non_commercial)
    assert [s.name for s, _ in chosen] == [name]
    (tmp_path / "staged").mkdir()
    staged = stage_bitext(chosen, data, code, tmp_path / "staged")
    assert read_bitext(staged[0], code) == rows  # read by its header, every pair (none over ud-atis' cap here)
    monkeypatch.setenv("PSP_DATA", str(data))  # the evaluation filter reads the data folder's sets
    report = prepare_bitext(staged, code, tmp_path / "out", min_tokens=1, vocab_size=60)
    assert report["pairs_out"] == 30  # the Tatoeba pair is dropped by the evaluation filter
    licence = source_licences(chosen, "data folder")[name]
    assert licence["non_commercial"] == (name in NON_COMMERCIAL) and licence["license"] == source.license
    assert ("non-commercial" in source.license) == (name in NON_COMMERCIAL)
    # A file whose header does not name the language and English fails naming the file and line 1.
    _gz(source.path(data, code), f"{code}\tfr\nbir\tun\n")
    with pytest.raises(PSPInputError, match=rf"{source.pattern.format(xx=code)}:1: the header must name {code} and en"):
        stage_bitext(chosen, data, code, tmp_path / "staged")


def test_everyday_names_the_group_and_ud_atis_is_capped(tmp_path):
    assert [s.name for s, _ in bitext_sources("tr", EVERYDAY)] == ["xsid", "ud-atis", "storybooks"]
    assert [s.name for s, _ in bitext_sources("fr", f"default,{EVERYDAY}")] == [
        "multi30k", "wmt-news", "storybooks", "diabla", "xpersona",
    ]  # fmt: skip
    # The dev rule chose them: part of the default too, after the sources before them.
    assert [s.name for s, _ in bitext_sources("tr")] == ["wmt-news", "xsid", "ud-atis", "storybooks"]
    assert "xnli-test" not in {s.name for s, _ in bitext_sources("zh", f"all,{EVERYDAY}")}
    # The teacher's unlabeled Chinese dialogue: named, with the group, and in zh's default text.
    assert [s.name for s, _ in mono_sources("zh", EVERYDAY)] == ["dialogue"]
    assert "dialogue" in {s.name for s, _ in mono_sources("zh", "default")}
    assert MONO_SOURCES["zh"]["dialogue"].pattern.format(folder="zh") == "unlabeled/zh/dialogue/sentences.txt.gz"
    data = tmp_path / "data"
    rows = [(f"uçuş {i}", f"flight {i}") for i in range(UD_ATIS_CAP + 300)]
    _gz(BITEXT_SOURCES["ud-atis"].path(data, "tr"), "tr\ten\n" + "".join(f"{a}\t{b}\n" for a, b in rows))
    capped = read_bitext(stage_bitext(bitext_sources("tr", "ud-atis"), data, "tr", tmp_path)[0], "tr")
    assert len(capped) == UD_ATIS_CAP and set(capped) < set(rows)
    assert rows.index(capped[-1]) > UD_ATIS_CAP  # drawn over the whole file, not its head
    half = read_bitext(stage_bitext(bitext_sources("tr", "ud-atis=0.5"), data, "tr", tmp_path)[0], "tr")
    assert len(half) == UD_ATIS_CAP // 2  # the weight applies after the cap


# --------------------------------------------------------------------------------- the opt-in, non-commercial
@pytest.mark.parametrize("name", NON_COMMERCIAL)
def test_a_non_commercial_source_is_refused_without_the_flag(name):
    code = _language_of(name)
    with pytest.raises(PSPInputError, match=f"{name} is licensed for non-commercial use only: pass --non-commercial"):
        bitext_sources(code, f"default,{name}")
    assert name in {s.name for s, _ in bitext_sources(code, f"default,{name}", non_commercial=True)}
    # Never in the everyday group, even with the flag; `all` takes them only with it (as the Arabic news).
    assert name not in {s.name for s, _ in bitext_sources(code, EVERYDAY, non_commercial=True)}
    assert name not in {s.name for s, _ in bitext_sources(code, "all")}
    assert name in {s.name for s, _ in bitext_sources(code, "all", non_commercial=True)}


def test_psp_languages_refuses_before_any_work_and_the_card_says_non_commercial(tmp_path, capsys):
    from psp_hf.cli import main
    from psp_hf.experiments.languages_data import card_training_text

    data = tiny_data_folder(tmp_path / "data", make_bitext(tmp_path / "pairs.tsv", 20))
    out = tmp_path / "out"
    command = ["languages", "--langs", "de", "-o", str(out), "--data-dir", str(data), "--sources", "default,xnli-test"]
    assert main(command) != 0
    error = capsys.readouterr().err
    assert "xnli-test is licensed for non-commercial use only: pass --non-commercial" in error
    assert "Traceback" not in error and not out.exists()  # refused before any work
    prepare = ["prepare", "bitext-sources", "--lang", "zh", "--sources", "allset-grammar", "-o", str(tmp_path / "p")]
    assert main([*prepare, "--data-dir", str(data)]) != 0
    assert "allset-grammar is licensed for non-commercial use only" in capsys.readouterr().err
    # The card: a non-commercial bitext source makes the model non-commercial, and its licence is named.
    folder = tmp_path / "built"
    (folder / "data" / "report").mkdir(parents=True)
    sources = {
        "xnli-test": {"license": BITEXT_SOURCES["xnli-test"].license, "kind": "data folder", "non_commercial": True}
    }
    report = {"pairs_out": 5, "inputs": [{"path": "x/xnli-test.tsv", "pairs": 5}], "sources": sources}
    (folder / "data" / "report" / "report.json").write_text(json.dumps(report), encoding="utf-8")
    text, non_commercial = card_training_text(
        folder, [str(DEV_SOURCE.path(data, "de")), str(XNLI_DEV.path(data, "de"))]
    )
    assert non_commercial and "xnli-test 5 pairs read (CC BY-NC 4.0 (XNLI test split): non-commercial)" in text
    assert "Dev sets (checkpoints chosen on them, scored by the mean of their mining accuracies" in text
    assert "ud-pud (CC BY-SA 3.0" in text and "xnli-dev (CC BY-NC 4.0" in text


def test_psp_languages_with_no_flags_is_the_recipe():
    from psp_hf.cli.flags import Parser
    from psp_hf.cli.languages import add_arguments, recipe_changes, resolve_init_rows
    from psp_hf.experiments.english_rows import E5_STUDENT
    from psp_hf.experiments.languages import RECIPE, Settings

    parser = Parser()
    add_arguments(parser)
    args = parser.parse_args([])
    for name, value in RECIPE.items():
        if name != "init_rows_from":
            assert getattr(args, name) == value, name
    assert (
        resolve_init_rows(args.init_rows_from, args.teacher, args.margin_only) == E5_STUDENT == RECIPE["init_rows_from"]
    )
    assert resolve_init_rows("auto", "default", False) is None and resolve_init_rows("auto", "e5-small", True) is None
    assert recipe_changes(args) == ()  # the card then says the recipe is unchanged
    changed = parser.parse_args(["--sources", "default,everyday", "--dev", "pud", "--minutes", "3"])
    assert recipe_changes(changed) == ("--sources default,everyday", "--dev pud")  # budgets are not changes
    smaller = parser.parse_args(["--english-sentences", "20000", "--mono-fragments", "5000"])
    assert recipe_changes(smaller) == ("--mono-fragments 5000", "--english-sentences 20000")
    assert Settings(out=Path("o"), data=Path("d")).dev == "pud+xnli" == RECIPE["dev"]


def test_the_card_names_the_recipe_and_the_two_dev_sets():
    from psp_hf.experiments.languages import recipe_description
    from psp_hf.hub.card import render_model_card
    from psp_hf.modeling.configuration_psp import PSPConfig

    run = {
        "lang": "tr",
        "dev": "auto",
        "dev_bitext": ["data/bitext/ud-pud/tr-en.tsv.gz", "data/bitext/everyday/xnli/dev/tr-en.tsv.gz"],
        "recipe": recipe_description(("--sources default,everyday",)),
    }
    card = render_model_card(PSPConfig(vocab_size=10, hidden_size=4), "tr", training_info=run)
    assert "| dev set | bitext (the dev pairs below, the mean of their mining accuracies) |" in card
    assert "measured recipe (RECIPE in psp_hf.experiments.languages), changed: --sources default,everyday" in card
    assert recipe_description(()).endswith("), unchanged")
