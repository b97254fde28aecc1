"""`psp backtranslate` end to end with a tiny random seq2seq model and a tiny causal LM built here (no network).

The models translate nothing meaningfully; the tests check the mechanics: costs equal a teacher-forced
forward pass, batches are length-sorted and the output aligned with the input, a killed run resumes to the
same output, the filters' bounds and counts, and that the output feeds `psp prepare paraphrases`.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from toy_translation import build_models, make_bitext

from psp_hf.backtranslation import filters as bt_filters
from psp_hf.backtranslation.pipeline import read_translations
from psp_hf.backtranslation.translate import Translator, length_sorted_batches
from psp_hf.cli import main
from psp_hf.io.reading import iter_tsv

PYTHON = sys.executable
REPO = Path(__file__).resolve().parents[2]
MAX_NEW_TOKENS = 12


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    return build_models(tmp_path_factory.mktemp("bt-models"))


def forward_cost(translator: Translator, source: str, translation: str) -> float:
    """Negative log-probability per token of `translation` (+ </s>) given `source`, one unpadded forward pass."""
    tokenizer, model = translator.tokenizer, translator.model
    labels = torch.tensor([tokenizer(text_target=translation)["input_ids"]])
    start = torch.tensor([[model.config.decoder_start_token_id]])
    inputs = tokenizer([source], return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs, decoder_input_ids=torch.cat([start, labels[:, :-1]], dim=1)).logits
    return float(torch.nn.functional.cross_entropy(logits[0], labels[0]))


@pytest.mark.parametrize("beams", [1, 3])
def test_costs_equal_a_forward_pass_and_output_follows_input_order(models_dir, tmp_path, beams):
    rows = make_bitext(tmp_path / "b.tsv", 24, seed=beams)
    sources = [source for source, _ in rows]
    translator = Translator(str(models_dir / "mt"), device="cpu", num_beams=beams, max_new_tokens=MAX_NEW_TOKENS)
    translations, costs = translator.translate(sources, batch_size=5)
    checked = 0
    for source, translation, cost in zip(sources, translations, costs, strict=True):
        if len(translation.split()) >= MAX_NEW_TOKENS:
            continue  # stopped by the length cap: no </s> to score
        assert cost == pytest.approx(forward_cost(translator, source, translation), abs=1e-4)
        checked += 1
    assert checked >= len(sources) // 2
    assert len({len(t.split()) for t in translations}) > 2  # the lengths vary, so the masking is exercised
    # Aligned with the input: each sentence translated alone gives the same row.
    for index in (0, 7, 23):
        alone, alone_cost = translator.translate([sources[index]], batch_size=1)
        assert alone == [translations[index]]
        assert alone_cost[0] == pytest.approx(costs[index], abs=1e-4)


def test_batches_are_sorted_by_source_length(models_dir, monkeypatch):
    assert [b.tolist() for b in length_sorted_batches([2, 5, 1, 5, 3], 2)] == [[1, 3], [4, 0], [2]]
    translator = Translator(str(models_dir / "mt"), device="cpu", num_beams=1, max_new_tokens=4)
    seen: list[list[int]] = []
    original = translator._translate_batch

    def spy(batch):
        seen.append([len(sentence.split()) for sentence in batch])
        return original(batch)

    monkeypatch.setattr(translator, "_translate_batch", spy)
    sources = ["ahoj", "pes pes pes pes", "kočka dům", "voda voda voda", "strom"]
    translations, _ = translator.translate(sources, batch_size=2)
    assert seen == [[4, 3], [2, 1], [1]]
    assert translations == [translator.translate([s], batch_size=1)[0][0] for s in sources]


def run_cli(*args: str) -> int:
    return main(["backtranslate", *args])


def common_args(bitext: Path, models_dir: Path) -> list[str]:
    return [
        str(bitext),
        "--src-lang",
        "cs",
        "--model",
        str(models_dir / "mt"),
        "--beam-size",
        "2",
        "--batch-size",
        "3",
        "--chunk-size",
        "4",
        "--max-new-tokens",
        str(MAX_NEW_TOKENS),
        "-q",
    ]


def test_end_to_end_filters_and_feeds_psp_prepare(models_dir, tmp_path, capsys):
    rows = make_bitext(tmp_path / "cs-en.tsv", 30, header=True)
    out = tmp_path / "bt"
    args = common_args(tmp_path / "cs-en.tsv", models_dir)
    bounds = ["--min-length", "3", "--max-cost", "2.4", "--max-overlap", "0.5", "--lm", str(models_dir / "lm")]
    assert run_cli(*args, "-o", str(out), "--classifier", *bounds) == 0, capsys.readouterr().err
    references, translations, costs = read_translations(out / "translations.tsv")
    assert references == [reference for _, reference in rows]  # one row per input line, in input order
    assert len(translations) == 30 and np.all(costs > 0)
    report = json.loads((out / "report.json").read_text())
    filtering = report["filtering"]
    assert filtering["pairs_in"] == 30
    assert filtering["pairs_in"] == sum(item["removed"] for item in filtering["filters"]) + filtering["pairs_out"]
    # Recompute the bounds from the measures of translations.tsv: the kept rows are exactly those inside.
    lengths = bt_filters.translation_lengths(translations)
    overlaps = bt_filters.overlaps(references, translations, 3)
    inside = (lengths >= 3) & (costs <= 2.4) & (overlaps <= 0.5)
    counts = {item["measure"]: item for item in filtering["filters"]}
    assert counts["length"]["outside"] == int((lengths < 3).sum())
    assert counts["cost"]["outside"] == int((costs > 2.4).sum())
    kept = list(iter_tsv(out / "pairs.tsv", header=True))
    assert filtering["pairs_out"] == len(kept) == int(inside.sum()) > 0
    header = next(iter_tsv(out / "pairs.tsv"))[1]
    assert header == ["sentence1", "sentence2", "cost", "length", "overlap", "bleu", "lm", "machine"]
    expected = [(references[i], translations[i]) for i in np.flatnonzero(inside)]
    assert [(fields[0], fields[1]) for _, fields in kept] == expected
    for _, fields in kept:
        assert 0.0 <= float(fields[7]) <= 1.0 and float(fields[6]) > 0  # machine probability, LM NLL
    card = (out / "README.md").read_text()
    assert "config_name: pairs" in card and "- cs" in card
    from datasets import load_dataset

    # The card's configs let `datasets` read both TSV files of the folder.
    assert load_dataset(str(out), "pairs", split="train")["sentence2"] == [t for _, t in expected]
    assert load_dataset(str(out), "translations", split="train")["reference"] == references

    # Into psp prepare like any paraphrase data (no score column: no score filter).
    prepared = tmp_path / "prepared"
    code = main(
        [
            "prepare",
            "paraphrases",
            str(out / "pairs.tsv"),
            "-o",
            str(prepared),
            "--no-langid",
            "--no-score-filter",
            "--no-overlap-filter",
            "--vocab-size",
            "40",
            "--min-tokens",
            "1",
            "-q",
        ]
    )
    assert code == 0, capsys.readouterr().err
    data = load_dataset("parquet", data_files=str(prepared / "data" / "*.parquet"), split="train")
    assert len(data) > 0 and set(data["sentence1"]) <= {r.lower() for r, _ in expected}
    # ... and into psp train.
    model = tmp_path / "model"
    train = ["--data", str(prepared), "-o", str(model), "--dim", "8", "--batch-size", "4"]
    train += ["--megabatch-size", "1", "--epochs", "1", "--dev", "none", "--quiet"]
    assert main(["train", *train]) == 0, capsys.readouterr().err
    from psp_hf import load

    assert load(model).encode([expected[0][1]]).shape == (1, 8)

    # A finished run with other bounds: no translation, only refiltering.
    assert run_cli(*args, "-o", str(out), "--max-bleu", "0") == 0
    report = json.loads((out / "report.json").read_text())
    assert report["translation"]["already_complete"] is True
    assert report["filtering"]["filters"][0]["rule"] == "bleu <= 0"
    bleus = bt_filters.sentence_bleus(references, translations)
    assert report["filtering"]["pairs_out"] == int((bleus <= 0).sum())


# Runs `psp backtranslate` slowed down per chunk, so the test can kill it between chunks.
SLOW_CLI = """
import sys, time
from psp_hf.backtranslation import translate
original = translate.Translator.translate
def slow(self, *args, **kwargs):
    time.sleep(0.3)
    return original(self, *args, **kwargs)
