"""Issue 35, class 6 (messages): what a mistake gets told. `-o ''` names -o, `encode(None)` and `encode(set)` are
clear TypeErrors, a bad JSON Lines row names FILE:LINE, a missing input or model path is called missing (not an
invalid Hub id, not a missing --column), and `-q` quiets transformers' own progress bars too."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from fault_helpers import build_model, build_tokenizer, one_error_line, run_cli, small_run


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_model(tmp_path_factory.mktemp("m") / "model")


@pytest.mark.parametrize("command", ["embed", "score"])
def test_an_empty_output_path_names_the_flag(tmp_path, model, command):
    source = tmp_path / "in.txt"
    source.write_text("a dog\tthe dog\n")
    code, _, err = run_cli(command, "-m", str(model), str(source), "-o", "")
    assert code == 2 and "-o: empty path" in one_error_line(err)


@pytest.mark.parametrize("value,kind", [(None, "NoneType"), ({"a dog", "a cat"}, "set"), (3, "int")])
def test_encode_says_what_it_takes(model, value, kind):
    from psp_hf import load

    with pytest.raises(TypeError, match=f"ordered sequence of strings.*got {kind}"):
        load(model).encode(value)


def test_encode_still_takes_any_ordered_iterable(model):
    from psp_hf import load

    encoder = load(model)
    assert encoder.encode(iter(["a dog", "a cat"])).shape == (2, 16)
    assert encoder.encode(("a dog",)).shape == (1, 16)


@pytest.mark.parametrize("bad,message", [(b'{"sentence1": "a cat", "sentence2": \n', "not valid JSON"),
                                         (b"[1, 2]\n", "expected a JSON object, got list")])  # fmt: skip
def test_a_bad_jsonl_row_names_file_and_line(tmp_path, train_here, bad, message):
    good = b'{"sentence1": "a dog runs", "sentence2": "the dog runs"}\n'
    data = tmp_path / "pairs.jsonl"
    data.write_bytes(good * 30 + bad + good * 5)
    tokenizer = tmp_path / "tok"
    build_tokenizer(tokenizer)
    code, err = train_here(*small_run(data, tokenizer), "-o", str(tmp_path / "run"), "--max-steps", "50")
    assert code == 2
    assert f"{data}:31: {message}" in one_error_line(err)


@pytest.mark.parametrize("name", ["missing.tsv", "nope", "a/b/c"])
def test_embed_dataset_says_a_missing_input_is_missing(tmp_path, model, name, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("embed-dataset", "-m", str(model), "-o", str(tmp_path / "out"), name)
    assert code == 2
    line = one_error_line(err)
    assert f"{name}: no such file or folder" in line


@pytest.mark.parametrize("name", ["models/x/y", "my-model.safetensors", "nope/x/y/z"])
def test_a_missing_model_path_is_not_called_an_invalid_hub_id(tmp_path, name, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("a dog\n")
    code, _, err = run_cli("embed", "-m", name, "in.txt", "-o", "out.npy")
    assert code == 2
    line = one_error_line(err)
    assert f"{name}: no such model folder" in line and "HFValidationError" not in line


def test_quiet_silences_transformers_progress_bars(tmp_path, model, hub_repo_id):
    from transformers.utils import logging as transformers_logging

    with warnings.catch_warnings():  # huggingface_hub's own bars stay off (HF_HUB_DISABLE_PROGRESS_BARS), and say so
        warnings.simplefilter("ignore", UserWarning)
        transformers_logging.enable_progress_bar()  # as in a shell without the test suite's settings
    try:
        code, _, err = run_cli("push", str(model), hub_repo_id, "--dimensionality", "8", "-q")
    finally:
        transformers_logging.disable_progress_bar()
    assert code == 0, err
    assert "Writing model shards" not in err and "it/s" not in err


def test_sigterm_before_the_first_checkpoint_does_not_advise_resume(tmp_path, capsys):
    from psp_hf.training.loop.checkpoint import CheckpointStore
    from psp_hf.training.loop.stopping import TrainingStopped, stop_on_sigterm

    store = CheckpointStore(tmp_path / "training")
    with pytest.raises(TrainingStopped):
        stop_on_sigterm(15, None, checkpoints=store)
    err = capsys.readouterr().err
    assert "no checkpoint was written yet" in err and "continue with --resume" not in err
    store.training_dir.mkdir()
    store.pointer.write_text('{"format": 2, "folder": "checkpoint-1"}')
    with pytest.raises(TrainingStopped):
        stop_on_sigterm(15, None, checkpoints=store)
    assert "continue with --resume" in capsys.readouterr().err


def test_a_model2vec_folder_without_its_tokenizer_says_so(tmp_path, model):
    from psp_hf import load
    from psp_hf.persistence.static_models import save_model2vec

    folder = save_model2vec(load(model), tmp_path / "m2v")
    (folder / "tokenizer.json").unlink()
    code, _, err = run_cli("info", str(folder))
    assert code == 2 and "no tokenizer.json" in one_error_line(err)


@pytest.mark.parametrize("flag", ["--lm", "--score-model", "--model"])
def test_backtranslate_refuses_a_missing_model_before_translating(tmp_path, model, flag):
    bitext = tmp_path / "bt.tsv"
    bitext.write_text("ein hund\ta dog\n")
    models = {"--model": str(model), "--lm": None, "--score-model": None}
    models[flag] = str(tmp_path / "nope")
    argv = ["backtranslate", str(bitext), "--src-lang", "de", "-o", str(tmp_path / "out")]
    argv += [item for name, value in models.items() if value for item in (name, value)]
    code, _, err = run_cli(*argv)
    assert code == 2 and f"{flag} {tmp_path / 'nope'}: no such model folder" in one_error_line(err)
    assert not (tmp_path / "out").exists()


def test_export_to_a_file_says_it_writes_a_folder(tmp_path, model):
    target = tmp_path / "model.txt"
    target.write_text("x")
    code, _, err = run_cli("export", str(model), "-o", str(target))
    assert code == 2 and "is a file; psp export writes a model folder" in one_error_line(err)


def test_a_refused_smaller_push_retries_with_a_folder_that_exists(model, hub_server, hub_repo_id):
    with hub_server.failing(403, methods="POST"):
        code, _, err = run_cli("push", str(model), hub_repo_id, "--quantize-to", "int8", "-q")
    assert code == 1 and "Retry with:" in err
    command = err.split("Retry with:", 1)[1].split()
    assert command[:2] == ["psp", "push"]
    assert Path(command[2]).resolve() == model.resolve()  # MODEL_DIR, not the temporary smaller copy
    assert "--quantize-to" in command and "int8" in command
    assert run_cli(*command[1:])[0] == 0  # the printed command does retry
