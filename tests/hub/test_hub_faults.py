"""`psp push` and cards under bad input: a damaged model folder is one error line and nothing is uploaded."""

from __future__ import annotations

import shutil

import pytest

from psp_hf.cli import main

CORPUS = ["A man is playing a guitar.", "Two dogs run across the green field.", "A woman slices an onion."] * 20


@pytest.fixture(scope="module")
def psp_folder(tmp_path_factory):
    from psp_hf import PSPEncoder
    from psp_hf.tokenization.pieces import train_tokenizer

    folder = tmp_path_factory.mktemp("psp") / "tiny-psp"
    PSPEncoder.from_tokenizer(train_tokenizer(CORPUS, vocab_size=40), hidden_size=8, seed=1).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("damage", ["truncated-weights", "garbled-tokenizer"])
def test_push_of_a_damaged_folder_is_one_error_line(psp_folder, tmp_path, capsys, monkeypatch, damage):
    from psp_hf.hub import push

    def no_upload(*args, **kwargs):
        raise AssertionError("a damaged folder must not reach the upload")

    monkeypatch.setattr(push, "push_folder", no_upload)
    broken = tmp_path / "broken"
    shutil.copytree(psp_folder, broken)
    if damage == "truncated-weights":
        weights = broken / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:40])
    else:
        (broken / "tokenizer.json").write_text("{not json", encoding="utf-8")
    before = {path.name: path.read_bytes() for path in broken.iterdir() if path.is_file()}
    # --language makes push render a card, which needs the model loaded.
    assert main(["push", str(broken), "me/p-sp-en", "--language", "en"]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and "Traceback" not in err
    # The loader's own message names the damaged file inside the folder.
    damaged = "model.safetensors" if damage == "truncated-weights" else "tokenizer.json"
    assert lines[0].startswith(f"psp: error: {broken / damaged}: "), lines[0]
    assert {path.name: path.read_bytes() for path in broken.iterdir() if path.is_file()} == before
