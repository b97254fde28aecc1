"""`psp serve` against hostile and unlucky clients: an index folder whose manifest points outside it, DNS rebinding
(Host) and cross-site posts (Content-Type), a page template fed placeholders, slow clients holding connections,
large bodies at once, HEAD and unknown routes, a shutdown with requests in flight, a key outside ASCII, and
non-finite options. Each of these failed before the server was hardened."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from psp_hf import PSPEncoder
from psp_hf.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import httpx2 as httpx  # noqa: E402 - huggingface_hub's HTTP client, installed with it
from serve_server import CORPUS, HELD, GatedEncoder, ServerThread, tiny_tokenizer, wait_for  # noqa: E402

from psp_hf.serve.app import ServeConfig, create_app  # noqa: E402
from psp_hf.serve.requests import Limits  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("serve-hostile")
    PSPEncoder.from_tokenizer(tiny_tokenizer(folder), hidden_size=16, seed=3).save_pretrained(folder / "model")
    return folder / "model"


@pytest.fixture(scope="module")
def encoder(model_dir) -> PSPEncoder:
    return PSPEncoder.from_pretrained(model_dir)


# --------------------------------------------------------------------------- security
def test_an_index_folder_opens_nothing_outside_itself(encoder, tmp_path):
    from psp_hf.corpus.embed_dataset import embed_dataset
    from psp_hf.errors import PSPInputError
    from psp_hf.serve.index import load_index

    secret = tmp_path / "secret.txt"
    secret.write_text("\n".join(f"secret line {i}" for i in range(len(CORPUS))) + "\n", encoding="utf-8")
    source = tmp_path / "sentences.txt"
    source.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    embed_dataset(encoder, str(source), tmp_path / "emb", shard_size=3)
    # The manifest names its input outside the folder (as every embed-dataset folder does): refused, naming the fix.
    with pytest.raises(PSPInputError, match="outside"):
        load_index(tmp_path / "emb", encoder)
    # A planted manifest naming another file outside: refused the same way, the file never read.
    manifest = tmp_path / "emb" / "manifest.json"
    info = json.loads(manifest.read_text())
    manifest.write_text(json.dumps(info | {"input": str(secret)}))
    with pytest.raises(PSPInputError, match="outside"):
        load_index(tmp_path / "emb", encoder)
    # A link inside the folder to a file outside: refused too.
    (tmp_path / "emb" / "secret.txt").symlink_to(secret)
    with pytest.raises(PSPInputError, match="outside"):
        load_index(tmp_path / "emb", encoder)
    # The text copied into the folder under the input's name: served.
    (tmp_path / "emb" / "secret.txt").unlink()
    manifest.write_text(json.dumps(info))
    (tmp_path / "emb" / "sentences.txt").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    index = load_index(tmp_path / "emb", encoder)
    assert sorted(index.texts) == sorted(CORPUS) and index.name == "emb"


def test_host_header_must_name_the_server(encoder):
    config = ServeConfig(allowed_hosts=["127.0.0.1", "localhost"])
    with ServerThread(create_app({"m": encoder}, config)) as server:
        body = {"inputs": "a cat"}
        assert httpx.post(f"{server.url}/embed", json=body).status_code == 200  # Host: 127.0.0.1:PORT
        assert httpx.post(f"{server.url}/embed", json=body, headers={"Host": f"localhost:{server.port}"}).is_success
        rebound = httpx.post(f"{server.url}/embed", json=body, headers={"Host": "attacker.example:80"})
        assert rebound.status_code == 400 and "--allowed-hosts" in rebound.json()["error"]
        assert httpx.get(f"{server.url}/info", headers={"Host": "attacker.example"}).status_code == 400


def test_a_body_must_be_declared_json(encoder):
    with ServerThread(create_app({"m": encoder}, ServeConfig())) as server:
        text = json.dumps({"model": "m", "input": "a cat"})
        for kind in ("text/plain", "application/x-www-form-urlencoded", None):
            headers = {} if kind is None else {"Content-Type": kind}
            refused = httpx.post(f"{server.url}/v1/embeddings", content=text, headers=headers)
            assert refused.status_code == 415 and "application/json" in refused.json()["error"]["message"]
        good = httpx.post(
            f"{server.url}/v1/embeddings", content=text, headers={"Content-Type": "application/json; charset=utf-8"}
        )
        assert good.status_code == 200


def test_the_page_is_filled_once_and_shows_the_file_name_only(encoder, tmp_path):
    from psp_hf.serve.index import load_index

    folder = tmp_path / "private-{{SETTINGS}}-dir"
    folder.mkdir()
    (folder / "s{{SOURCE}}.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    index = load_index(folder / "s{{SOURCE}}.txt", encoder)
    name = '<b>"{{SOURCE}}{{MODEL}}'
    with ServerThread(create_app({name: encoder}, ServeConfig(api_key="k"), index)) as server:
        page = httpx.get(f"{server.url}/").text
    assert str(tmp_path) not in page and "private-" not in page  # the server's path is nobody's business
    assert "s{{SOURCE}}.txt" in page  # the name, as given, not expanded again
    assert page.count('"needsKey": true') == 1 and '<b>"' not in page  # escaped wherever it lands
    assert "&lt;b&gt;&quot;{{SOURCE}}{{MODEL}}" in page


def test_slow_clients_are_cut_off_and_good_requests_answered(encoder):
    config = ServeConfig(header_timeout=0.5, max_connections=16)
    with ServerThread(create_app({"m": encoder}, config), config) as server:
        slow = []
        for _ in range(40):  # more than the connection limit, each sending half a request line
            connection = socket.create_connection(("127.0.0.1", server.port))
            connection.sendall(b"POST /embed HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            slow.append(connection)
        started = time.monotonic()
        answer = httpx.post(f"{server.url}/embed", json={"inputs": "a cat"}, timeout=10)
        assert answer.status_code == 200 and time.monotonic() - started < 5
        closed, deadline = 0, time.monotonic() + 10
        for connection in slow:  # each closed by the server (EOF) within the header timeout, not left open
            connection.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                closed += connection.recv(1024) == b""
            except ConnectionResetError:
                closed += 1
            except TimeoutError:  # still open
                pass
            connection.close()
        assert closed == len(slow)


def test_bytes_in_flight_are_bounded_across_requests(encoder):
    gated = GatedEncoder(encoder)
    limits = Limits(max_inputs=32, max_chars=64)
    config = ServeConfig(limits=limits, max_body_bytes_in_flight=limits.max_body_bytes + 1000)
    body = json.dumps({"inputs": HELD}).encode()
    padded = body + b" " * (limits.max_body_bytes - len(body))  # the largest allowed body
    with ServerThread(create_app({"m": gated}, config)) as server, ThreadPoolExecutor(1) as pool:
        first = pool.submit(
            httpx.post, f"{server.url}/embed", content=padded, headers={"Content-Type": "application/json"}, timeout=60
        )
        wait_for(lambda: gated.entered > 0, "the first request did not reach its encode")
        second = httpx.post(f"{server.url}/embed", content=padded, headers={"Content-Type": "application/json"})
        assert second.status_code == 429 and "--max-body-bytes-in-flight" in second.json()["error"]
        assert int(second.headers["retry-after"]) >= 1
        gated.gate.set()
        assert first.result().status_code == 200
        again = httpx.post(f"{server.url}/embed", content=padded, headers={"Content-Type": "application/json"})
        assert again.status_code == 200


def test_a_small_request_is_not_stuck_behind_a_long_encode(encoder):
    gated = GatedEncoder(encoder)
    with ServerThread(create_app({"m": gated}, ServeConfig(threads=1))) as server, ThreadPoolExecutor(1) as pool:
        held = pool.submit(httpx.post, f"{server.url}/embed", json={"inputs": HELD}, timeout=60)
        wait_for(lambda: gated.entered > 0, "the long encode did not start")
        small = httpx.post(f"{server.url}/embed", json={"inputs": ["a cat"], "normalize": False}, timeout=5)
        assert small.status_code == 200 and not held.done()  # answered while the long encode still runs
        np.testing.assert_allclose(small.json(), encoder.encode(["a cat"]), atol=1e-6, rtol=0)
        gated.gate.set()
        assert held.result().status_code == 200


# --------------------------------------------------------------------------- protocol details
def test_head_answers_on_get_routes_and_unknown_routes_are_json(encoder):
    with ServerThread(create_app({"m": encoder}, ServeConfig())) as server:
        for path in ("/health", "/info", "/metrics", "/openapi.json", "/v1/models"):
            head = httpx.head(f"{server.url}{path}")
            assert head.status_code == 200 and head.content == b"", path
        missing = httpx.get(f"{server.url}/no/such/route")
        assert missing.status_code == 404 and missing.json()["error_type"] == "Validation"
        wrong = httpx.get(f"{server.url}/v1/embeddings")
        assert wrong.status_code == 405 and "GET" in wrong.json()["error"]["message"]  # OpenAI's shape on /v1/


def test_a_request_cut_by_shutdown_gets_a_json_answer(encoder):
    from psp_hf.serve.middleware import Gate
    from psp_hf.serve.state import ServerState

    async def never_answers(scope, receive, send):
        await asyncio.sleep(3600)

    async def main():
        state = ServerState({"m": encoder}, ServeConfig(), None)
        gate = Gate(never_answers, state)
        sent = []

        async def send(message):
            sent.append(message)

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        scope = {"type": "http", "method": "POST", "path": "/v1/embeddings", "headers": [], "app": None}
        task = asyncio.ensure_future(gate(scope, receive, send))
        await asyncio.sleep(0.05)
        task.cancel()  # what uvicorn does to requests still running when the shutdown's grace period ends
        with pytest.raises(asyncio.CancelledError):
            await task
        return sent

    sent = asyncio.run(main())
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 503
    assert json.loads(sent[1]["body"])["error"]["code"] == "shutting_down"


def test_a_key_outside_ascii_matches(encoder):
    key = "clé-ключ-鍵"
    with ServerThread(create_app({"m": encoder}, ServeConfig(api_key=key))) as server:
        good = httpx.post(
            f"{server.url}/embed", json={"inputs": "a"}, headers={"Authorization": b"Bearer " + key.encode()}
        )
        assert good.status_code == 200
        wrong = httpx.post(f"{server.url}/embed", json={"inputs": "a"}, headers={"Authorization": b"Bearer cl\xe9"})
        assert wrong.status_code == 401


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_non_finite_batch_wait_is_refused(model_dir, value, capsys):
    with pytest.raises(SystemExit) as refused:  # argparse's refusal of a bad value, as for every option
        main(["serve", str(model_dir), "--port", "0", "--batch-wait-ms", value])
    assert refused.value.code == 2 and "--batch-wait-ms" in capsys.readouterr().err
    with pytest.raises(ValueError, match="batch_wait_ms"):
        ServeConfig(batch_wait_ms=float(value))


def test_embeddings_are_unchanged_by_the_guards(encoder):
    config = ServeConfig(allowed_hosts=["127.0.0.1"], header_timeout=5, max_connections=8)
    with ServerThread(create_app({"m": encoder}, config), config) as server:
        answer = httpx.post(f"{server.url}/embed", json={"inputs": CORPUS, "normalize": False}).json()
    np.testing.assert_allclose(answer, encoder.encode(CORPUS), atol=1e-6, rtol=0)
