"""text-embeddings-inference's routes: POST /embed (and POST /, where InferenceClient posts), /similarity, GET
/info, /health and /metrics."""

from __future__ import annotations

import numpy as np
from fastapi import Request, Response

from .requests import APIError, choice, optional_bool, optional_int, texts
from .responses import json_response
from .routing import Routes
from .schemas import (
    BODY_ROUTE_ERRORS,
    EmbedRequest,
    EmbedResponse,
    InfoResponse,
    SimilarityRequest,
    SimilarityResponse,
    TEIError,
    errors,
    request_body,
)
from .state import state_of

routes = Routes("text-embeddings-inference")

_EMBED = {
    "openapi_extra": request_body(EmbedRequest),
    "responses": {200: {"model": EmbedResponse}, **errors(TEIError, *BODY_ROUTE_ERRORS)},
}


# TEI answers POST / like /embed for an embedding model: InferenceClient(base_url=...) posts there.
@routes.post("/embed", summary="Embed texts (text-embeddings-inference's API)", **_EMBED)
@routes.post("/", summary="Embed texts, as /embed (where huggingface_hub's InferenceClient posts)", **_EMBED)
async def embed(request: Request):
    state = state_of(request)
    body = await state.body(request)
    name = state.model_of(body, required=False)
    sentences, _ = texts(body.get("inputs"), "inputs", state.config.limits)
    normalize = optional_bool(body, "normalize", True)
    optional_bool(body, "truncate", False)  # inputs are never cut: a bag of pieces has no length limit
    choice(body, "truncation_direction", ("left", "right"), None)
    if body.get("prompt_name") is not None:
        raise APIError(422, "'prompt_name': psp models have no prompts", param="prompt_name", code="invalid_value")
    dim = optional_int(body, "dimensions", 1, state.models[name].dim)
    embeddings, _ = await state.embed(name, sentences)
    if dim is not None:
        embeddings = embeddings[:, :dim]
    if normalize:
        from ..inference.similarity import unit_rows

        embeddings = unit_rows(embeddings)
    return json_response(np.ascontiguousarray(embeddings))


@routes.post(
    "/similarity",
    summary="Cosines of sentences with a source sentence",
    openapi_extra=request_body(SimilarityRequest),
    responses={200: {"model": SimilarityResponse}, **errors(TEIError, *BODY_ROUTE_ERRORS)},
)
async def similarity(request: Request):
    state = state_of(request)
    limits = state.config.limits
    body = await state.body(request)
    name = state.model_of(body, required=False)
    inputs = body.get("inputs")
    if not isinstance(inputs, dict):
        raise APIError(422, "'inputs' must be an object with 'source_sentence' and 'sentences'", param="inputs")
    source, _ = texts(inputs.get("source_sentence"), "inputs.source_sentence", limits)
    if len(source) != 1:
        raise APIError(422, "'inputs.source_sentence' must be one string", param="inputs.source_sentence")
    others, _ = texts(inputs.get("sentences"), "inputs.sentences", limits)
    if len(others) + 1 > limits.max_inputs:
        raise APIError(
            413,
            f"over the limit of {limits.max_inputs} inputs per request (--max-inputs)",
            param="inputs.sentences",
            code="max_inputs",
        )
    from ..inference.similarity import unit_rows

    embeddings = unit_rows((await state.embed(name, source + others))[0])
    return json_response(embeddings[1:] @ embeddings[0])


@routes.get(
    "/info",
    summary="The model and the server's limits",
    responses={200: {"model": InfoResponse}, **errors(TEIError, 401, 404, 429)},
)
async def info(request: Request):
    from .. import __version__

    state = state_of(request)
    config = state.config
    name = request.query_params.get("model", state.default_model)
    if name not in state.models:
        raise APIError(404, f"model {name!r} is not served here; served: {', '.join(state.models)}", param="model")
    encoder = state.models[name]
    index = state.index
    return json_response(
        {
            "model_id": name,
            "model_sha": None,
            "model_dtype": "float32",
            "model_type": {"embedding": {"pooling": encoder.settings.pooling}},
            "dimensions": encoder.dim,
            "max_concurrent_requests": config.max_concurrent_requests,
            "max_input_length": config.limits.max_chars,
            "max_client_batch_size": config.limits.max_inputs,
            "max_batch_requests": None,
            "max_batch_tokens": None,
            "max_batch_sentences": config.max_batch_sentences,
            "max_queued_sentences": config.max_queued_sentences,
            "max_body_bytes": config.limits.max_body_bytes,
            "request_timeout_s": config.request_timeout,
            "tokenization_workers": config.threads,
            "version": __version__,
            "models": list(state.models),
            "index": None if index is None else {"source": index.name, "sentences": len(index)},
        }
    )


@routes.get("/health", summary="200 while the server runs (needs no key)", responses={200: {"description": "up"}})
async def health(request: Request):
    return Response(b"", 200)


@routes.get(
    "/metrics",
    summary="Prometheus metrics",
    responses={200: {"content": {"text/plain": {}}, "description": "text exposition format 0.0.4"}},
)
async def metrics(request: Request):
    text = state_of(request).metrics.render()
    return Response(text, 200, media_type="text/plain; version=0.0.4; charset=utf-8")
