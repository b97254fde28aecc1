"""Publishing: the sentence-transformers layout, model cards, and pushes to the tests' Hub server.

Tiny models built here; the real-data round trip (train, push, load in a fresh process) is in
test_publish_e2e.py.
"""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

import numpy as np
import pytest
import torch

from psp_hf import PSPEncoder
from psp_hf.cli import main
from psp_hf.errors import PSPInputError
from psp_hf.hub import PSPPushError, push_encoder, push_folder, render_model_card, write_model_card
from psp_hf.hub.card import LANGUAGES, REPO_ID_PLACEHOLDER, result_rows
from psp_hf.persistence.sentence_transformers_layout import UNKNOWN_PIECE_WEIGHT, write_sentence_transformers_files
from psp_hf.tokenization.pieces import train_tokenizer

CORPUS = [
    "A man is playing a guitar.",
    "Ein Mann spielt Gitarre.",
    "A woman slices an onion.",
    "Eine Frau schneidet eine Zwiebel.",
    "Two dogs run in a field.",
] * 30
# Empty, blank, only unknown characters, unknown characters between known pieces, a literal special piece.
SENTENCES = [
    "A man is playing a guitar.",
    "Zwei Hunde rennen.",
    "",
    "   ",
    "☃☃",
    "a ☃ man ♫ plays",
    "<unk>",
    "x" * 300,
]

# No piece of the test vocabulary covers these characters ("x" is not in CORPUS).
ONLY_UNKNOWN_CHARACTERS = {"☃☃", "x" * 300}


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(CORPUS, vocab_size=60)


def _encoder(tokenizer, seed: int = 3, **config) -> PSPEncoder:
    return PSPEncoder.from_tokenizer(tokenizer, hidden_size=16, seed=seed, **config)


@pytest.fixture(scope="module")
def encoder(tokenizer) -> PSPEncoder:
    return _encoder(tokenizer)


def _saved(encoder: PSPEncoder, folder: Path) -> Path:
    encoder.save_pretrained(folder)
    if not (folder / "modules.json").is_file():
        write_sentence_transformers_files(folder, encoder)
    return folder


def _st_embeddings(folder: Path, sentences: list[str]) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")
    return model.encode(sentences, batch_size=3, convert_to_numpy=True)


def _digest(folder: Path) -> dict[str, str]:
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


# ---------------------------------------------------------------------------------------------- layout
def test_sentence_transformers_equals_psp_unknown_rule_included(encoder, tmp_path):
    folder = _saved(encoder, tmp_path / "model")
    modules = json.loads((folder / "modules.json").read_text())
    # Built-in modules only: nothing that needs trust_remote_code.
    assert all(module["type"].startswith("sentence_transformers.") for module in modules)
    ids, offsets = encoder.tokenize(["☃☃", "a ☃ man"])
    assert encoder.unk_token_id in ids.tolist()  # the test sentences really contain unknown pieces
    expected = encoder.encode(SENTENCES)
    got = _st_embeddings(folder, SENTENCES)
    assert got.shape == expected.shape
    # Documented difference: a sentence of only out-of-vocabulary characters is psp's unknown piece, but
    # sentence-transformers' weighted mean keeps the bare word-boundary piece the tokenizer puts before it.
    keep = [i for i, sentence in enumerate(SENTENCES) if sentence not in ONLY_UNKNOWN_CHARACTERS]
    np.testing.assert_allclose(got[keep], expected[keep], rtol=0, atol=1e-6)
    # Empty and only-unknown sentences are the unknown piece's embedding, not zeros.
    assert encoder.tokenize(["<unk>"])[0].tolist() == [encoder.unk_token_id]
    unk_row = encoder.model.embeddings.weight[encoder.unk_token_id].detach().numpy()
    np.testing.assert_allclose(got[SENTENCES.index("")], unk_row, atol=1e-6)
    np.testing.assert_allclose(got[SENTENCES.index("<unk>")], unk_row, atol=1e-6)


def test_sentence_transformers_with_piece_weights_and_without_unknown_rule(tokenizer, tmp_path):
    weighted = _encoder(tokenizer, seed=4, use_piece_weights=True)
    with torch.no_grad():
        weighted.model.piece_weights.copy_(torch.rand(weighted.model.config.vocab_size) + 0.5)
    plain = _encoder(tokenizer, seed=5, drop_unknown=False)
    # An empty bag's mean is undefined without the rule; only-unknown sentences differ (documented).
    sentences = [s for s in SENTENCES if s.strip() and s not in ONLY_UNKNOWN_CHARACTERS]
    for name, model in (("weighted", weighted), ("plain", plain)):
        folder = _saved(model, tmp_path / name)
        np.testing.assert_allclose(_st_embeddings(folder, sentences), model.encode(sentences), rtol=0, atol=1e-6)


