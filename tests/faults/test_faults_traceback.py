"""Issue 35, class 3 (no traceback): the default `psp train` path (vocabulary trained from the data) on bad data,
unusable --seed / --tokenizer / --device, damaged config.json and model2vec folders, and `psp prepare label` on bad
UTF-8. Each ends in one `psp: error:` line naming the file and line, or the argument."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from fault_helpers import build_model, english_pairs, one_error_line, run_cli, small_run


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_model(tmp_path_factory.mktemp("m") / "model")


def _data(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A damaged training file (or folder) and what the error must say."""
    good = english_pairs(tmp_path / "good.tsv", 40).read_bytes()
    if kind == "bad-utf8":
        path = tmp_path / "data.tsv"
        path.write_bytes(good.replace(b"\na ", b"\na \xff\xfe ", 1))
        return path, f"{path}:2: not valid UTF-8"
    if kind == "short-row":
        path = tmp_path / "data.tsv"
        path.write_bytes(good + b"only one column\n")
        return path, f"{path}:42: expected 2 tab-separated fields"
    if kind == "long-row":
        path = tmp_path / "data.tsv"
        path.write_bytes(good + b"one\ttwo\tthree\n")
        return path, f"{path}:42: expected 2 tab-separated fields"
    if kind == "truncated-gz":
        path = tmp_path / "data.tsv.gz"
        path.write_bytes(gzip.compress(good * 40)[:-300])
        return path, "truncated or corrupt after line"
    if kind == "header-only":
        path = tmp_path / "data.tsv"
        path.write_bytes(b"sentence1\tsentence2\n")
        return path, "no sentences to train the tokenizer on"
    if kind == "empty-parquet":  # a prepared folder whose table has no rows
        import pyarrow as pa
        import pyarrow.parquet as pq

        folder = tmp_path / "prepared"
        folder.mkdir()
        pq.write_table(pa.table({"sentence1": pa.array([], pa.string()), "sentence2": pa.array([], pa.string())}),
                       folder / "train.parquet")  # fmt: skip
        return folder, "a table with no rows"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["bad-utf8", "short-row", "long-row", "truncated-gz", "header-only", "empty-parquet"])
def test_training_the_vocabulary_on_bad_data_is_one_error_line(tmp_path, train_here, kind):
    data, message = _data(tmp_path, kind)
    code, err = train_here(*small_run(data, None), "-o", str(tmp_path / "run"), "--max-steps", "2")
    assert code == 2
    line = one_error_line(err)
    assert message in line
    assert "INTERNAL" not in line and "RuntimeError" not in line  # not the sentencepiece trainer's wrapper


def test_training_the_vocabulary_on_good_data_still_works(tmp_path, train_here):
    data = english_pairs(tmp_path / "good.tsv", 40)
    code, err = train_here(*small_run(data, None), "-o", str(tmp_path / "run"), "--max-steps", "2")
    assert code == 0, err
    assert (tmp_path / "run" / "model.safetensors").is_file()


@pytest.mark.parametrize("seed", ["-1", str(2**32)])
def test_an_out_of_range_seed_is_one_error_line(tmp_path, train_here, seed):
    data = english_pairs(tmp_path / "good.tsv", 20)
    code, err = train_here(*small_run(data, None), "-o", str(tmp_path / "run"), "--seed", seed)
    assert code == 2 and "--seed must be in [0, 2**32)" in one_error_line(err)


@pytest.mark.parametrize("damage", ["not-json", "json-array", "truncated"])
def test_a_corrupt_tokenizer_given_as_tokenizer_is_one_error_line(tmp_path, model, train_here, damage):
    folder = tmp_path / "tok"
    folder.mkdir()
    text = (model / "tokenizer.json").read_text()
    (folder / "tokenizer.json").write_text(
        {"not-json": "{oops", "json-array": "[1, 2]", "truncated": text[:500]}[damage]
    )
    data = english_pairs(tmp_path / "good.tsv", 20)
    code, err = train_here(*small_run(data, folder), "-o", str(tmp_path / "run"))
    assert code == 2 and str(folder / "tokenizer.json") in one_error_line(err)


