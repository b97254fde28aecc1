"""`psp serve` under load and as a deployment: 429 past --max-concurrent-requests with the server answering after,
the request timeout, the bounded encode queue, the limits in /info, the key applied by the middleware to any route,
any model name with one model served, and an environment variable equal to each flag."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from psp_hf import PSPEncoder

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import httpx2 as httpx  # noqa: E402 - huggingface_hub's HTTP client, installed with it
from serve_server import HELD, GatedEncoder, ServerThread, tiny_tokenizer, wait_for  # noqa: E402 - tests/ holds the helper

from psp_hf.serve.app import ServeConfig, create_app  # noqa: E402
from psp_hf.serve.batching import MicroBatcher, QueueFull  # noqa: E402
from psp_hf.serve.requests import Limits  # noqa: E402


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> PSPEncoder:
    folder = tmp_path_factory.mktemp("serve-limits")
    PSPEncoder.from_tokenizer(tiny_tokenizer(folder), hidden_size=16, seed=3).save_pretrained(folder / "m")
    return PSPEncoder.from_pretrained(folder / "m")


def _in_flight(url: str) -> int:
    text = httpx.get(f"{url}/metrics").text
    line = next(line for line in text.splitlines() if line.startswith("psp_requests_in_flight "))
    return int(line.split()[1]) - 1  # less the scrape itself


def test_a_burst_past_the_limit_gets_429_and_a_good_request_is_answered_after(encoder):
    gated = GatedEncoder(encoder)
    config = ServeConfig(max_concurrent_requests=2, threads=2)
    with ServerThread(create_app({"m": gated}, config)) as server, ThreadPoolExecutor(2) as pool:
        held = [pool.submit(httpx.post, f"{server.url}/embed", json={"inputs": HELD}, timeout=60) for _ in range(2)]
        wait_for(lambda: _in_flight(server.url) == 2, "the two held requests did not arrive")
        burst = [httpx.post(f"{server.url}/v1/embeddings", json={"input": "a", "model": "m"}) for _ in range(5)]
        burst += [httpx.post(f"{server.url}/embed", json={"inputs": "a"}) for _ in range(5)]
        for response in burst:
            assert response.status_code == 429, response.text
            assert int(response.headers["retry-after"]) >= 1
            body = response.json()
            message = body["error"]["message"] if "message" in body["error"] else body["error"]
            assert "--max-concurrent-requests" in message
        assert burst[0].json()["error"]["type"] == "rate_limit_error"  # OpenAI's shape on /v1/
        assert burst[-1].json()["error_type"] == "Overloaded"  # TEI's elsewhere
        assert httpx.get(f"{server.url}/health").status_code == 200  # probes are not counted
        gated.gate.set()
        for future in held:
            assert future.result().status_code == 200
        good = httpx.post(f"{server.url}/embed", json={"inputs": ["a cat"], "normalize": False})
        assert good.status_code == 200
        np.testing.assert_allclose(good.json(), encoder.encode(["a cat"]), atol=1e-6, rtol=0)
        metrics = httpx.get(f"{server.url}/metrics").text
        assert 'psp_requests_total{route="/embed",status="429"} 5' in metrics


def test_a_request_past_the_timeout_gets_503_and_the_server_keeps_serving(encoder):
    gated = GatedEncoder(encoder)
    with ServerThread(create_app({"m": gated}, ServeConfig(request_timeout=0.5))) as server:
        started = time.monotonic()
        response = httpx.post(f"{server.url}/v1/embeddings", json={"input": HELD, "model": "m"}, timeout=30)
        assert response.status_code == 503 and response.json()["error"]["code"] == "timeout"
        assert "--request-timeout" in response.json()["error"]["message"]
        assert time.monotonic() - started < 10
        gated.gate.set()
        assert httpx.post(f"{server.url}/embed", json={"inputs": HELD}).status_code == 200


def test_the_encode_queue_is_bounded(encoder):
    gated = GatedEncoder(encoder)

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = MicroBatcher(gated, pool, wait_s=0, workers=1, max_queued=len(HELD) + 5)
            batcher.start()
            first = asyncio.ensure_future(batcher.embed(HELD))  # taken by the worker, held at the gate
            while gated.entered == 0:
                await asyncio.sleep(0.01)
            second = asyncio.ensure_future(batcher.embed(HELD))  # queued: 20 of 25
            await asyncio.sleep(0.05)
            assert batcher.queued == len(HELD)
            with pytest.raises(QueueFull):
                await batcher.embed(HELD)
            gated.gate.set()
            results = await asyncio.gather(first, second)
            assert batcher.queued == 0
            await batcher.close()
        return results

    for embeddings, _ in asyncio.run(main()):
        np.testing.assert_allclose(embeddings, encoder.encode(HELD), atol=1e-6, rtol=0)


def test_info_reports_the_limits(encoder):
    config = ServeConfig(
        limits=Limits(max_inputs=8, max_chars=100),
        max_concurrent_requests=7,
        request_timeout=12.5,
        max_queued_sentences=99,
        max_batch_sentences=50,
    )
    with ServerThread(create_app({"m": encoder}, config)) as server:
        info = httpx.get(f"{server.url}/info").json()
    assert info["max_concurrent_requests"] == 7 and info["request_timeout_s"] == 12.5
    assert (info["max_queued_sentences"], info["max_batch_sentences"]) == (99, 50)
    assert (info["max_client_batch_size"], info["max_input_length"]) == (8, 100)
    assert info["max_body_bytes"] == config.limits.max_body_bytes


def test_the_key_guards_a_route_added_without_a_word_about_it(encoder):
    app = create_app({"m": encoder}, ServeConfig(api_key="k3y"))

    @app.get("/added-later")
    async def added_later():
        return {"secret": 42}

    with ServerThread(app) as server:
        refused = httpx.get(f"{server.url}/added-later")
        assert refused.status_code == 401 and "API key" in refused.json()["error"]
        allowed = httpx.get(f"{server.url}/added-later", headers={"Authorization": "Bearer k3y"})
        assert allowed.json() == {"secret": 42}
        for public in ("/health", "/openapi.json"):
            assert httpx.get(f"{server.url}{public}").status_code == 200
        assert httpx.get(f"{server.url}/metrics").status_code == 401
        assert httpx.get(f"{server.url}/info").status_code == 401


def test_one_model_served_answers_any_model_name(encoder):
    import openai

    with ServerThread(create_app({"p-sp-en": encoder}, ServeConfig())) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=30)
        answer = client.embeddings.create(model="text-embedding-3-small", input=["a cat"], encoding_format="float")
        assert answer.model == "p-sp-en"
        np.testing.assert_allclose(answer.data[0].embedding, encoder.encode("a cat"), atol=1e-6, rtol=0)
        no_name = httpx.post(f"{server.url}/v1/embeddings", json={"input": "a cat"})
        assert no_name.status_code == 200
        for ids in ([1, 2, 3], [[1, 2, 3]]):  # OpenAI's token-id input: refused, saying why
            refused = httpx.post(f"{server.url}/v1/embeddings", json={"input": ids, "model": "x"})
            assert refused.status_code == 422 and "token ids" in refused.json()["error"]["message"]


# --------------------------------------------------------------------------- environment variables
# One value per option, none of them its default, as a flag and as its variable's text.
OPTION_VALUES = {
    "model": (None, "/models/a", "/models/a"),
    "more_models": (["-m", "b", "-m", "c"], "b,c", ["b", "c"]),
    "host": (["--host", "0.0.0.0"], "0.0.0.0", "0.0.0.0"),
    "port": (["--port", "9000"], "9000", 9000),
    "allowed_hosts": (
        ["--allowed-hosts", "a.test", "--allowed-hosts", "b.test"],
        "a.test,b.test",
        ["a.test", "b.test"],
    ),
    "api_key": (["--api-key", "k"], "k", "k"),
    "header_timeout": (["--header-timeout", "3"], "3", 3.0),
    "max_connections": (["--max-connections", "50"], "50", 50),
    "max_body_bytes_in_flight": (["--max-body-bytes-in-flight", "300000000"], "300000000", 300000000),
    "cors_origin": (["--cors-origin", "https://a.test"], "https://a.test", ["https://a.test"]),
    "max_inputs": (["--max-inputs", "64"], "64", 64),
    "max_chars": (["--max-chars", "300"], "300", 300),
    "max_concurrent_requests": (["--max-concurrent-requests", "9"], "9", 9),
    "request_timeout": (["--request-timeout", "2.5"], "2.5", 2.5),
    "max_queued_sentences": (["--max-queued-sentences", "5000"], "5000", 5000),
    "threads": (["--threads", "3"], "3", 3),
    "batch_wait_ms": (["--batch-wait-ms", "0.5"], "0.5", 0.5),
    "max_batch_sentences": (["--max-batch-sentences", "100"], "100", 100),
    "index": (["--index", "s.txt"], "s.txt", "s.txt"),
    "access_log": (["--access-log"], "1", True),
}


def _parse(argv: list[str]) -> argparse.Namespace:
    from psp_hf.cli.serve import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_every_option_has_a_variable_equal_to_its_flag(monkeypatch):
    from psp_hf.cli.serve import environment_variable

    for dest in OPTION_VALUES:
        monkeypatch.delenv(environment_variable(dest), raising=False)
    monkeypatch.delenv("PSP_API_KEY", raising=False)
    defaults = vars(_parse([]))
    assert sorted(defaults) == sorted(OPTION_VALUES), "an option without a row here, or a row without an option"
    for dest, (flag, text, value) in OPTION_VALUES.items():
        from_flag = vars(_parse(["/models/a"] if flag is None else ["/models/a", *flag]))
        assert from_flag[dest] == value
        monkeypatch.setenv(environment_variable(dest), text)
        from_variable = vars(_parse([] if dest == "model" else ["/models/a"]))
        monkeypatch.delenv(environment_variable(dest))
        assert from_variable == from_flag, dest
        assert value != defaults[dest], dest  # the row tests something


def test_a_flag_wins_over_its_variable_and_a_bad_variable_is_one_line(monkeypatch, capsys):
    from psp_hf.cli import main

    monkeypatch.setenv("PSP_SERVE_PORT", "9000")
    assert _parse(["m", "--port", "9100"]).port == 9100
    monkeypatch.setenv("PSP_SERVE_MAX_INPUTS", "many")
    assert main(["serve", "m"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["psp: error: $PSP_SERVE_MAX_INPUTS='many': expected int"]
    monkeypatch.delenv("PSP_SERVE_MAX_INPUTS")
    monkeypatch.delenv("PSP_SERVE_MODEL", raising=False)
    assert main(["serve"]) == 2
    assert "PSP_SERVE_MODEL" in capsys.readouterr().err