def test_sentence_transformers_max_pooling_matches_known_pieces(tokenizer, tmp_path):
    model = _encoder(tokenizer, seed=6, pooling="max")
    folder = _saved(model, tmp_path / "max")
    assert not (folder / "1_WordWeights").exists()
    known = ["A man is playing a guitar.", "Zwei Hunde rennen."]
    np.testing.assert_allclose(_st_embeddings(folder, known), model.encode(known), rtol=0, atol=1e-6)


def test_layout_truncates_only_past_max_seq_length(encoder, tmp_path):
    folder = tmp_path / "short"
    encoder.save_pretrained(folder)
    write_sentence_transformers_files(folder, encoder, max_seq_length=8)
    short, long = "a man", "a man is playing a guitar and a woman slices an onion"
    # Room for max_seq_length - 1 pieces: the last position holds the appended unknown piece.
    assert len(encoder.tokenize([short])[0]) <= 7 and len(encoder.tokenize([long])[0]) > 8
    got = _st_embeddings(folder, [short, long])
    expected = encoder.encode([short, long])
    np.testing.assert_allclose(got[0], expected[0], atol=1e-6)
    assert np.abs(got[1] - expected[1]).max() > 1e-3  # documented: sentence-transformers cuts long input
    config = json.loads((folder / "0_Transformer" / "sentence_bert_config.json").read_text())
    assert config["max_seq_length"] == 8
    word_weights = json.loads((folder / "1_WordWeights" / "config.json").read_text())
    assert word_weights["word_weights"][encoder.tokenizer.unk_token] == UNKNOWN_PIECE_WEIGHT


# ---------------------------------------------------------------------------------------------- cards
RESULTS = {
    "sts12-16": {"pearson": 61.2, "spearman": 60.4},
    "stsb": {"test": {"pearson": 65.0}},
    "sts17": {"es-en": {"pearson": 40.5}},
    "tatoeba": {"de": {"error_rate": 12.5}},
    "notes": "scores ×100",  # descriptions are not scores and are skipped
}


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_language_card_parses_with_its_eval_results(encoder, language):
    from huggingface_hub import ModelCard

    text = render_model_card(
        encoder, language, eval_results=RESULTS, training_info={"lr": 0.001, "batch_size": 32, "output_dir": "x"},
        repo_id=f"my-org/p-sp-{language}", baseline_results={"sts12-16": {"pearson": 50.1}},
    )  # fmt: skip
    card = ModelCard(text)
    assert "${" not in text and "<org>" not in text
    assert card.data.pipeline_tag == "sentence-similarity"
    codes = set(LANGUAGES) - {"multilingual"} if language == "multilingual" else {language}
    assert codes <= set(card.data.language) and card.data.library_name == "sentence-transformers"
    assert card.data.model_name == f"p-sp-{language}"
    found = {(r.dataset_type, r.dataset_config, r.metric_type): r.metric_value for r in card.data.eval_results}
    # The STS12-16 mean is no Hub dataset: it is in the table but not in the model-index.
    assert found[("mteb/stsbenchmark-sts", None, "cos_sim_pearson")] == 65.0
    assert found[("mteb/sts17-crosslingual-sts", "es-en", "cos_sim_pearson")] == 40.5
    assert found[("mteb/tatoeba-bitext-mining", "deu-eng", "error_rate")] == 12.5
    assert len(found) == 3
    assert "| SemEval STS 2012-2016 (mean of the years) |" in text
    assert "| 61.2 | 50.1 |" in text  # the untrained table's score beside the trained one
    assert "my-org/p-sp-" + language in text and "output_dir" not in text


def test_card_without_results_or_settings_says_so(encoder, tmp_path):
    from huggingface_hub import ModelCard

    path = write_model_card(tmp_path, encoder, language="fr")
    card = ModelCard.load(path)
    assert card.data.eval_results is None and not card.data.to_dict().get("model-index")
    assert "has not been evaluated yet" in card.text and "--eval-results report.json" in card.text
    assert REPO_ID_PLACEHOLDER.format(language="fr") in card.text
    assert f"{encoder.model.config.vocab_size} pieces × 16 dimensions" in card.text


def test_card_rejects_unknown_language(encoder):
    with pytest.raises(PSPInputError, match="no card template"):
        render_model_card(encoder, "xx")


def test_result_rows_flatten_nesting_and_skip_non_numbers():
    rows = result_rows({"stsb": {"dev": {"pearson": 0.5}}, "sick-r": 0.7, "meta": {"n": "12"}, "bad": float("nan")})
    described = {(row.task.dataset_name, row.metric, row.value) for row in rows}
    assert described == {("STS Benchmark (dev)", "pearson", 0.5), ("SICK-R", "score", 0.7)}


