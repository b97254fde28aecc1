"""The OpenAPI document's shapes: the request bodies and answers of every route, as pydantic models.

They describe; they do not check. The handlers read bodies with `requests` (each refusal names its field and limit,
and a 64-sentence request skips pydantic's per-field work), and `tests/serve/test_openapi.py` validates the
document against real requests and answers, so the two cannot drift apart unnoticed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

Texts = str | list[str]


class _Open(BaseModel):
    # Clients send fields this server ignores (OpenAI's `user`): the document allows them.
    model_config = ConfigDict(extra="allow")


class EmbeddingsRequest(_Open):
    """OpenAI's POST /v1/embeddings body."""

    input: Texts = Field(description="a string or a list of strings (token ids are refused)")
    model: str | None = Field(None, description="a served model; with one model served any value (or none) means it")
    encoding_format: Literal["float", "base64"] | None = Field(None, description="rows as floats or base64 float32")
    dimensions: int | None = Field(None, ge=1, description="keep the first dimensions (Matryoshka truncation)")


class EmbeddingItem(BaseModel):
    object: Literal["embedding"]
    index: int
    embedding: list[float] | str = Field(description="floats, or little-endian float32 bytes in base64")


class Usage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingsResponse(BaseModel):
    object: Literal["list"]
    data: list[EmbeddingItem]
    model: str
    usage: Usage


class ModelCard(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelsResponse(BaseModel):
    object: Literal["list"]
    data: list[ModelCard]


class EmbedRequest(_Open):
    """text-embeddings-inference's POST /embed body (also POST /)."""

    inputs: Texts
    model: str | None = None
    normalize: bool | None = Field(None, description="unit-length rows (default true)")
    truncate: bool | None = Field(None, description="accepted; nothing is cut (a bag of pieces has no length limit)")
    truncation_direction: Literal["left", "right", "Left", "Right"] | None = None
    dimensions: int | None = Field(None, ge=1)


class EmbedResponse(RootModel[list[list[float]]]):
    """One row an input."""


class SimilarityInputs(BaseModel):
    source_sentence: str
    sentences: list[str]


class SimilarityRequest(_Open):
    inputs: SimilarityInputs
    model: str | None = None


class SimilarityResponse(RootModel[list[float]]):
    """The cosine of each sentence with the source sentence."""


class IndexInfo(BaseModel):
    source: str
    sentences: int


class InfoResponse(BaseModel):
    model_id: str
    model_sha: str | None
    model_dtype: str
    model_type: dict[str, Any]
    dimensions: int
    max_concurrent_requests: int | None
    max_input_length: int
    max_client_batch_size: int
    max_batch_requests: int | None
    max_batch_tokens: int | None
    max_batch_sentences: int
    max_queued_sentences: int
    max_body_bytes: int
    request_timeout_s: float | None
    tokenization_workers: int
    version: str
    models: list[str]
    index: IndexInfo | None


class SearchRequest(_Open):
    query: str
    k: int | None = Field(None, ge=1, description="results to return (default 10; at most the server's max_k)")
    model: str | None = None


class SearchHit(BaseModel):
    row: int
    text: str
    cosine: float


class SearchResponse(BaseModel):
    query: str
    model: str
    results: list[SearchHit]


class OpenAIErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIError(BaseModel):
    """The error shape of /v1/*."""

    error: OpenAIErrorDetail


class TEIError(BaseModel):
    """The error shape of every other route."""

    error: str
    error_type: str


REQUEST_MODELS = (EmbeddingsRequest, EmbedRequest, SimilarityRequest, SearchRequest)


def request_body(model: type[BaseModel]) -> dict:
    """A route's `openapi_extra` naming `model` as its JSON body (the handler reads the body itself)."""
    schema = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


# What a route that reads a JSON body and encodes can refuse: the body, the key, the model, the limits, the queue.
BODY_ROUTE_ERRORS = (400, 401, 404, 413, 415, 422, 429, 503)


def errors(shape: type[BaseModel], *statuses: int) -> dict:
    """A route's `responses` for the refusals it can answer, each in `shape`."""
    return {status: {"model": shape, "description": _REASONS[status]} for status in statuses}


_REASONS = {
    400: "malformed JSON",
    401: "missing or wrong API key",
    404: "no such model, or no search index",
    413: "over a size limit",
    415: "not application/json",
    422: "a field of the wrong type or value",
    429: "over --max-concurrent-requests, or the encode queue is full (Retry-After)",
    503: "over --request-timeout",
}


def openapi_document(app) -> dict:
    """FastAPI's document of `app`'s routes with the request bodies' schemas added to its components."""
    from fastapi.openapi.utils import get_openapi

    if app.openapi_schema is None:
        document = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = document.setdefault("components", {}).setdefault("schemas", {})
        for model in REQUEST_MODELS:
            schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(schema.pop("$defs", {}))
            components[model.__name__] = schema
        app.openapi_schema = document
    return app.openapi_schema
