"""The model-index of a card links every result to its Hub dataset: checked with huggingface_hub's own parser."""

from __future__ import annotations

import pytest

from psp_hf.evaluation.model_index import (
    card_results,
    describe_task,
    eval_results_for_card,
    model_index,
    model_index_yaml,
    result_rows,
)
from psp_hf.evaluation.tasks import SENTEVAL_TASKS, STS_YEAR_TASKS


def _scores(pearson: float) -> dict:
    return {"pearson": pearson, "spearman": pearson - 1, "n": 10}


def _evaluation() -> dict:
    """The shape `evaluate_model` returns, for every task, with distinct numbers."""
    results: dict = {}
    for offset, task in enumerate(STS_YEAR_TASKS):
        results[task] = {
            "datasets": {"MSRpar": _scores(50.0 + offset)},
            "pearson_mean": 60.0 + offset,
            "all_pearson": 61.5 + offset,
            "all_spearman": 62.5 + offset,
        }
    results["stsb"] = {"dev": _scores(70.0), "test": _scores(71.0)}
    results["sickr"] = {"test": _scores(72.0)}
    pairs = {
        "ar-ar": 40.0,
        "ar-en": 41.0,
        "es-es": 42.0,
        "es-en": 43.0,
        "es-en-wmt": 44.0,
        "en-en": 45.0,
        "tr-en": 46.0,
    }
    results["sts17"] = {pair: _scores(value) for pair, value in pairs.items()} | {"pearson_mean": 43.0}
    results["tatoeba"] = {"de": {"error_rate": 3.0}, "zh": {"error_rate": 9.0}, "error_rate_mean": 6.0}
    for offset, task in enumerate(SENTEVAL_TASKS):
        results[task] = {"accuracy": 80.0 + offset}
    results["mrpc"]["f1"] = 81.25
    summary = {"sts12-16": {"years": list(STS_YEAR_TASKS), "pearson_mean": 62.0, "all_spearman_mean": 64.5}}
    return {"model": {"name": "p-sp-en"}, "results": results, "summary": summary}


def _by_key(eval_results) -> dict:
    return {(r.dataset_type, r.dataset_config, r.dataset_split, r.metric_type): r.metric_value for r in eval_results}


def test_model_index_round_trips_through_huggingface_hub_parser():
    from huggingface_hub.repocard_data import model_index_to_eval_results

    index = model_index(_evaluation())
    name, parsed = model_index_to_eval_results(index)
    assert name == "p-sp-en"
    found = _by_key(parsed)
    # MTEB's copies of the STS sets: pooled Pearson/Spearman as MTEB reports them, plus the papers' mean.
    for offset, year in enumerate(("12", "13", "14", "15", "16")):
        assert found[(f"mteb/sts{year}-sts", None, "test", "cos_sim_spearman")] == 62.5 + offset
        assert found[(f"mteb/sts{year}-sts", None, "test", "cos_sim_pearson")] == 61.5 + offset
        assert found[(f"mteb/sts{year}-sts", None, "test", "cos_sim_pearson_mean_of_datasets")] == 60.0 + offset
    assert found[("mteb/stsbenchmark-sts", None, "validation", "cos_sim_pearson")] == 70.0
    assert found[("mteb/stsbenchmark-sts", None, "test", "cos_sim_spearman")] == 70.0
    assert found[("mteb/sickr-sts", None, "test", "cos_sim_pearson")] == 72.0
    # STS17 tracks under the Hub copy's config names (English first for the cross-lingual ones).
    sts17 = {config: value for (dataset, config, _, metric), value in found.items()
             if dataset == "mteb/sts17-crosslingual-sts" and metric == "cos_sim_pearson"}  # fmt: skip
    assert sts17 == {"ar-ar": 40.0, "en-ar": 41.0, "es-es": 42.0, "es-en": 43.0, "en-en": 45.0, "en-tr": 46.0}
    assert found[("mteb/tatoeba-bitext-mining", "deu-eng", "test", "error_rate")] == 3.0
    assert found[("mteb/tatoeba-bitext-mining", "cmn-eng", "test", "error_rate")] == 9.0
    senteval = {dataset: (config, split) for (dataset, config, split, metric) in found if metric == "accuracy"}
    assert senteval == {
        "cornell-movie-review-data/rotten_tomatoes": (None, None),
        "SetFit/SentEval-CR": (None, None),
        "SetFit/subj": (None, None),
        "CogComp/trec": (None, "test"),
        "SetFit/sst2": (None, "test"),
        "SetFit/sst5": (None, "test"),
        "nyu-mll/glue": ("mrpc", "test"),
        "RobZamp/sick": (None, "test"),
    }
    assert found[("nyu-mll/glue", "mrpc", "test", "f1")] == 81.25
    # Every dataset type is a Hub id; the sets without one (STS12-16 mean, es-en-wmt, MPQA) are not linked.
    assert all("/" in dataset for dataset, *_ in found)
    names = {r.dataset_name for r in parsed}
    assert not {"SemEval STS 2012-2016 (mean of the years)", "STS17 (es-en-wmt)", "MPQA (opinion polarity)"} & names
    assert "STS17 (ar-en)" in names and "SST-2" in names


