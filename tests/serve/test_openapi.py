"""The OpenAPI document (`/openapi.json`) against the routes' real requests and answers: every body a client sends
here and every answer the server gives (refusals included) must validate against the document's schema of that
route, method and status, and every route the app serves must be in the document."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import numpy as np
import pytest

from psp_hf import PSPEncoder

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import httpx2 as httpx  # noqa: E402 - huggingface_hub's HTTP client, installed with it
from serve_server import CORPUS, ServerThread, tiny_tokenizer  # noqa: E402 - tests/ holds the helper

from psp_hf.serve.app import ServeConfig, create_app  # noqa: E402
from psp_hf.serve.index import load_index  # noqa: E402
from psp_hf.serve.requests import Limits  # noqa: E402

_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "null": type(None),
}


def validate(value, schema: dict, document: dict, where: str = "$") -> None:
    """Raise AssertionError unless `value` fits `schema` (the JSON Schema keywords pydantic writes: $ref, type,
    properties, required, additionalProperties, items, anyOf, enum, const, minimum, maximum)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        validate(value, document["components"]["schemas"][name], document, where)
        return
    if "anyOf" in schema:
        failures = []
        for option in schema["anyOf"]:
            try:
                validate(value, option, document, where)
                return
            except AssertionError as error:
                failures.append(str(error))
        raise AssertionError(f"{where}: {value!r:.80} fits none of {failures}")
    kind = schema.get("type")
    if kind is not None:
        python = _TYPES[kind]
        fits = isinstance(value, python) and not (kind in ("integer", "number") and isinstance(value, bool))
        assert fits, f"{where}: {value!r:.80} is not {kind}"
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
    if "const" in schema:
        assert value == schema["const"], f"{where}: {value!r} != {schema['const']!r}"
    if "minimum" in schema:
        assert value >= schema["minimum"], f"{where}: {value} < {schema['minimum']}"
    if "maximum" in schema:
        assert value <= schema["maximum"], f"{where}: {value} > {schema['maximum']}"
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            assert name in value, f"{where}: '{name}' missing"
        for name, item in value.items():
            if name in properties:
                validate(item, properties[name], document, f"{where}.{name}")
            elif schema.get("additionalProperties") is False:
                raise AssertionError(f"{where}: '{name}' is not in the schema")
            elif isinstance(schema.get("additionalProperties"), dict):
                validate(item, schema["additionalProperties"], document, f"{where}.{name}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            validate(item, schema["items"], document, f"{where}[{i}]")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve-openapi")
    tokenizer = tiny_tokenizer(folder)
    models = {
        name: PSPEncoder.from_tokenizer(tokenizer, hidden_size=width, seed=seed)
        for name, width, seed in (("a", 12, 3), ("b", 8, 5))
    }
    (folder / "s.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    index = load_index(folder / "s.txt", models["a"])
    config = ServeConfig(limits=Limits(max_inputs=8, max_chars=200), api_key="k")
    with ServerThread(create_app(models, config, index)) as server:
        document = httpx.get(f"{server.url}/openapi.json").json()
        yield server, document, models


KEY = {"Authorization": "Bearer k"}
# (method, path, body, status, headers): real calls, good and refused. A body refused with 422 is one the document's
# schema refuses too, except an empty query (a string, refused by the handler); 404 and 413 refuse what fits the
# schema but not this server (a model it does not serve, a limit it was started with).
CALLS = [
    ("post", "/v1/embeddings", {"model": "a", "input": ["A cat sleeps.", "x"]}, 200, KEY),
    ("post", "/v1/embeddings", {"model": "b", "input": "one", "encoding_format": "base64", "dimensions": 3}, 200, KEY),
    ("post", "/v1/embeddings", {"model": "a", "input": "x", "user": "someone"}, 200, KEY),
    ("post", "/v1/embeddings", {"model": "nope", "input": "x"}, 404, KEY),
    ("post", "/v1/embeddings", {"model": "a", "input": ["x"] * 9}, 413, KEY),
    ("post", "/v1/embeddings", {"model": "a", "input": 3}, 422, KEY),
    ("post", "/v1/embeddings", {"model": "a", "input": "x"}, 401, {}),
    ("get", "/v1/models", None, 200, KEY),
    ("post", "/embed", {"inputs": ["A cat sleeps.", "y"], "normalize": False, "truncate": True}, 200, KEY),
    ("post", "/", {"inputs": "A cat sleeps.", "model": "b", "dimensions": 4}, 200, KEY),
    ("post", "/embed", {"inputs": None}, 422, KEY),
    ("post", "/embed", {"inputs": "a"}, 401, {}),
    ("post", "/similarity", {"inputs": {"source_sentence": "a cat", "sentences": ["a dog", "a car"]}}, 200, KEY),
    ("post", "/similarity", {"inputs": ["a"]}, 422, KEY),
    ("get", "/info", None, 200, KEY),
    ("post", "/search", {"query": "a cat on a windowsill", "k": 3}, 200, KEY),
    ("post", "/search", {"query": ""}, 422, KEY),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "headers"), CALLS, ids=[f"{c[1]}-{c[3]}" for c in CALLS])
def test_real_requests_and_answers_fit_the_document(served, method, path, body, status, headers):
    server, document, _ = served
    operation = document["paths"][path][method]
    if body is not None:
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        if status != 422 or body == {"query": ""}:
            validate(body, schema, document)
        else:
            with pytest.raises(AssertionError):
                validate(body, schema, document)
    response = httpx.request(method.upper(), f"{server.url}{path}", json=body, headers=headers)
    assert response.status_code == status, response.text
    assert str(status) in operation["responses"], f"{status} is not documented for {method} {path}"
    content = operation["responses"][str(status)]["content"]["application/json"]["schema"]
    validate(response.json(), content, document)


def test_the_document_lists_every_route_and_its_answers_decode(served):
    server, document, models = served
    from psp_hf.serve.routing import Route

    served_routes = {
        (method.lower(), route.path)
        for route in server.server.config.app.routes
        if isinstance(route, Route) and route.include_in_schema
        for method in route.methods
    }
    documented = {(method, path) for path, operations in document["paths"].items() for method in operations}
    assert served_routes == documented
    assert {"/health", "/metrics", "/info", "/v1/embeddings", "/embed", "/similarity", "/search", "/"} <= set(
        document["paths"]
    )
    # A base64 row the document calls a string is the float32 row encode gives.
    answer = httpx.post(
        f"{server.url}/v1/embeddings",
        json={"model": "a", "input": ["A cat sleeps."], "encoding_format": "base64"},
        headers=KEY,
    ).json()
    row = np.frombuffer(base64.b64decode(answer["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(row, models["a"].encode("A cat sleeps."), atol=1e-6, rtol=0)


def test_the_validator_refuses_what_does_not_fit(served):
    _, document, _ = served
    schema = {"$ref": "#/components/schemas/EmbeddingsResponse"}
    good = {"object": "list", "data": [], "model": "a", "usage": {"prompt_tokens": 1, "total_tokens": 1}}
    validate(good, schema, document)
    for bad in ({**good, "usage": {"prompt_tokens": "1", "total_tokens": 1}}, {**good, "object": "dict"}, {}):
        with pytest.raises(AssertionError):
            validate(bad, schema, document)
