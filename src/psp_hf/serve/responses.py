"""JSON answers of the server, written by orjson (numpy arrays directly, no per-float Python objects), and the two
error shapes: OpenAI's on `/v1/*`, text-embeddings-inference's everywhere else."""

from __future__ import annotations

import orjson

from .requests import APIError

# TEI's `error_type` of each status (what its clients read); the rest are validation errors.
_TEI_KINDS = {401: "Unauthorized", 429: "Overloaded", 500: "Backend", 503: "Overloaded"}
_OPENAI_KINDS = {401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error", 500: "server_error"}


def json_response(content, status: int = 200, headers: dict[str, str] | None = None):
    """A Starlette `Response` holding `content` as JSON."""
    from starlette.responses import Response

    body = orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)
    return Response(body, status, headers=headers, media_type="application/json")


def error_body(path: str, error: APIError) -> dict:
    """The error object a client of `path` expects: OpenAI's under /v1/, TEI's elsewhere."""
    if path.startswith("/v1/"):
        kind = _OPENAI_KINDS.get(error.status, "invalid_request_error")
        return {"error": {"message": error.message, "type": kind, "param": error.param, "code": error.code}}
    return {"error": error.message, "error_type": _TEI_KINDS.get(error.status, "Validation")}


def error_response(path: str, error: APIError):
    """`error` answered as JSON in the shape of `path`'s API, with its headers (Retry-After on 429 and 503)."""
    return json_response(error_body(path, error), error.status, error.headers)