def test_a_config_json_holding_an_array_is_one_error_line(tmp_path, model):
    folder = tmp_path / "m"
    shutil.copytree(model, folder)
    (folder / "config.json").write_text("[1, 2, 3]")
    code, _, err = run_cli("info", str(folder))
    assert code == 2 and "config.json: expected a JSON object" in one_error_line(err)


def _model2vec(model: Path, folder: Path, change) -> Path:
    from safetensors.numpy import load_file, save_file

    from psp_hf import load
    from psp_hf.persistence.static_models import save_model2vec

    save_model2vec(load(model), folder)
    tensors = load_file(folder / "model.safetensors")
    change(tensors)
    save_file(tensors, folder / "model.safetensors")
    return folder


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda t: t.update(mapping=np.arange(len(t["embeddings"]), dtype=np.int64) + 5), "points outside"),
        (lambda t: t.update(mapping=-np.ones(len(t["embeddings"]), dtype=np.int64)), "points outside"),
        (lambda t: t.update(embeddings=t["embeddings"].reshape(-1)), "must be a 2-D table"),
        (lambda t: t.update(weights=np.ones(3, dtype=np.float32)), "'weights' has shape"),
    ],
    ids=["mapping-past-the-end", "negative-mapping", "1-D-table", "short-weights"],
)
def test_damaged_model2vec_folders_are_one_error_line(tmp_path, model, change, message):
    folder = _model2vec(model, tmp_path / "m2v", change)
    code, _, err = run_cli("info", str(folder))
    assert code == 2 and message in one_error_line(err)


def test_prepare_label_names_the_line_of_bad_utf8(tmp_path):
    corpus = tmp_path / "pool.txt"
    corpus.write_bytes(b"a good sentence\nanother one\nbad \xff byte\n")
    code, _, err = run_cli("prepare", "label", "--corpus", str(corpus), "-o", str(tmp_path / "cache"))
    assert code == 2 and f"{corpus}:3: not valid UTF-8" in one_error_line(err)


@pytest.mark.parametrize("device", ["bogus", "cuda:99"])
def test_prepare_label_refuses_an_unusable_device_first(tmp_path, device, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same answer on a machine with a GPU
    corpus = tmp_path / "pool.txt"
    corpus.write_text("a sentence\n")
    argv = ("prepare", "label", "--corpus", str(corpus), "-o", str(tmp_path / "cache"), "--device", device)
    code, _, err = run_cli(*argv)
    assert code == 2 and "--device" in one_error_line(err)


@pytest.mark.parametrize("device", ["bogus", "cuda"])
def test_backtranslate_refuses_an_unusable_device_before_its_run_file(tmp_path, device, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    bitext = tmp_path / "bt.tsv"
    bitext.write_text("ein hund\ta dog\n")
    out = tmp_path / "out"
    argv = ("backtranslate", str(bitext), "--src-lang", "de", "--model", str(tmp_path / "nomodel"), "-o", str(out))
    code, _, err = run_cli(*argv, "--device", device)
    assert code == 2 and f"--device {device!r}" in one_error_line(err) or f"--device {device}:" in err
    assert not out.exists()  # no run.json that would refuse the corrected command


# ------------------------------------------------------------------------------------------ backtranslate's run.json
def _bt_settings(model: str = "m"):
    from psp_hf.backtranslation.pipeline import TranslateSettings

    return TranslateSettings(bitext="/data/bt.tsv", src_lang="de", model=model)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"complete": false}'])
def test_a_corrupt_backtranslate_run_file_is_one_error_when_chunks_exist(tmp_path, content):
    from psp_hf.backtranslation.pipeline import _check_run
    from psp_hf.errors import PSPInputError

    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "part-000000.tsv").write_text("done\n")
    (tmp_path / "run.json").write_text(content)
    with pytest.raises(PSPInputError, match=r"run\.json: cannot be read .* pass --overwrite"):
        _check_run(tmp_path, _bt_settings(), overwrite=False)


