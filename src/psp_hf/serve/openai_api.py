"""OpenAI's embeddings routes: POST /v1/embeddings and GET /v1/models."""

from __future__ import annotations

import base64

import numpy as np
from fastapi import Request

from .requests import choice, optional_int, texts
from .responses import json_response
from .routing import Routes
from .schemas import (
    BODY_ROUTE_ERRORS,
    EmbeddingsRequest,
    EmbeddingsResponse,
    ModelsResponse,
    OpenAIError,
    errors,
    request_body,
)
from .state import state_of

routes = Routes("OpenAI")


@routes.post(
    "/v1/embeddings",
    summary="Embed texts (OpenAI's API)",
    openapi_extra=request_body(EmbeddingsRequest),
    responses={200: {"model": EmbeddingsResponse}, **errors(OpenAIError, *BODY_ROUTE_ERRORS)},
)
async def embeddings(request: Request):
    state = state_of(request)
    body = await state.body(request)
    name = state.model_of(body, required=True)
    sentences, _ = texts(body.get("input"), "input", state.config.limits)
    fmt = choice(body, "encoding_format", ("float", "base64"), "float")
    dim = optional_int(body, "dimensions", 1, state.models[name].dim)
    embeddings, counts = await state.embed(name, sentences)
    if dim is not None:
        embeddings = np.ascontiguousarray(embeddings[:, :dim])
    rows = base64_rows(embeddings) if fmt == "base64" else embeddings
    tokens = int(counts.sum())
    data = [{"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(rows)]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return json_response({"object": "list", "data": data, "model": name, "usage": usage})


@routes.get(
    "/v1/models",
    summary="The served models",
    responses={200: {"model": ModelsResponse}, **errors(OpenAIError, 401, 429)},
)
async def models(request: Request):
    state = state_of(request)
    data = [{"id": n, "object": "model", "created": state.started, "owned_by": "psp-hf"} for n in state.models]
    return json_response({"object": "list", "data": data})


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
