"""`psp serve`: the real OpenAI and huggingface_hub clients against a server started here, every refusal as JSON
with the server still serving, the micro-batcher, metrics, the index, start-up errors and SIGTERM."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from psp_hf import PSPEncoder

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import httpx2 as httpx  # noqa: E402 - huggingface_hub's HTTP client, installed with it
from serve_server import ServerThread, tiny_tokenizer  # noqa: E402 - tests/ holds the helper; it is not a package

from psp_hf.serve.app import ServeConfig, create_app  # noqa: E402
from psp_hf.serve.batching import MicroBatcher  # noqa: E402
from psp_hf.serve.requests import Limits  # noqa: E402

SENTENCES = ["A cat sleeps.", "Dogs run in the park!", "Ünïcode wörds and 数字 too", "x"]
KEY = "s3cret-key"


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, PSPEncoder]:
    """Two tiny models of different widths, saved and loaded back as the server would load them."""
    folder = tmp_path_factory.mktemp("serve-models")
    tokenizer = tiny_tokenizer(folder)
    loaded = {}
    for name, width, seed in (("tiny-a", 16, 3), ("tiny-b", 8, 5)):
        PSPEncoder.from_tokenizer(tokenizer, hidden_size=width, seed=seed).save_pretrained(folder / name)
        loaded[name] = PSPEncoder.from_pretrained(folder / name)
    return loaded


@pytest.fixture(scope="module")
def server(models):
    config = ServeConfig(limits=Limits(max_inputs=8, max_chars=200), threads=2)
    with ServerThread(create_app(models, config)) as running:
        yield running


@pytest.fixture(scope="module")
def keyed_server(models):
    with ServerThread(create_app({"tiny-a": models["tiny-a"]}, ServeConfig(api_key=KEY))) as running:
        yield running


def _openai(url: str, key: str = "unused"):
    import openai

    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=30)


def _pieces(encoder: PSPEncoder, sentences: list[str]) -> int:
    flat, _ = encoder.tokenize_numpy(sentences)
    return len(flat)


# --------------------------------------------------------------------------- real clients
@pytest.mark.parametrize("encoding_format", ["float", "base64", None])
def test_openai_client_returns_encode(server, models, encoding_format):
    # None: the client's default, which asks for base64 and decodes it itself; an explicit "base64" hands back the
    # strings (little-endian float32).
    extra = {} if encoding_format is None else {"encoding_format": encoding_format}
    answer = _openai(server.url).embeddings.create(model="tiny-a", input=SENTENCES, **extra)
    rows = [item.embedding for item in sorted(answer.data, key=lambda item: item.index)]
    if encoding_format == "base64":
        assert all(isinstance(row, str) for row in rows)
        rows = [np.frombuffer(base64.b64decode(row), dtype="<f4") for row in rows]
    got = np.array(rows, dtype=np.float32)
    np.testing.assert_allclose(got, models["tiny-a"].encode(SENTENCES), atol=1e-6, rtol=0)
    assert answer.model == "tiny-a" and answer.object == "list"
    assert answer.usage.prompt_tokens == answer.usage.total_tokens == _pieces(models["tiny-a"], SENTENCES) > 0


def test_openai_client_single_string_dimensions_and_second_model(server, models):
    client = _openai(server.url)
    one = client.embeddings.create(model="tiny-b", input="A cat sleeps.")
    assert len(one.data) == 1
    np.testing.assert_allclose(one.data[0].embedding, models["tiny-b"].encode("A cat sleeps."), atol=1e-6, rtol=0)
    cut = client.embeddings.create(model="tiny-a", input=SENTENCES[:2], dimensions=5, encoding_format="float")
    expected = models["tiny-a"].encode(SENTENCES[:2], truncate_dim=5)
    np.testing.assert_allclose([item.embedding for item in cut.data], expected, atol=1e-6, rtol=0)
    assert sorted(model.id for model in client.models.list()) == ["tiny-a", "tiny-b"]


def test_inference_client_feature_extraction(server, models):
    from huggingface_hub import InferenceClient

    client = InferenceClient(base_url=server.url)
    for sentence in SENTENCES:
        got = client.feature_extraction(sentence)
        assert got.shape == (1, 16)
        expected = models["tiny-a"].encode([sentence], normalize_embeddings=True)
        np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    raw = client.feature_extraction(SENTENCES[0], normalize=False, dimensions=4)
    np.testing.assert_allclose(raw, models["tiny-a"].encode(SENTENCES[:1], truncate_dim=4), atol=1e-6, rtol=0)


def test_tei_embed_similarity_info_health(server, models):
    got = httpx.post(f"{server.url}/embed", json={"inputs": SENTENCES, "model": "tiny-b"}).json()
    np.testing.assert_allclose(got, models["tiny-b"].encode(SENTENCES, normalize_embeddings=True), atol=1e-6, rtol=0)
    body = {"inputs": {"source_sentence": SENTENCES[0], "sentences": SENTENCES[1:]}}
    cosines = httpx.post(f"{server.url}/similarity", json=body).json()
    unit = models["tiny-a"].encode(SENTENCES, normalize_embeddings=True)
    np.testing.assert_allclose(cosines, unit[1:] @ unit[0], atol=1e-6, rtol=0)
    info = httpx.get(f"{server.url}/info").json()
    assert (info["model_id"], info["max_client_batch_size"], info["max_input_length"]) == ("tiny-a", 8, 200)
    assert info["models"] == ["tiny-a", "tiny-b"]
    assert httpx.get(f"{server.url}/health").status_code == 200


def test_metrics_count_requests_sentences_and_latency(server):
    def scrape() -> str:
        return httpx.get(f"{server.url}/metrics").text

    def value(text: str, pattern: str) -> float:
        found = re.search(rf"^{re.escape(pattern)} (\S+)$", text, re.M)
        return float(found.group(1)) if found else 0.0

    before = scrape()
    for _ in range(3):
        httpx.post(f"{server.url}/embed", json={"inputs": SENTENCES[:3], "model": "tiny-b"}).raise_for_status()
    httpx.post(f"{server.url}/embed", json={"inputs": []})
    after = scrape()
    assert (
        value(after, 'psp_sentences_total{model="tiny-b"}') - value(before, 'psp_sentences_total{model="tiny-b"}') == 9
    )
    ok = 'psp_requests_total{route="/embed",status="200"}'
    assert value(after, ok) - value(before, ok) == 3
    bad = 'psp_requests_total{route="/embed",status="422"}'
    assert value(after, bad) - value(before, bad) == 1
    count = 'psp_request_duration_seconds_count{route="/embed"}'
    assert value(after, count) - value(before, count) == 4
    assert "# TYPE psp_request_duration_seconds histogram" in after
    assert 'psp_request_duration_seconds_bucket{route="/embed",le="+Inf"}' in after


# --------------------------------------------------------------------------- refusals
OK_BODY = {"model": "tiny-a", "input": ["fine"]}
REFUSALS = [
    ("/v1/embeddings", b'{"model": "tiny-a", "input": ["a",}', 400, "malformed JSON"),
    ("/v1/embeddings", b'["not", "an", "object"]', 422, "JSON object"),
    ("/v1/embeddings", {"model": "tiny-a", "input": 42}, 422, "string or a list"),
    ("/v1/embeddings", {"model": "tiny-a", "input": ["ok", 3]}, 422, "'input'[1]"),
    ("/v1/embeddings", {"model": "tiny-a", "input": [[1, 2, 3]]}, 422, "no token ids"),
    ("/v1/embeddings", {"model": "tiny-a", "input": []}, 422, "empty list"),
    ("/v1/embeddings", {"model": "tiny-a", "input": ["a"] * 9}, 413, "limit of 8 inputs"),
    ("/v1/embeddings", {"model": "tiny-a", "input": ["a", "b" * 201]}, 413, "limit of 200 characters"),
    ("/v1/embeddings", {"model": "nope", "input": "a"}, 404, "not served"),
    ("/v1/embeddings", {"model": "../../etc/passwd", "input": "a"}, 404, "not served"),
    ("/v1/embeddings", {"input": "a"}, 422, "'model'"),
    ("/v1/embeddings", {"model": "tiny-a", "input": "a", "encoding_format": "int8"}, 422, "encoding_format"),
    ("/v1/embeddings", {"model": "tiny-a", "input": "a", "dimensions": 17}, 422, "between 1 and 16"),
    ("/v1/embeddings", {"model": "tiny-a", "input": "a", "dimensions": True}, 422, "integer"),
    ("/embed", {"inputs": None}, 422, "'inputs'"),
    ("/embed", {"inputs": "a", "normalize": "yes"}, 422, "'normalize'"),
    ("/embed", {"inputs": ["a"] * 9}, 413, "--max-inputs"),
    ("/embed", {"inputs": "a", "model": "/tmp"}, 404, "not served"),
    ("/similarity", {"inputs": ["a", "b"]}, 422, "source_sentence"),
    ("/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b"] * 8}}, 413, "--max-inputs"),
    ("/search", {"query": "a"}, 404, "no search index"),
]


@pytest.mark.parametrize(("route", "body", "status", "words"), REFUSALS, ids=[f"{r[0]}-{r[3]}" for r in REFUSALS])
def test_refusals_are_json_and_the_server_keeps_serving(server, route, body, status, words):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = httpx.post(f"{server.url}{route}", content=content, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    error = response.json()["error"]
    message = error["message"] if route.startswith("/v1/") else error
    assert words in message
    assert httpx.post(f"{server.url}/v1/embeddings", json=OK_BODY).status_code == 200


def test_body_over_the_byte_limit_is_refused_before_reading(server):
    limit = Limits(max_inputs=8, max_chars=200).max_body_bytes
    response = httpx.post(f"{server.url}/embed", content=b" " * (limit + 1))
    assert response.status_code == 413 and "over the limit" in response.json()["error"]
    assert httpx.post(f"{server.url}/embed", json={"inputs": "still here"}).status_code == 200


def test_api_key(keyed_server, models):
    import openai
    from huggingface_hub import InferenceClient
    from huggingface_hub.errors import HfHubHTTPError

    url = keyed_server.url
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
        response = httpx.post(f"{url}/v1/embeddings", json=OK_BODY | {"model": "tiny-a"}, headers=headers)
        assert response.status_code == 401 and "API key" in response.json()["error"]["message"]
        assert httpx.post(f"{url}/embed", json={"inputs": "a"}, headers=headers).status_code == 401
        assert httpx.get(f"{url}/metrics", headers=headers).status_code == 401
    with pytest.raises(openai.AuthenticationError):
        _openai(url, "wrong").embeddings.create(model="tiny-a", input="a")
    answer = _openai(url, KEY).embeddings.create(model="tiny-a", input="a cat")
    np.testing.assert_allclose(answer.data[0].embedding, models["tiny-a"].encode("a cat"), atol=1e-6, rtol=0)
    with pytest.raises(HfHubHTTPError):
        InferenceClient(base_url=url, api_key="wrong").feature_extraction("a cat")
    got = InferenceClient(base_url=url, api_key=KEY).feature_extraction("a cat")
    np.testing.assert_allclose(got[0], models["tiny-a"].encode("a cat", normalize_embeddings=True), atol=1e-6, rtol=0)
    assert httpx.get(f"{url}/health").status_code == 200  # probes need no key


def test_cors_is_off_unless_asked(server, models):
    headers = {"Origin": "https://example.org"}
    assert (
        "access-control-allow-origin"
        not in httpx.post(f"{server.url}/embed", json={"inputs": "a"}, headers=headers).headers
    )
    config = ServeConfig(cors_origins=["https://example.org"])
    with ServerThread(create_app({"tiny-a": models["tiny-a"]}, config)) as open_server:
        response = httpx.post(f"{open_server.url}/embed", json={"inputs": "a"}, headers=headers)
        assert response.headers["access-control-allow-origin"] == "https://example.org"
        other = httpx.post(f"{open_server.url}/embed", json={"inputs": "a"}, headers={"Origin": "https://evil.test"})
        assert "access-control-allow-origin" not in other.headers


# --------------------------------------------------------------------------- batching
def test_micro_batcher_merges_concurrent_requests(models):
    encoder = models["tiny-a"]
    requests = [[f"sentence {i} of request {r}" for i in range(r % 3 + 1)] for r in range(10)]
    batches = []

    async def main():
        with ThreadPoolExecutor(2) as pool:
            batcher = MicroBatcher(encoder, pool, wait_s=0.05, workers=1, on_batch=batches.append)
            batcher.start()
            results = await asyncio.gather(*(batcher.embed(sentences) for sentences in requests))
            await batcher.close()
        return results

    results = asyncio.run(main())
    # All ten were queued before the worker ran: one encode of all their sentences.
    assert batches == [sum(map(len, requests))]
    for sentences, (embeddings, counts) in zip(requests, results, strict=True):
        np.testing.assert_allclose(embeddings, encoder.encode(sentences), atol=1e-6, rtol=0)
        assert counts.tolist() == [_pieces(encoder, [s]) for s in sentences]


def test_concurrent_clients_get_their_own_rows(server, models):
    def call(i: int) -> tuple[int, np.ndarray]:
        sentences = [f"request {i} sentence {j}" for j in range(i % 4 + 1)]
        answer = httpx.post(f"{server.url}/v1/embeddings", json={"model": "tiny-a", "input": sentences}).json()
        return i, np.array([item["embedding"] for item in answer["data"]], dtype=np.float32)

    with ThreadPoolExecutor(16) as pool:
        for i, got in pool.map(call, range(64)):
            sentences = [f"request {i} sentence {j}" for j in range(i % 4 + 1)]
            np.testing.assert_allclose(got, models["tiny-a"].encode(sentences), atol=1e-6, rtol=0)


@pytest.mark.parametrize("width", [12, 16, 7])
def test_base64_rows_round_trip(server, models, width):
    # 12 floats = 48 bytes, a whole number of base64 blocks: the matrix is encoded once and sliced.
    from psp_hf.serve.app import base64_rows

    embeddings = np.random.default_rng(width).standard_normal((5, width)).astype(np.float32)
    back = np.stack([np.frombuffer(base64.b64decode(row), dtype="<f4") for row in base64_rows(embeddings)])
    np.testing.assert_array_equal(back, embeddings)
    if width <= 16:
        answer = _openai(server.url).embeddings.create(model="tiny-a", input=SENTENCES, dimensions=width)
        expected = models["tiny-a"].encode(SENTENCES, truncate_dim=width)
        np.testing.assert_allclose([item.embedding for item in answer.data], expected, atol=1e-6, rtol=0)