def test_a_run_stopped_before_its_first_chunk_does_not_refuse_the_corrected_command(tmp_path):
    from psp_hf.backtranslation.pipeline import _check_run
    from psp_hf.errors import PSPInputError

    assert _check_run(tmp_path, _bt_settings("wrong-model"), overwrite=False) is False  # then it failed
    assert _check_run(tmp_path, _bt_settings("right-model"), overwrite=False) is False  # corrected: accepted
    assert json.loads((tmp_path / "run.json").read_text())["settings"]["model"] == "right-model"
    (tmp_path / "run.json").write_text("{garbage")  # and a damaged file with nothing done is simply replaced
    assert _check_run(tmp_path, _bt_settings("right-model"), overwrite=False) is False
    assert json.loads((tmp_path / "run.json").read_text())["settings"]["model"] == "right-model"
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "part-000000.tsv").write_text("done\n")  # once a chunk exists, settings must match
    with pytest.raises(PSPInputError, match="holds a run with other settings"):
        _check_run(tmp_path, _bt_settings("third-model"), overwrite=False)


# ------------------------------------------------------------------------------------------ backtranslate's lengths
# The tiny translation models of tests/toy_translation.py, imported lazily below.


@pytest.fixture(scope="module")
def translation_models(tmp_path_factory) -> Path:
    from toy_translation import build_models

    return build_models(tmp_path_factory.mktemp("bt-models"))  # positions: 64


def _backtranslate(bitext: Path, models: Path, out: Path, *extra: str) -> tuple[int, str]:
    argv = ["backtranslate", str(bitext), "--src-lang", "cs", "--model", str(models / "mt"), "-o", str(out)]
    code, _, err = run_cli(*argv, "--batch-size", "2", "-q", *extra)
    return code, err


def test_backtranslate_refuses_more_new_tokens_than_the_model_has_positions(tmp_path, translation_models):
    from toy_translation import make_bitext

    bitext = tmp_path / "cs-en.tsv"
    make_bitext(bitext, 4)
    code, err = _backtranslate(bitext, translation_models, tmp_path / "out", "--max-new-tokens", "500")
    assert code == 2 and "--max-new-tokens 500" in one_error_line(err) and "at most 64" in err


def test_backtranslate_cuts_sources_longer_than_the_model_reads(tmp_path, translation_models):
    from toy_translation import SOURCE_WORDS

    bitext = tmp_path / "cs-en.tsv"
    long_source = " ".join(SOURCE_WORDS * 40)  # far past the model's 64 positions
    bitext.write_text(f"{long_source}\tthe long one\n{SOURCE_WORDS[0]}\ta short one\n")
    code, err = _backtranslate(bitext, translation_models, tmp_path / "out", "--max-new-tokens", "8")
    assert code == 0, err
    assert len((tmp_path / "out" / "translations.tsv").read_text().splitlines()) >= 2


# ------------------------------------------------------------------------------------------ full disks in training
def test_a_full_disk_at_the_first_checkpoint_is_one_error_line(tmp_path, train_here, monkeypatch):
    import errno

    import torch

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", no_space)  # the optimizer and RNG files of the first checkpoint
    data = english_pairs(tmp_path / "good.tsv", 40)
    out = tmp_path / "run"
    code, err = train_here(*small_run(data, None), "-o", str(out), "--max-steps", "2")
    assert code == 2
    line = one_error_line(err)
    assert "cannot write checkpoint" in line and "no earlier checkpoint exists" in line
    assert not list((out / "training").glob(".checkpoint-tmp-*"))


def test_a_full_disk_at_the_final_export_is_one_error_line(tmp_path, train_here, monkeypatch):
    import errno

    import safetensors.torch

    real_save_file = safetensors.torch.save_file

    def save_file(tensors, filename, *args, **kwargs):
        if ".export-" in str(filename):  # the model folder written at the end, not the checkpoints
            raise OSError(errno.ENOSPC, "No space left on device", str(filename))
        return real_save_file(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(safetensors.torch, "save_file", save_file)
    data = english_pairs(tmp_path / "good.tsv", 40)
    out = tmp_path / "run"
    code, err = train_here(*small_run(data, None), "-o", str(out), "--max-steps", "2")
    assert code == 2 and "No space left on device" in one_error_line(err)
    assert not list(out.glob(".export-*")) and not (out / "model.safetensors").exists()
