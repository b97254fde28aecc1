"""Without the data folder: `psp eval` from the Hub copies, `psp data fetch`, and what goes wrong on the way.

The Hub copies live on the tests' Hub server, laid out as the real ones and holding the shared folder's first rows
(tests/hub_mirror.py), so the same sentences score from the Hub and from a folder.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from hub_mirror import DATA, EXPORT, mirror, upload

from psp_hf.cli import main

FAST = ["sts12-16", "stsb", "sickr", "sts17", "tatoeba"]
CLI = "import sys; from psp_hf.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture(scope="module")
def hub_copies(hub_server, tmp_path_factory):
    if not DATA.is_dir():
        pytest.skip(f"real data not found at {DATA} (set PSP_DATA)")
    return mirror(hub_server, tmp_path_factory.mktemp("hub-copies"))


@pytest.fixture(scope="module")
def model(hub_copies, tmp_path_factory):
    from psp_hf import PSPEncoder
    from psp_hf.tokenization.pieces import train_tokenizer

    folder = tmp_path_factory.mktemp("hub-model") / "model"
    tokenizer = train_tokenizer(hub_copies.sentences, vocab_size=300)
    PSPEncoder.from_tokenizer(tokenizer, hidden_size=16, seed=5).save_pretrained(folder)
    return folder


@pytest.fixture
def quick_retries(monkeypatch):
    """The clients' retries on a dropped connection (huggingface_hub's backoff, datasets' 20 stream retries) without
    their waits: the failure still ends the same way, in seconds."""
    import datasets

    monkeypatch.setattr(datasets.config, "STREAMING_READ_MAX_RETRIES", 2)
    monkeypatch.setattr("time.sleep", lambda seconds: None)

    # A library's log handler made in an earlier test keeps that test's stderr (closed since): this one's, as in a
    # fresh process.
    class CurrentStderr:
        def write(self, text: str) -> None:
            sys.stderr.write(text)

        def flush(self) -> None:
            sys.stderr.flush()

    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in logging.Logger.manager.loggerDict)]
    for handler in {h for log in loggers for h in getattr(log, "handlers", [])}:
        if type(handler) is logging.StreamHandler:
            monkeypatch.setattr(handler, "stream", CurrentStderr())


def run(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().err


def test_eval_from_the_hub_scores_as_the_folder_on_the_same_sentences(hub_copies, model, tmp_path, monkeypatch, capsys):
    from psp_hf.evaluation.adapters import load_encoder
    from psp_hf.evaluation.tasks import evaluate_model

    monkeypatch.setenv("PSP_HUB_DATA", str(tmp_path / "hub-data"))
    code, err = run(capsys, "eval", "-m", str(model), "--from-hub", "--tasks", *FAST, "-o", str(tmp_path / "r.json"))
    assert code == 0, err
    hub = json.loads((tmp_path / "r.json").read_text())["models"][0]
    folder = evaluate_model(load_encoder(str(model)), FAST, hub_copies.folder)
    for task in ("stsb", "sickr", "sts17", "tatoeba"):
        assert json.dumps(hub["results"][task], sort_keys=True) == json.dumps(folder["results"][task], sort_keys=True)
    for year in ("sts12", "sts13", "sts14", "sts15", "sts16"):
        pooled, split = hub["results"][year], folder["results"][year]
        # The Hub copy merges the sub-datasets: its one dataset is the folder's pooled correlation.
        assert pooled["all_pearson"] == pytest.approx(split["all_pearson"], abs=1e-9)
        assert pooled["all_spearman"] == pytest.approx(split["all_spearman"], abs=1e-9)
        assert pooled["pearson_mean"] == pytest.approx(split["all_pearson"], abs=1e-9)
        assert len(split["datasets"]) > 1 and list(pooled["datasets"]) == ["all"]
        assert "pooled" in hub["hub"]["protocols"][year]
    # Revisions and licences recorded; the model-index links each row to the revision it was read at.
    revisions = hub["hub"]["datasets"]
    assert set(revisions) >= {"mteb/sts12-sts", "mteb/stsbenchmark-sts", "mteb/tatoeba-bitext-mining"}
    assert hub["hub"]["licenses"]["mteb/sickr-sts"] == "CC BY-NC-SA 3.0"
    entries = [r for entry in hub["model_index"] for r in entry["results"]]
    stsb = next(r for r in entries if r["dataset"]["type"] == "mteb/stsbenchmark-sts")
    assert stsb["dataset"]["revision"] == revisions["mteb/stsbenchmark-sts"] and len(stsb["dataset"]["revision"]) == 40
    markdown = (tmp_path / "r.md").read_text()
    assert "Sets read from Hub copies" in markdown and "Protocol, sts12:" in markdown
    # A second run reads what the first fetched: no download of the sets again.
    code, err = run(capsys, "eval", "-m", str(model), "--from-hub", "--tasks", "stsb")
    assert code == 0 and "fetched" not in err


def test_eval_without_a_data_folder_uses_the_hub_and_says_so(hub_copies, model, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PSP_HUB_DATA", str(tmp_path / "hub-data"))
    monkeypatch.setenv("PSP_DATA", str(tmp_path / "absent"))
    code, err = run(capsys, "eval", "-m", str(model), "--tatoeba-langs", "de", "--sts17-pairs", "en-en")
    assert code == 0, err
    assert "no data folder" in err and "psp data fetch" in err
    assert "left out" in err and "mrpc" in err  # SentEval's tasks have no Hub copy read
    # SentEval tasks named explicitly: one clear error, no traceback.
    code, err = run(capsys, "eval", "-m", str(model), "--from-hub", "--tasks", "mrpc")
    assert code == 2 and "no Hub copy is read for mrpc" in err and "Traceback" not in err


def test_fetch_for_demo_gives_a_folder_eval_and_training_run_on(hub_copies, model, tmp_path, capsys, train_here):
    out = tmp_path / "data"
    code, err = run(capsys, "data", "fetch", "--for", "demo", "-o", str(out), "--wikipedia-sentences", "50")
    assert code == 0, err
    manifest = (out / "MANIFEST.tsv").read_text().splitlines()
    sources = (out / "SOURCES.tsv").read_text().splitlines()
    assert sources[0].split("\t") == ["path", "dataset", "config", "split", "revision", "license", "protocol"]
    wiki = next(line.split("\t") for line in manifest if line.startswith("unlabeled/en/wikipedia-2015/"))
    assert wiki[1] == "50"
    assert any(line.startswith("sts/en/STS12-train/all.tsv\tmteb/sts12-sts\tdefault\ttrain\t") for line in sources)
    capsys.readouterr()
    assert main(["eval", "-m", str(model), "--data-dir", str(out), "--tasks", "sts12-16", "stsb", "sickr"]) == 0
    tables = capsys.readouterr().out
    # Every file read is checked against the fetched MANIFEST.tsv, and matches it.
    assert "8/8 files read match MANIFEST.tsv checksums" in tables
    pairs = out / "paraphrase" / "en" / "flickr30k-captions" / "train.pairs.tsv.gz"
    code, err = train_here(
        "--data", str(pairs), "-o", str(tmp_path / "m"), "--dim", "8", "--vocab-size", "300", "--max-steps", "3",
        "--batch-size", "16", "--megabatch-size", "2", "--threads", "1", "--data-dir", str(out),
    )  # fmt: skip
    assert code == 0, err
    assert (tmp_path / "m" / "config.json").is_file()
    # The distillation corpus of `make demo` builds on the fetched folder, evaluation text kept out.
    code, err = run(capsys, "prepare", "distill-corpus", "-o", str(tmp_path / "corpus"), "--data-dir", str(out),
                    "--no-registry", "--hub-text", "sentence-transformers/wikipedia-en-sentences")  # fmt: skip
    assert code == 0, err
    report = json.loads((tmp_path / "corpus" / "report.json").read_text())
    assert report["sources"]["wikipedia-2015"]["kept"] > 0
    # The same sentences streamed from the Hub again (--hub-text): read, and dropped as duplicates.
    streamed = report["sources"]["sentence-transformers/wikipedia-en-sentences"]
    assert streamed["read"] == 200 and streamed["kept"] < streamed["read"]
    # The fetched evaluation sets are the ones kept out (STS-B and the STS12 training pairs among them).
    assert report["evaluation_sets"]["STS-B"]["distinct_sentences"] > 0
    assert report["evaluation_sets"]["STS12-train"]["distinct_sentences"] > 0


def test_demo_without_the_folder_names_the_one_command(tmp_path, monkeypatch, capsys):
    from psp_hf.experiments.demo import main as demo

    monkeypatch.setenv("PSP_DATA", str(tmp_path / "absent"))
    assert demo() == 2
    err = capsys.readouterr().err
    assert f"psp data fetch --for demo -o {tmp_path / 'absent'}" in err and "Traceback" not in err


def test_a_missing_config_and_a_renamed_column_end_in_one_error(hub_copies, tmp_path, capsys):
    out = tmp_path / "data"
    code, err = run(capsys, "data", "fetch", "--langs", "xx", "-o", str(out))
    assert code == 2 and err.count("\n") == 2  # the start line and the error
    assert "mteb/tatoeba-bitext-mining has no config 'xx-eng'" in err and "deu-eng" in err

    # A column renamed on the Hub: the error names it and what the dataset has now.
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.table({"sentence1": ["a"], "sentence2": ["b"], "similarity": [1.0]}), sink)
    before = upload("mteb/sickr-sts", {"default/test/0000.parquet": sink.getvalue()}, EXPORT, "rename")
    try:
        code, err = run(capsys, "data", "fetch", "--langs", "de", "-o", str(tmp_path / "renamed"))
        assert code == 2 and "Traceback" not in err
        assert "mteb/sickr-sts (config 'default', split 'test', revision" in err
        assert "column(s) score missing (the dataset has sentence1, sentence2, similarity)" in err
    finally:
        mirror_rows = hub_copies.folder / "sts" / "sick" / "test.tsv"
        rows = [line.split("\t") for line in mirror_rows.read_text().splitlines()[1:]]
        table = [{"sentence1": r[1], "sentence2": r[2], "score": float(r[3])} for r in rows]
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(table), sink)
        assert upload("mteb/sickr-sts", {"default/test/0000.parquet": sink.getvalue()}, EXPORT, "back") != before


def test_a_dropped_connection_fails_clearly_and_the_rerun_resumes(
    hub_copies, hub_server, tmp_path, capsys, quick_retries
):
    from psp_hf.data.fetch import fetch, items_for
    from psp_hf.errors import PSPInputError

    out = tmp_path / "data"
    with hub_server.dropping("/cdn/", after=100) as drop:
        code, err = run(capsys, "data", "fetch", "--langs", "de", "-o", str(out))
    assert drop.hits >= 1 and code == 2 and "Traceback" not in err
    assert "reading from the Hub" in err and "failed" in err and "mteb/sts12-sts" in err
    assert "run the same command again to resume" in err
    assert not (out / "MANIFEST.tsv").exists()
    # The connection drops after three sets are in: those stay, listed, and the rerun fetches only the rest.
    done: list[str] = []

    def say(line: str) -> None:
        done.append(line)
        if len(done) == 3:
            dropping.__enter__()

    dropping = hub_server.dropping("/cdn/", after=100)
    try:
        with pytest.raises(PSPInputError, match="reading from the Hub"):
            fetch(out, items_for("eval", ["de"]), say=say)
    finally:
        dropping.__exit__(None, None, None)
    listed = [line.split("\t")[0] for line in (out / "MANIFEST.tsv").read_text().splitlines()[1:]]
    assert len(listed) == 3
    code, err = run(capsys, "data", "fetch", "--langs", "de", "-o", str(out))
    assert code == 0, err
    assert "3 already there" in err
    _check_manifest(out)


def _check_manifest(out) -> None:
    import hashlib

    rows = [line.split("\t") for line in (out / "MANIFEST.tsv").read_text().splitlines()[1:]]
    assert len(rows) == 11  # 5 STS years, STS-B dev and test, SICK, STS17 en-en, Tatoeba deu (two files)
    for path, _records, size, sha in rows:
        data = (out / path).read_bytes()
        assert len(data) == int(size) and hashlib.sha256(data).hexdigest() == sha


@pytest.mark.slow
def test_a_killed_fetch_resumes(hub_copies, tmp_path):
    out = tmp_path / "data"
    command = [sys.executable, "-c", CLI, "data", "fetch", "--langs", "de", "-o", str(out)]
    first = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = first.stderr.readline()
        if not line:
            break
        lines.append(line)
        if sum(text.startswith("fetched ") for text in lines) == 2:
            first.send_signal(signal.SIGKILL)
            break
    first.wait()
    assert first.returncode == -signal.SIGKILL, "".join(lines)
    second = subprocess.run(command, capture_output=True, text=True, env=os.environ.copy())
    assert second.returncode == 0, second.stderr
    assert "2 already there" in second.stderr or "3 already there" in second.stderr
    assert not list(out.rglob(".*.tmp*"))
    _check_manifest(out)


@pytest.mark.slow
def test_languages_trains_on_hub_bitext_end_to_end(hub_copies, tmp_path, capsys):
    from psp_hf.data.sources.hub import split_selection
    from psp_hf.errors import PSPInputError

    with pytest.raises(PSPInputError, match="never training text"):
        split_selection("hub:tatoeba")
    # A machine with the Hub alone: the evaluation sets fetched, the training text streamed.
    data = tmp_path / "data"
    code, err = run(capsys, "data", "fetch", "--for", "languages", "--langs", "de", "-o", str(data))
    assert code == 0, err
    out = tmp_path / "out"
    command = [
        sys.executable, "-c", CLI, "languages", "--langs", "de", "-o", str(out), "--data-dir", str(data),
        "--sources", "hub:opensubtitles", "--margin-only", "--dev", "bitext", "--dim", "8", "--vocab-size", "150",
        "--no-registry", "--tasks", "tatoeba", "--threads", "1", "--minutes", "1",
        "--train-args", "--max-steps 3 --batch-size 16",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PSP_DATA": str(data)})
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "de" / "data" / "report" / "report.json").read_text())
    source = report["sources"]["parallel-sentences-opensubtitles"]
    assert source["dataset"] == "sentence-transformers/parallel-sentences-opensubtitles"
    assert len(source["revision"]) == 40 and "OpenSubtitles" in source["license"]
    assert report["pairs_out"] > 300
    summary = json.loads((out / "summary.json").read_text())
    assert summary[0]["language"] == "de" and np.isfinite(summary[0]["tatoeba_error"])
    card = (out / "de" / "model" / "README.md").read_text()
    assert "parallel-sentences-opensubtitles" in card


def test_the_readme_commands_without_a_data_folder(hub_copies, tmp_path, monkeypatch, capsys, train_here):
    # README, "Without the data folder": train on caption pairs streamed from the Hub, then score from the Hub.
    monkeypatch.setenv("PSP_DATA", str(tmp_path / "absent"))
    monkeypatch.setenv("PSP_HUB_DATA", str(tmp_path / "hub-data"))
    model = tmp_path / "p-sp-flickr"
    code, err = train_here(
        "--data", "sentence-transformers/flickr30k-captions", "--data-config", "pair", "--columns", "caption1,caption2",
        "--dev", "none", "-o", str(model), "--dim", "8", "--vocab-size", "300", "--max-steps", "3",
        "--batch-size", "16", "--megabatch-size", "2", "--threads", "1",
    )  # fmt: skip
    assert code == 0, err
    capsys.readouterr()
    assert main(["eval", "-m", str(model), "--tasks", "fast", "--tatoeba-langs", "de", "--sts17-pairs", "en-en"]) == 0
    captured = capsys.readouterr()
    assert "reading the evaluation sets from their Hub copies" in captured.err
    assert "Sets read from Hub copies: mteb/sickr-sts@" in captured.out


def test_prepare_bitext_reads_hub_bitext(hub_copies, tmp_path, capsys):
    out = tmp_path / "de"
    code, err = run(capsys, "prepare", "bitext", "hub:opensubtitles", "--lang", "de", "-o", str(out))
    assert code == 0, err
    report = json.loads((out / "report" / "report.json").read_text())
    assert report["pairs_out"] > 300 and "parallel-sentences-opensubtitles" in report["inputs"][0]["path"]
    code, err = run(capsys, "prepare", "bitext", "hub:tatoeba", "--lang", "de", "-o", str(tmp_path / "t"))
    assert code == 2 and "never training text" in err


@pytest.mark.slow
def test_make_demo_runs_unchanged_on_a_fetched_folder(hub_copies, tmp_path, capsys):
    out = tmp_path / "data"
    code, err = run(capsys, "data", "fetch", "--for", "demo", "-o", str(out), "--wikipedia-sentences", "200")
    assert code == 0, err
    demo = tmp_path / "demo"
    env = {**os.environ, "PSP_DATA": str(out), "PSP_DEMO_OUT": str(demo), "PSP_DEMO_SENTENCES": "300"}
    result = subprocess.run([sys.executable, "-m", "psp_hf.experiments.demo"], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((demo / "results.json").read_text())
    assert [m["model"]["name"] for m in report["models"]] == [
        "p-sp-en-untrained",
        "p-sp-en-flickr",
        "p-sp-en-distilled",
    ]
    assert "mteb/sts12-sts" in report["models"][2]["hub"]["datasets"]
    assert "revision:" in (demo / "results.model-index.yaml").read_text()
    assert len((demo / "scored.tsv").read_text().splitlines()) > 20