translate.Translator.translate = slow
from psp_hf.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_output(models_dir, tmp_path, capsys):
    make_bitext(tmp_path / "b.tsv", 40, seed=5)
    args = common_args(tmp_path / "b.tsv", models_dir)
    reference = tmp_path / "reference"
    assert run_cli(*args, "-o", str(reference)) == 0

    killed = tmp_path / "killed"
    process = subprocess.Popen(
        [PYTHON, "-c", SLOW_CLI, "backtranslate", *args, "-o", str(killed)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    third = killed / "parts" / "part-000002.tsv"
    deadline = time.time() + 240
    while not third.is_file() and process.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert third.is_file() and not (killed / "translations.tsv").exists(), process.stderr.read().decode()
    process.stderr.close()
    (killed / "parts" / ".part-000009.tsv.x.tmp").write_text("half a chunk")  # as a kill mid-write leaves

    # Other settings are refused rather than mixed in.
    assert run_cli(*args, "-o", str(killed), "--max-new-tokens", "5") == 2
    assert "max_new_tokens differ" in capsys.readouterr().err

    assert run_cli(*args, "-o", str(killed)) == 0
    report = json.loads((killed / "report.json").read_text())
    assert report["translation"]["chunks_found"] >= 3
    assert report["translation"]["chunks_found"] + report["translation"]["chunks_translated"] == 10
    assert (killed / "translations.tsv").read_bytes() == (reference / "translations.tsv").read_bytes()
    assert (killed / "pairs.tsv").read_bytes() == (reference / "pairs.tsv").read_bytes()
    assert not (killed / "parts").exists()


def test_bad_input_names_file_and_line(models_dir, tmp_path, capsys):
    bitext = tmp_path / "bad.tsv"
    bitext.write_text("pes\tdog\nkočka\tcat\textra\n", encoding="utf-8")
    assert run_cli(*common_args(bitext, models_dir), "-o", str(tmp_path / "o")) == 2
    assert f"psp: error: {bitext}:2: expected 2 tab-separated fields, got 3" in capsys.readouterr().err
    assert run_cli(*common_args(tmp_path / "missing.tsv", models_dir), "-o", str(tmp_path / "o")) == 2
    assert "missing.tsv: no such file" in capsys.readouterr().err
    good = tmp_path / "good.tsv"
    make_bitext(good, 3)
    assert run_cli(*common_args(good, models_dir), "-o", str(tmp_path / "p"), "--max-lm", "3") == 2
    assert "--max-lm need --lm" in capsys.readouterr().err
    assert run_cli(*common_args(good, models_dir), "-o", str(tmp_path / "p"), "--min-bleu", "5", "--max-bleu", "1")
    assert "range is empty" in capsys.readouterr().err
    code = run_cli(*common_args(good, models_dir), "-o", str(tmp_path / "p"), "--lm", str(tmp_path / "no-lm"))
    assert code == 2 and f"--lm {tmp_path / 'no-lm'}: no such model folder" in capsys.readouterr().err  # at once
    assert not (tmp_path / "p").exists()
    (tmp_path / "not-an-lm").mkdir()  # there, but no language model: found out when filtering
    code = run_cli(*common_args(good, models_dir), "-o", str(tmp_path / "p"), "--lm", str(tmp_path / "not-an-lm"))
    assert code == 2 and "psp: error: filtering" in capsys.readouterr().err
    assert (tmp_path / "p" / "translations.tsv").is_file()  # the translations are kept
    assert run_cli(*common_args(good, models_dir), "-o", str(tmp_path / "q"), "--columns", "cs,en") == 2
    assert "no header" in capsys.readouterr().err


def test_language_model_nll_is_a_forward_pass(models_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    texts = ["the dog runs", "a big house is small", "", "sun"]
    values = bt_filters.language_model_nll(texts, str(models_dir / "lm"), batch_size=3, device="cpu")
    tokenizer = AutoTokenizer.from_pretrained(models_dir / "lm")
    lm = AutoModelForCausalLM.from_pretrained(models_dir / "lm").eval()
    for text, value in zip(texts, values, strict=True):
        if not text:
            assert np.isnan(value)
            continue
        ids = torch.tensor([[tokenizer.bos_token_id, *tokenizer(text, add_special_tokens=False)["input_ids"]]])
        with torch.no_grad():
            logits = lm(input_ids=ids).logits
        assert value == pytest.approx(float(torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:])), abs=1e-5)


def test_push_to_hub(models_dir, tmp_path, hub_server, hub_repo_id, capsys):
    make_bitext(tmp_path / "b.tsv", 6)
    out = tmp_path / "out"
    code = run_cli(*common_args(tmp_path / "b.tsv", models_dir), "-o", str(out), "--push-to-hub", hub_repo_id)
    assert code == 0, capsys.readouterr().err
    files = hub_server.repo_files(hub_repo_id, repo_type="dataset")
    assert {"translations.tsv", "pairs.tsv", "README.md", "report.json"} <= set(files)
    assert run_cli(*common_args(tmp_path / "b.tsv", models_dir), "--push-to-hub", "not a repo id") == 2
    assert "--push-to-hub 'not a repo id'" in capsys.readouterr().err


def test_target_token_starts_every_translation(models_dir, tmp_path, capsys):
    rows = make_bitext(tmp_path / "b.tsv", 8)
    translator = Translator(str(models_dir / "mt"), device="cpu", num_beams=2, max_new_tokens=6, target_token="sun")
    translations, costs = translator.translate([source for source, _ in rows], batch_size=3)
    assert all(translation.split()[0] == "sun" for translation in translations)
    # The forced token is part of the scored translation.
    for (source, _), translation, cost in zip(rows, translations, costs, strict=True):
        if len(translation.split()) < 6:
            assert cost == pytest.approx(forward_cost(translator, source, translation), abs=1e-4)
    code = run_cli(*common_args(tmp_path / "b.tsv", models_dir), "-o", str(tmp_path / "o"), "--target-token", "xx")
    assert code == 2 and "--target-token 'xx' is not in the vocabulary" in capsys.readouterr().err
