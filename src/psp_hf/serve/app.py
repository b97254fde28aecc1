"""The ASGI app: OpenAI's embeddings routes, text-embeddings-inference's routes, metrics and the search page.

Handlers take the raw request and answer bytes (orjson), skipping FastAPI's per-field validation: `requests` checks
the bodies, so each refusal names its field or limit, and a 64-sentence answer costs little besides the encode.
"""

import base64
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import numpy as np

from .batching import MicroBatcher
from .metrics import Metrics
from .requests import APIError, Limits, choice, optional_bool, optional_int, parse_json, read_body, texts
from .responses import json_response as _json

logger = logging.getLogger(__name__)


@dataclass
class ServeConfig:
    """How the app answers: limits, key, CORS, batching and the encode threads."""

    limits: Limits = field(default_factory=Limits)
    api_key: str | None = None
    cors_origins: list[str] = field(default_factory=list)
    threads: int = 1
    batch_wait_ms: float = 2.0
    max_batch_sentences: int = 4096


class _State:
    def __init__(self, models: dict, config: ServeConfig, index) -> None:
        self.models = models
        self.default_model = next(iter(models))
        self.config = config
        self.index = index
        self.metrics = Metrics()
        self.started = int(time.time())
        # Requests inside a handler that have not reached a batcher yet: the batcher waits for them only.
        self.arriving = 0
        self.executor: ThreadPoolExecutor | None = None
        self.batchers: dict[str, MicroBatcher] = {}


def _openai_error(error: APIError):
    kind = {401: "authentication_error", 404: "not_found_error"}.get(error.status, "invalid_request_error")
    body = {"message": error.message, "type": kind, "param": error.param, "code": error.code}
    return _json({"error": body}, error.status)


def _tei_error(error: APIError):
    kind = {401: "Unauthorized", 404: "Validation", 413: "Validation", 500: "Backend"}.get(error.status, "Validation")
    return _json({"error": error.message, "error_type": kind}, error.status)


