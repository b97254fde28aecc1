"""Round trip through the tests' local Hub server: prepare -> push_to_hub -> load_dataset(repo, streaming=True)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("PSP_DATA", REPO_ROOT.parent / "shared" / "data"))


def _flickr_val() -> Path:
    path = DATA / "paraphrase" / "en" / "flickr30k-captions" / "val.pairs.tsv.gz"
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing in CI")
        pytest.skip(f"real data not found at {DATA} (set PSP_DATA)")
    return path


def test_prepare_push_and_stream_back_from_the_hub(hub_server, hub_repo_id, tmp_path):
    from datasets import load_dataset

    from psp_hf.data.prepare import load_prepared_tokenizer, prepare_paraphrases, tokenizer_folder

    report = prepare_paraphrases(
        [_flickr_val()], push_to_hub=hub_repo_id, score_filter=False, limit=3000, vocab_size=800, num_shards=2
    )
    assert report["url"].endswith(hub_repo_id) and report["num_shards"] == 2
    files = set(hub_server.repo_files(hub_repo_id, repo_type="dataset"))
    assert {"README.md", "report/report.json", "report/overlap_histogram.png", "tokenizer/tokenizer.json"} <= files
    assert {f"data/train-0000{i}-of-00002.parquet" for i in range(2)} <= files

    rows = list(load_dataset(hub_repo_id, split="train", streaming=True))
    assert len(rows) == report["pairs_out"] > 2500
    assert set(rows[0]) == {"sentence1", "sentence2", "overlap"}
    # The uploaded card names the repo in its example.
    from huggingface_hub import hf_hub_download

    card = Path(hf_hub_download(hub_repo_id, "README.md", repo_type="dataset")).read_text()
    assert f'load_dataset("{hub_repo_id}"' in card

    assert tokenizer_folder(hub_repo_id) is not None
    tokenizer = load_prepared_tokenizer(hub_repo_id)
    assert tokenizer.unk_token_id not in tokenizer("a dog runs in the park.").input_ids


def test_cli_push_without_out_leaves_nothing_behind(hub_server, hub_repo_id, tmp_path, monkeypatch):
    from psp_hf.cli import main

    pairs = tmp_path / "de-en.tsv"
    pairs.write_text("de\ten\n" + "".join(f"satz nummer {i} hier\tsentence number {i} here\n" for i in range(50)))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    code = main(["prepare", "bitext", "--lang", "de", str(pairs), "--push-to-hub", hub_repo_id, "-q",
                 "--vocab-size", "40"])  # fmt: skip
    assert code == 0
    assert list((tmp_path / "tmp").iterdir()) == []
    from datasets import load_dataset

    rows = list(load_dataset(hub_repo_id, split="train", streaming=True))
    assert sorted(row["en"] for row in rows) == sorted(f"sentence number {i} here" for i in range(50))