# ---------------------------------------------------------------------------------------------- pushes
def test_push_encoder_round_trip(encoder, hub_server, hub_repo_id):
    from huggingface_hub import ModelCard

    url = push_encoder(encoder, hub_repo_id, language="de", eval_results=RESULTS, private=True)
    assert url.endswith(hub_repo_id)
    files = hub_server.repo_files(hub_repo_id)
    for name in (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "modeling_psp.py",
        "modules.json",
        "0_Transformer/model.safetensors",
        "1_WordWeights/config.json",
        "2_Pooling/config.json",
    ):
        assert name in files, name
    assert hub_server.state.repos[("model", hub_repo_id)].private
    card = ModelCard.load(hub_repo_id)
    assert hub_repo_id in card.text and card.data.eval_results
    loaded = PSPEncoder.from_pretrained(hub_repo_id)
    np.testing.assert_array_equal(loaded.encode(SENTENCES), encoder.encode(SENTENCES))


def test_refused_commit_keeps_folder_and_gives_retry_command(encoder, hub_server, hub_repo_id, tmp_path):
    folder = _saved(encoder, tmp_path / "model")
    (folder / "training").mkdir()
    (folder / "training" / "checkpoint.pt").write_bytes(b"optimizer state")
    before = _digest(folder)
    with hub_server.failing(403, path_contains="/commit/") as rule, pytest.raises(PSPPushError) as caught:
        push_folder(folder, hub_repo_id, revision="v1")
    assert rule.hits >= 1
    message = str(caught.value)
    assert "403" in message and f"The local folder {folder.resolve()} is kept as it was" in message
    assert f"psp push {folder.resolve()} {hub_repo_id} --revision v1" in message
    assert _digest(folder) == before
    assert "model.safetensors" not in hub_server.repo_files(hub_repo_id)

    # The retry works once the server accepts again, and the training run's own files stay home.
    url = push_folder(folder, hub_repo_id, revision="v1")
    assert url.endswith(f"{hub_repo_id}/tree/v1")
    files = hub_server.repo_files(hub_repo_id, revision="v1")
    assert "model.safetensors" in files and not any(name.startswith("training/") for name in files)
    assert "model.safetensors" not in hub_server.repo_files(hub_repo_id)  # main untouched


def test_server_error_and_unreachable_server(encoder, hub_server, hub_repo_id, tmp_path, monkeypatch):
    folder = _saved(encoder, tmp_path / "model")
    before = _digest(folder)
    with hub_server.failing(500, path_contains="/api/repos/create"), pytest.raises(PSPPushError, match="500"):
        push_folder(folder, hub_repo_id)
    from huggingface_hub import constants

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.setattr(constants, "ENDPOINT", dead)
    with pytest.raises(PSPPushError, match="kept as it was") as caught:
        push_folder(folder, hub_repo_id, private=True)
    assert caught.value.retry_command.endswith(f"{hub_repo_id} --private")
    assert _digest(folder) == before


def test_push_encoder_failure_keeps_its_folder(encoder, hub_server, hub_repo_id):
    with hub_server.failing(403, methods="POST"), pytest.raises(PSPPushError) as caught:
        push_encoder(encoder, hub_repo_id)
    kept = caught.value.folder
    assert (kept / "model.safetensors").is_file() and (kept / "modules.json").is_file()
    assert str(kept) in caught.value.retry_command
    assert main(["push", str(kept), hub_repo_id, "-q"]) == 0  # the printed command does retry
    assert "model.safetensors" in hub_server.repo_files(hub_repo_id)


def test_push_bad_input(tmp_path):
    with pytest.raises(PSPInputError, match="no such folder"):
        push_folder(tmp_path / "missing", "org/name")
    tmp_path.joinpath("f").write_text("x")
    with pytest.raises(PSPInputError, match="expected <user or org>/<name>"):
        push_folder(tmp_path, "just-a-name")
    with pytest.raises(PSPInputError, match="not valid"):
        push_folder(tmp_path, "org/bad name!")


# ---------------------------------------------------------------------------------------------- psp push
def test_psp_push_adds_layout_and_card_without_writing_the_folder(encoder, hub_server, hub_repo_id, tmp_path, capsys):
    folder = tmp_path / "plain"
    encoder.save_pretrained(folder)  # as save_pretrained wrote it: maybe without modules.json or a card
    for name in ("modules.json", "config_sentence_transformers.json", "README.md"):
        (folder / name).unlink(missing_ok=True)
    before = _digest(folder)
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"stsb": {"test": {"pearson": 0.61}}}))
    assert main(["push", str(folder), hub_repo_id, "--language", "es", "--eval-results", str(results)]) == 0
    out = capsys.readouterr()
    assert out.out.strip().endswith(hub_repo_id)
    assert _digest(folder) == before
    files = hub_server.repo_files(hub_repo_id)
    assert "modules.json" in files and "0_Transformer/tokenizer.json" in files
    readme = files["README.md"].decode()
    assert f'SentenceTransformer("{hub_repo_id}")' in readme and "0.61" in readme


