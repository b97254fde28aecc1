"""Reading and checking request bodies: every refusal is an `APIError` with a status and a message naming the limit
or the field, answered as JSON by the app.

Nothing here touches the file system: a request names a model by its served name only, never a path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import orjson


@dataclass
class Limits:
    """What one request may ask for."""

    max_inputs: int = 2048
    max_chars: int = 8192
    max_k: int = 100

    @property
    def max_body_bytes(self) -> int:
        # Room for every input at its longest, each character JSON-escaped (\\uXXXX, 6 bytes), and the fields around.
        return self.max_inputs * (6 * self.max_chars + 16) + 65536


class APIError(Exception):
    """A request refused: HTTP `status`, a message, and the OpenAI-style `param`/`code`."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers


async def read_body(request, limits: Limits, reserve: Callable[[int], None] | None = None) -> bytes:
    """The body of a JSON request, refused with 413 before it is read when Content-Length is over the limit (or once
    it grows past), and with 415 unless it is declared `application/json`: a page on another site can post
    `text/plain` without asking the browser first, never `application/json`.

    `reserve(n)` is told of the bytes before they are held (the declared length at once, else each chunk), and
    raises to refuse them.
    """
    limit = limits.max_body_bytes
    declared = request.headers.get("content-length")
    known = declared is not None and declared.isdigit()
    if known and int(declared) > limit:
        raise APIError(413, f"request body of {declared} bytes is over the limit of {limit} bytes", code="body_limit")
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "application/json":
        shown = repr(kind) if kind else "none"
        raise APIError(
            415, f"the body must be sent as 'Content-Type: application/json' (got {shown})", code="content_type"
        )
    if reserve is not None and known:
        reserve(int(declared))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise APIError(413, f"request body is over the limit of {limit} bytes", code="body_limit")
        if reserve is not None and not known and chunk:
            reserve(len(chunk))
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json(body: bytes) -> dict:
    """A JSON object, or 400 naming the parse error."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise APIError(400, f"malformed JSON: {error}", code="invalid_json") from None
    if not isinstance(value, dict):
        raise APIError(422, f"the body must be a JSON object, got {type(value).__name__}", code="invalid_type")
    return value


def texts(value, field: str, limits: Limits) -> tuple[list[str], bool]:
    """`(sentences, was_a_single_string)` of a string-or-list field, checked against the limits."""
    single = isinstance(value, str)
    items = [value] if single else value
    if not isinstance(items, list):
        message = f"'{field}' must be a string or a list of strings, got {_kind(value)}"
        raise APIError(422, message, param=field, code="invalid_type")
    if not items:
        raise APIError(422, f"'{field}' is an empty list; give at least one string", param=field, code="empty_input")
    if len(items) > limits.max_inputs:
        raise APIError(
            413,
            f"'{field}' has {len(items)} inputs, over the limit of {limits.max_inputs} inputs per request "
            "(--max-inputs)",
            param=field,
            code="max_inputs",
        )
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise APIError(
                422,
                f"'{field}'[{i}] is {_kind(item)}; only strings are accepted (no token ids: a psp model reads text "
                "with its own vocabulary, which another tokenizer's ids do not index)",
                param=field,
                code="invalid_type",
            )
        if len(item) > limits.max_chars:
            raise APIError(
                413,
                f"'{field}'[{i}] has {len(item)} characters, over the limit of {limits.max_chars} characters per "
                "input (--max-chars)",
                param=field,
                code="max_chars",
            )
        if not item.isascii():
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise APIError(422, f"'{field}'[{i}] is not valid Unicode", param=field, code="invalid_text") from None
    return items, single


def optional_int(body: dict, field: str, low: int, high: int) -> int | None:
    """An optional integer field within [low, high]."""
    value = body.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise APIError(422, f"'{field}' must be an integer, got {_kind(value)}", param=field, code="invalid_type")
    if not low <= value <= high:
        message = f"'{field}' must be between {low} and {high}, got {value}"
        raise APIError(422, message, param=field, code="out_of_range")
    return value


def optional_bool(body: dict, field: str, default: bool) -> bool:
    """An optional boolean field."""
    value = body.get(field)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise APIError(422, f"'{field}' must be true or false, got {_kind(value)}", param=field, code="invalid_type")
    return value


def choice(body: dict, field: str, allowed: tuple[str, ...], default: str | None) -> str | None:
    """An optional string field that must be one of `allowed` (compared case-insensitively)."""
    value = body.get(field)
    if value is None:
        return default
    if not isinstance(value, str) or value.lower() not in allowed:
        raise APIError(
            422, f"'{field}' must be one of {', '.join(allowed)}, got {value!r}", param=field, code="invalid_value"
        )
    return value.lower()


def _kind(value) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