def test_rows_without_a_hub_dataset_stay_in_the_table():
    rows = result_rows(card_results(_evaluation()))
    table_only = {row.task.dataset_name for row in rows if row.task.dataset_type is None}
    assert table_only == {"SemEval STS 2012-2016 (mean of the years)", "STS17 (es-en-wmt)", "MPQA (opinion polarity)"}
    assert len(eval_results_for_card(rows)) == len(rows) - 5  # two metrics for sts12-16 and es-en-wmt, one for MPQA


def test_card_model_index_parses_back_with_model_card(tmp_path):
    from huggingface_hub import ModelCard, ModelCardData

    from psp_hf.encoder import PSPEncoder
    from psp_hf.hub.card import render_model_card
    from psp_hf.tokenization.pieces import train_tokenizer

    encoder = PSPEncoder.from_tokenizer(
        train_tokenizer(["a man plays a guitar", "a woman slices an onion"] * 20, vocab_size=40), hidden_size=8
    )
    results = card_results(_evaluation())
    text = render_model_card(encoder, "en", eval_results=results, repo_id="org/p-sp-en")
    card = ModelCard(text)
    expected = eval_results_for_card(result_rows(results))
    assert _by_key(card.data.eval_results) == _by_key(expected)
    assert card.data.model_name == "p-sp-en"
    # The card's table links each set to its Hub dataset; a set without one is plain text.
    assert "[STS17 (ar-en)](https://huggingface.co/datasets/mteb/sts17-crosslingual-sts/viewer/en-ar)" in card.text
    assert "[SemEval STS 2013](https://huggingface.co/datasets/mteb/sts13-sts)" in card.text
    assert "| MPQA (opinion polarity) |" in card.text
    # ModelCardData -> YAML front matter -> ModelCardData keeps every entry.
    data = ModelCardData(model_name="p-sp-en", eval_results=expected)
    again = ModelCard(f"---\n{data.to_yaml()}\n---\ntext\n").data.eval_results
    assert _by_key(again) == _by_key(expected)
    assert "mteb/sts17-crosslingual-sts" in model_index_yaml(_evaluation())


@pytest.mark.parametrize(
    ("path", "dataset", "config"),
    [
        (("sts17", "tr-en"), "mteb/sts17-crosslingual-sts", "en-tr"),
        (("sts17-ar-en",), "mteb/sts17-crosslingual-sts", "en-ar"),
        (("tatoeba", "fra"), "mteb/tatoeba-bitext-mining", "fra-eng"),
        (("sts12", "MSRpar"), None, None),
        (("sick-e",), "RobZamp/sick", None),
        (("my-org/my-sts",), "my-org/my-sts", None),
        (("notes",), None, None),
    ],
)
def test_describe_task_maps_to_hub_ids(path, dataset, config):
    task = describe_task(path)
    assert (task.dataset_type, task.dataset_config) == (dataset, config)
