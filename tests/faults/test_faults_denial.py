"""Denial of service: inputs that used to take gigabytes or hang forever now take bounded memory or stop with one
`psp: error:` line."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading

import pytest
from fault_helpers import english_pairs, one_error_line, run_cli, small_run

from psp_hf.training.loop.checkpoint import CheckpointStore

# Far longer than either command needs here (a few seconds), far shorter than the hangs they replace.
PATIENCE_S = 90


def _in_thread(*argv: str) -> dict:
    """`psp ARGV` on a daemon thread, waited for PATIENCE_S at most: {"out": (code, stdout, stderr)} when it ended."""
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(out=run_cli(*argv)), daemon=True)
    thread.start()
    thread.join(PATIENCE_S)
    return result


# ------------------------------------------------------------------------------- psp embed memory
def test_embed_batches_of_long_lines_are_bounded_in_characters(tmp_path):
    from psp_hf.cli.rows import Skipped, sentence_batches

    line = "a dog runs " * 90_000  # 990,000 characters, under the 1 MiB line limit
    (tmp_path / "long.txt").write_text((line + "\n") * 24)
    batches = list(sentence_batches(str(tmp_path / "long.txt"), 4096, False, Skipped()))
    assert [text for batch in batches for text in batch] == [line] * 24  # every line, in order
    # psp embed tokenizes a batch at once, at tens of bytes a character: 24 MB of text in one batch took gigabytes.
    assert max(sum(map(len, batch)) for batch in batches) <= 9 * 2**20


@pytest.mark.parametrize("command", ["embed", "score"])
def test_embed_and_score_encode_long_lines_a_few_at_a_time(tmp_path, model, monkeypatch, command):
    from psp_hf.encoder import PSPEncoder

    encode = PSPEncoder.encode
    seen: list[int] = []

    def spy(self, sentences, *args, **kwargs):
        seen.append(sum(map(len, sentences)))
        return encode(self, sentences, *args, **kwargs)

    monkeypatch.setattr(PSPEncoder, "encode", spy)
    half = "a dog runs " * 45_000  # 495,000 characters: a pair of them is one line under the 1 MiB limit
    line = f"{half}\t{half}" if command == "score" else half + half
    (tmp_path / "long.txt").write_text((line + "\n") * 24)
    code, _, err = run_cli(command, "-m", str(model), str(tmp_path / "long.txt"), "-o", str(tmp_path / "out"), "-q")
    assert code == 0, err
    assert sum(seen) == 24 * 990_000  # every line encoded once
    assert max(seen) <= 9 * 2**20  # 24 MB in one call took gigabytes


# ------------------------------------------------------------------------------- hangs
def test_resume_with_a_fifo_as_train_state_json_stops_with_an_error(tmp_path, tokenizer, train_here):
    pairs = english_pairs(tmp_path / "pairs.tsv", 40)
    common = small_run(pairs, tokenizer)
    out = tmp_path / "run"
    assert train_here(*common, "-o", str(out), "--max-steps", "2")[0] == 0
    state = CheckpointStore(out / "training").folder() / "train_state.json"
    state.unlink()
    os.mkfifo(state)
    try:
        result = _in_thread("train", *common, "-o", str(out), "--resume", "--max-steps", "3")
    finally:
        with contextlib.suppress(OSError):  # release a reader blocked on the FIFO, so no thread is left hanging
            os.close(os.open(state, os.O_WRONLY | os.O_NONBLOCK))
    assert "out" in result, f"psp train --resume still reading the FIFO after {PATIENCE_S} s"
    code, _, err = result["out"]
    assert code == 2 and "train_state.json" in one_error_line(err)


def test_an_embed_dataset_index_claiming_a_hundred_million_shards_is_refused_at_once(tmp_path, model):
    (tmp_path / "in.txt").write_text("a dog runs\nthe cat sits\na man walks\n")
    folder = tmp_path / "emb"
    code, _, err = run_cli("embed-dataset", str(tmp_path / "in.txt"), "-m", str(model), "-o", str(folder), "-q")
    assert code == 0, err
    index = json.loads((folder / "index.json").read_text())
    (folder / "index.json").write_text(json.dumps({**index, "shards": 100_000_000}))
    result = _in_thread("mine", str(folder), "-o", str(tmp_path / "pairs.tsv"), "-q")
    assert "out" in result, f"psp mine still looking for shards after {PATIENCE_S} s"
    code, _, err = result["out"]
    assert code == 2
    line = one_error_line(err)
    assert "index.json" in line and "100000000" in line
    shutil.rmtree(folder)