def test_psp_push_smaller_table_pushes_a_copy_and_keeps_the_folder(encoder, hub_server, hub_repo_id, tmp_path):
    folder = _saved(encoder, tmp_path / "model")
    (folder / "README.md").write_text("# my card\n")
    before = _digest(folder)
    assert main(["push", str(folder), hub_repo_id, "--quantize-to", "int8", "--dimensionality", "8", "-q"]) == 0
    assert _digest(folder) == before
    files = hub_server.repo_files(hub_repo_id)
    pushed = tmp_path / "pushed"
    for name, content in files.items():
        (pushed / name).parent.mkdir(parents=True, exist_ok=True)
        (pushed / name).write_bytes(content)
    expected = tmp_path / "expected"
    encoder.save_pretrained(expected, quantize_to="int8", dimensionality=8)
    assert files["model.safetensors"] == (expected / "model.safetensors").read_bytes()
    assert files["README.md"] == b"# my card\n" and "modules.json" in files
    embeddings = PSPEncoder.from_pretrained(pushed).encode(SENTENCES[:2])
    assert embeddings.shape == (2, 8)
    np.testing.assert_array_equal(embeddings, PSPEncoder.from_pretrained(expected).encode(SENTENCES[:2]))


def test_psp_push_smaller_table_bad_options(encoder, hub_repo_id, tmp_path, capsys):
    folder = _saved(encoder, tmp_path / "model")
    assert main(["push", str(folder), hub_repo_id, "--dimensionality", "99"]) == 2
    assert "--dimensionality must be an integer from 1 to the model's dimension 16" in capsys.readouterr().err


def test_psp_push_errors(encoder, hub_server, hub_repo_id, tmp_path, capsys):
    assert main(["push", str(tmp_path / "nope"), hub_repo_id]) == 2
    err = capsys.readouterr().err
    assert "MODEL_DIR" in err and "no such folder" in err
    not_psp = tmp_path / "other"
    not_psp.mkdir()
    (not_psp / "config.json").write_text(json.dumps({"model_type": "bert"}))
    assert main(["push", str(not_psp), hub_repo_id]) == 2
    assert "expected 'psp'" in capsys.readouterr().err
    folder = _saved(encoder, tmp_path / "model")
    with hub_server.failing(403, methods="POST"):
        assert main(["push", str(folder), hub_repo_id, "--private", "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("psp: error: pushing") and f"psp push {folder.resolve()} {hub_repo_id} --private" in err


def test_psp_push_dataset_folder_as_it_is(hub_server, hub_repo_id, tmp_path):
    folder = tmp_path / "prepared"
    (folder / "training").mkdir(parents=True)
    (folder / "training" / "part-0.parquet").write_bytes(b"PAR1 not really")
    (folder / "README.md").write_text("---\nlicense: mit\n---\n# pairs\n")
    assert main(["push", str(folder), hub_repo_id, "--repo-type", "dataset", "-q"]) == 0
    files = hub_server.repo_files(hub_repo_id, repo_type="dataset")
    # No model checks and no model-only exclusions for datasets.
    assert files["training/part-0.parquet"] == b"PAR1 not really" and "README.md" in files
    assert main(["push", str(folder), hub_repo_id, "--repo-type", "dataset", "--language", "de"]) == 2


def test_psp_push_picks_this_folder_from_a_psp_eval_report(encoder, hub_server, hub_repo_id, tmp_path, capsys):
    folder = _saved(encoder, tmp_path / "p-sp-tr")
    report = {
        "format": "psp-eval/1",
        "models": [
            {"model": {"name": "minilm", "model_id": "minilm"}, "card_results": {"stsb": {"test": {"pearson": 82.7}}}},
            {"model": {"name": "p-sp-tr", "model_id": str(folder)},
             "card_results": {"sickr": {"test": {"pearson": 33.3}}}},
        ],
    }  # fmt: skip
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    assert main(["push", str(folder), hub_repo_id, "--language", "tr", "--eval-results", str(path), "-q"]) == 0
    readme = hub_server.repo_files(hub_repo_id)["README.md"].decode()
    assert "33.3" in readme and "82.7" not in readme
    # Neither model is this folder: refuse rather than guess.
    report["models"][1]["model"] = {"name": "other", "model_id": "other"}
    path.write_text(json.dumps(report))
    other = _saved(encoder, tmp_path / "p-sp-ru")
    assert main(["push", str(other), hub_repo_id, "--language", "ru", "--eval-results", str(path)]) == 2
    assert "holds several models" in capsys.readouterr().err
