"""`psp serve` as a command: start-up errors as one `psp: error:` line, SIGTERM ends a server cleanly (exit 0), and
the search index from a text file or a `psp embed-dataset` folder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx
import numpy as np
import pytest

from psp_hf import PSPEncoder
from psp_hf.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from serve_server import CORPUS, ServerThread, tiny_tokenizer  # noqa: E402 - tests/ holds the helper; it is not a package

from psp_hf.cli.serve import parse_model_spec  # noqa: E402
from psp_hf.serve.app import ServeConfig, create_app  # noqa: E402
from psp_hf.serve.index import load_index  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("serve-cli")
    tokenizer = tiny_tokenizer(folder)
    PSPEncoder.from_tokenizer(tokenizer, hidden_size=16, seed=3).save_pretrained(folder / "model")
    return folder / "model"


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("psp: error: "), err
    return err[0]


def test_start_up_errors_are_one_line(model_dir, tmp_path, capsys):
    assert main(["serve", str(tmp_path / "no-such-model"), "--port", "0"]) == 2
    assert "no-such-model" in _one_error_line(capsys)
    assert main(["serve", "someone/no-such-repo", "--port", "0"]) == 2  # the test Hub server answers 404
    assert "someone/no-such-repo" in _one_error_line(capsys)
    assert main(["serve", str(model_dir), "--port", "70000"]) == 2
    assert "--port" in _one_error_line(capsys)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["serve", str(model_dir), "--port", str(port)]) == 2
        assert f"127.0.0.1:{port}" in _one_error_line(capsys)
    assert main(["serve", str(model_dir), "--port", "0", "--max-inputs", "0"]) == 2
    assert "--max-inputs" in _one_error_line(capsys)
    assert main(["serve", str(model_dir), "--port", "0", "--index", str(tmp_path / "none.txt")]) == 2
    assert "none.txt" in _one_error_line(capsys)


def test_missing_extra_is_one_line(model_dir, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn now raises ImportError
    assert main(["serve", str(model_dir), "--port", "0"]) == 2
    assert "pip install 'psp-hf[serve]'" in _one_error_line(capsys)


def test_model_names():
    assert parse_model_spec("en=/models/p-sp-en") == ("en", "/models/p-sp-en")
    assert parse_model_spec("/models/p-sp-en/") == ("p-sp-en", "/models/p-sp-en/")
    assert parse_model_spec("user/p-sp-de") == ("p-sp-de", "user/p-sp-de")


def test_defaults_bind_loopback_without_cors_or_key(monkeypatch):
    import argparse

    from psp_hf.cli.serve import add_arguments

    monkeypatch.delenv("PSP_API_KEY", raising=False)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["model"])
    assert (args.host, args.port, args.cors_origin, args.api_key) == ("127.0.0.1", 8080, [], None)


def test_sigterm_stops_a_server_cleanly(model_dir, tmp_path):
    command = [sys.executable, "-m", "psp_hf.cli", "serve", f"mine={model_dir}", "--port", "0", "--threads", "1"]
    log = open(tmp_path / "stderr.txt", "w+")  # noqa: SIM115 - read while the server runs
    process = subprocess.Popen(command, stderr=log, stdout=subprocess.DEVNULL, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 120
        while "http://" not in (text := (tmp_path / "stderr.txt").read_text()):
            assert process.poll() is None, text
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
        url = text.split(" on ")[1].split()[0]
        answer = httpx.post(f"{url}/v1/embeddings", json={"model": "mine", "input": "a cat"}, timeout=30).json()
        expected = PSPEncoder.from_pretrained(model_dir).encode("a cat")
        np.testing.assert_allclose(answer["data"][0]["embedding"], expected, atol=1e-6, rtol=0)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
    text = (tmp_path / "stderr.txt").read_text()
    assert text.rstrip().endswith("psp serve: stopped") and "Traceback" not in text


# --------------------------------------------------------------------------- the index
def _lines(tmp_path: Path) -> Path:
    path = tmp_path / "sentences.txt"
    path.write_text("\n".join([CORPUS[0], "", *CORPUS[1:]]) + "\n", encoding="utf-8")  # line 2 empty: left out
    return path


def test_index_from_a_text_file_searches_over_http(model_dir, tmp_path):
    encoder = PSPEncoder.from_pretrained(model_dir)
    index = load_index(_lines(tmp_path), encoder)
    assert len(index) == len(CORPUS)
    with ServerThread(create_app({"model": encoder}, ServeConfig(), index)) as server:
        answer = httpx.post(f"{server.url}/search", json={"query": CORPUS[6], "k": 3}).json()
        hits = answer["results"]
        assert len(hits) == 3 and hits[0]["text"] == CORPUS[6] and hits[0]["row"] == 7  # 0-based line, blank kept
        assert hits[0]["cosine"] == pytest.approx(1.0, abs=1e-5)
        cosines = [hit["cosine"] for hit in hits]
        assert cosines == sorted(cosines, reverse=True)
        unit = encoder.encode([CORPUS[6], hits[1]["text"]], normalize_embeddings=True)
        assert hits[1]["cosine"] == pytest.approx(float(unit[0] @ unit[1]), abs=1e-5)
        page = httpx.get(f"{server.url}/")
        assert page.status_code == 200 and "sentences.txt" in page.text and "{{" not in page.text
        for body, status in (({"query": ""}, 422), ({"query": "a", "k": 1000}, 422), ({"q": "a"}, 422)):
            response = httpx.post(f"{server.url}/search", json=body)
            assert response.status_code == status and "error" in response.json()


def test_index_from_an_embed_dataset_folder(model_dir, tmp_path):
    from psp_hf.corpus.embed_dataset import embed_dataset

    encoder = PSPEncoder.from_pretrained(model_dir)
    source = _lines(tmp_path)
    embed_dataset(encoder, str(source), tmp_path / "emb", shard_size=3)
    # The server reads nothing outside the folder: its text is copied in under the input's name.
    copy = tmp_path / "emb" / source.name
    copy.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    index = load_index(tmp_path / "emb", encoder)
    assert sorted(index.texts) == sorted(CORPUS)
    hits = index.search(encoder.encode(CORPUS[3]), 2)
    assert (hits[0].text, hits[0].row) == (CORPUS[3], 4) and hits[0].cosine == pytest.approx(1.0, abs=1e-5)
    copy.write_text("only one line now\n", encoding="utf-8")
    with pytest.raises(Exception, match="has 1 rows"):
        load_index(tmp_path / "emb", encoder)


def test_page_is_public_but_search_needs_the_key(model_dir, tmp_path):
    encoder = PSPEncoder.from_pretrained(model_dir)
    index = load_index(_lines(tmp_path), encoder)
    with ServerThread(create_app({"model": encoder}, ServeConfig(api_key="k3y"), index)) as server:
        page = httpx.get(f"{server.url}/")
        assert page.status_code == 200 and '"needsKey": true' in page.text
        assert httpx.post(f"{server.url}/search", json={"query": CORPUS[0]}).status_code == 401
        answer = httpx.post(f"{server.url}/search", json={"query": CORPUS[0]}, headers={"Authorization": "Bearer k3y"})
        assert answer.status_code == 200 and answer.json()["results"][0]["text"] == CORPUS[0]