def create_app(models: dict, config: ServeConfig | None = None, index=None):
    """A FastAPI app serving `models` (served name -> PSPEncoder; the first is the default) and `index` if given."""
    from fastapi import FastAPI, Request, Response

    config = config or ServeConfig()
    if not models:
        raise ValueError("create_app needs at least one model")
    state = _State(models, config, index)

    @asynccontextmanager
    async def lifespan(app):
        # One pool of encode threads for every model; each model's batcher keeps that many encodes going.
        state.executor = ThreadPoolExecutor(max_workers=config.threads, thread_name_prefix="psp-encode")
        for name, encoder in models.items():
            batcher = MicroBatcher(
                encoder,
                state.executor,
                wait_s=config.batch_wait_ms / 1000,
                max_sentences=config.max_batch_sentences,
                workers=config.threads,
                others_waiting=lambda: state.arriving,
                on_batch=lambda n, name=name: state.metrics.batch(name, n),
            )
            batcher.start()
            state.batchers[name] = batcher
        yield
        for batcher in state.batchers.values():
            await batcher.close()
        state.executor.shutdown(wait=True)

    app = FastAPI(title="psp serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.psp = state
    if config.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=config.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
        )

    def handler(route: str, on_error: Callable, public: bool = False):
        """Wraps a route: the key check, JSON errors, the in-flight gauge and the latency histogram."""

        def wrap(function: Callable[[Request], Awaitable]):
            async def endpoint(request: Request):
                start = time.perf_counter()
                state.metrics.in_flight += 1
                state.arriving += 1
                try:
                    if not public and config.api_key is not None:
                        _check_key(request, config.api_key)
                    response = await function(request)
                except APIError as error:
                    response = on_error(error)
                except Exception:
                    logger.exception("%s failed", route)
                    response = on_error(APIError(500, "internal error; see the server's log", code="internal"))
                finally:
                    state.arriving -= 1
                    state.metrics.in_flight -= 1
                state.metrics.request_done(route, response.status_code, time.perf_counter() - start)
                return response

            endpoint.__name__ = function.__name__
            return endpoint

        return wrap

    async def embed(name: str, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
        # Queued now: no longer one the batcher should wait for (the handler's count is restored after).
        state.arriving -= 1
        try:
            embeddings, counts = await state.batchers[name].embed(sentences)
        finally:
            state.arriving += 1
        state.metrics.embedded(name, len(sentences), int(counts.sum()))
        return embeddings, counts

    def model_of(body: dict, required: bool) -> str:
        name = body.get("model")
        if name is None and not required:
            return state.default_model
        if not isinstance(name, str):
            raise APIError(422, "'model' must be a string naming a served model", param="model", code="invalid_type")
        if name not in models:
            served = ", ".join(models)
            raise APIError(
                404, f"model {name!r} is not served here; served: {served}", param="model", code="model_not_found"
            )
        return name

    async def body_of(request: Request) -> dict:
        return parse_json(await read_body(request, config.limits))

    @app.post("/v1/embeddings")
    @handler("/v1/embeddings", _openai_error)
    async def openai_embeddings(request: Request):
        body = await body_of(request)
        name = model_of(body, required=True)
        sentences, _ = texts(body.get("input"), "input", config.limits)
        fmt = choice(body, "encoding_format", ("float", "base64"), "float")
        dim = optional_int(body, "dimensions", 1, models[name].dim)
        embeddings, counts = await embed(name, sentences)
        if dim is not None:
            embeddings = np.ascontiguousarray(embeddings[:, :dim])
        rows = base64_rows(embeddings) if fmt == "base64" else list(embeddings)
        tokens = int(counts.sum())
        data = [{"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(rows)]
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return _json({"object": "list", "data": data, "model": name, "usage": usage})

    @app.get("/v1/models")
    @handler("/v1/models", _openai_error)
    async def openai_models(request: Request):
        data = [{"id": n, "object": "model", "created": state.started, "owned_by": "psp-hf"} for n in models]
        return _json({"object": "list", "data": data})

    async def tei_embed(request: Request):
        body = await body_of(request)
        name = model_of(body, required=False)
        sentences, _ = texts(body.get("inputs"), "inputs", config.limits)
        normalize = optional_bool(body, "normalize", True)
        optional_bool(body, "truncate", False)  # inputs are never cut: a bag of pieces has no length limit
        choice(body, "truncation_direction", ("left", "right"), None)
        if body.get("prompt_name") is not None:
            raise APIError(422, "'prompt_name': psp models have no prompts", param="prompt_name", code="invalid_value")
        dim = optional_int(body, "dimensions", 1, models[name].dim)
        embeddings, _ = await embed(name, sentences)
        if dim is not None:
            embeddings = embeddings[:, :dim]
        if normalize:
            from ..inference.similarity import unit_rows

            embeddings = unit_rows(embeddings)
        return _json(np.ascontiguousarray(embeddings))

    # TEI answers POST / like /embed for an embedding model: InferenceClient(base_url=...) posts there.
    app.post("/")(handler("/", _tei_error)(tei_embed))
    app.post("/embed")(handler("/embed", _tei_error)(tei_embed))

    @app.post("/similarity")
    @handler("/similarity", _tei_error)
    async def tei_similarity(request: Request):
        body = await body_of(request)
        name = model_of(body, required=False)
        inputs = body.get("inputs")
        if not isinstance(inputs, dict):
            raise APIError(422, "'inputs' must be an object with 'source_sentence' and 'sentences'", param="inputs")
        source, _ = texts(inputs.get("source_sentence"), "inputs.source_sentence", config.limits)
        if len(source) != 1:
            raise APIError(422, "'inputs.source_sentence' must be one string", param="inputs.source_sentence")
        others, _ = texts(inputs.get("sentences"), "inputs.sentences", config.limits)
        if len(others) + 1 > config.limits.max_inputs:
            raise APIError(
                413,
                f"over the limit of {config.limits.max_inputs} inputs per request (--max-inputs)",
                param="inputs.sentences",
                code="max_inputs",
            )
        from ..inference.similarity import unit_rows

        embeddings = unit_rows((await embed(name, source + others))[0])
        return _json(embeddings[1:] @ embeddings[0])

    @app.get("/info")
    @handler("/info", _tei_error)
    async def tei_info(request: Request):
        from .. import __version__

        name = request.query_params.get("model", state.default_model)
        if name not in models:
            raise APIError(404, f"model {name!r} is not served here; served: {', '.join(models)}", param="model")
        encoder = models[name]
        return _json(
            {
                "model_id": name,
                "model_sha": None,
                "model_dtype": "float32",
                "model_type": {"embedding": {"pooling": encoder.settings.pooling}},
                "dimensions": encoder.dim,
                "max_concurrent_requests": None,
                "max_input_length": config.limits.max_chars,
                "max_client_batch_size": config.limits.max_inputs,
                "max_batch_requests": None,
                "max_batch_tokens": None,
                "tokenization_workers": config.threads,
                "version": __version__,
                "models": list(models),
                "index": None if state.index is None else {"source": state.index.source, "sentences": len(state.index)},
            }
        )

    @app.get("/health")
    @handler("/health", _tei_error, public=True)
    async def health(request: Request):
        return Response(b"", 200)

    @app.get("/metrics")
    @handler("/metrics", _tei_error)
    async def metrics(request: Request):
        return Response(state.metrics.render(), 200, media_type="text/plain; version=0.0.4; charset=utf-8")

    from .search import add_search_routes

    add_search_routes(app, state, handler, _tei_error, embed, body_of, model_of)
    return app


def base64_rows(embeddings: np.ndarray) -> list[str]:
    """Each row's little-endian float32 bytes in base64 (what OpenAI's encoding_format "base64" returns)."""
    raw = np.ascontiguousarray(embeddings, dtype="<f4").tobytes()
    width = embeddings.shape[1] * 4
    if width % 3 == 0:
        # Rows of a multiple of 3 bytes end on a base64 block boundary: one encode of the whole matrix, then slices.
        text = base64.b64encode(raw).decode("ascii")
        step = width // 3 * 4
        return [text[start : start + step] for start in range(0, len(text), step)]
    return [base64.b64encode(raw[start : start + width]).decode("ascii") for start in range(0, len(raw), width)]


def _check_key(request, key: str) -> None:
    given = request.headers.get("authorization", "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), key.encode()):
        raise APIError(401, "missing or wrong API key: send the header 'Authorization: Bearer KEY'", code="api_key")
