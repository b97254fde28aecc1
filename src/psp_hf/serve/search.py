"""The search page (GET /) and its route (POST /search), present when `psp serve --index` gave an index."""

from __future__ import annotations

import asyncio
import html
import json
import re
from importlib import resources

from fastapi import Request
from fastapi.responses import HTMLResponse

from .requests import APIError, optional_int
from .responses import json_response
from .routing import Routes
from .schemas import BODY_ROUTE_ERRORS, SearchRequest, SearchResponse, TEIError, errors, request_body
from .state import state_of

routes = Routes("search")

_PLACEHOLDER = re.compile(r"\{\{(MODEL|SENTENCES|SOURCE|SETTINGS)\}\}")


def page_html(model: str, sentences: int, source: str, needs_key: bool) -> str:
    """The page (package data page.html) with what it shows filled in.

    One pass over the template: a value that holds a placeholder's text stays that text (it is never expanded
    again), and every value is escaped for where it lands (HTML text, or a JSON object inside a script).
    """
    template = resources.files("psp_hf.serve").joinpath("page.html").read_text(encoding="utf-8")
    # In a <script>, "<" could close it ("</script>"): JSON's \u003c keeps the value and the page's structure.
    settings = json.dumps({"model": model, "needsKey": needs_key}).replace("<", "\\u003c")
    values = {
        "MODEL": html.escape(model),
        "SENTENCES": f"{sentences:,}",
        "SOURCE": html.escape(source),
        "SETTINGS": settings,
    }
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)


def _index_of(request: Request):
    state = state_of(request)
    if state.index is None:
        raise APIError(404, "this server has no search index (start it with psp serve MODEL --index ...)")
    return state, state.index


@routes.get("/", summary="The search page (with --index; needs no key)", response_class=HTMLResponse)
async def page(request: Request):
    state, index = _index_of(request)
    # The index's file name only: its path on the server is nobody else's business.
    text = page_html(state.default_model, len(index), index.name, state.config.api_key is not None)
    return HTMLResponse(text)


@routes.post(
    "/search",
    summary="The nearest sentences of the index",
    openapi_extra=request_body(SearchRequest),
    responses={200: {"model": SearchResponse}, **errors(TEIError, *BODY_ROUTE_ERRORS)},
)
async def search(request: Request):
    state, index = _index_of(request)
    body = await state.body(request)
    # The index was built with the first model's embeddings: another model's queries would not match them.
    name = state.model_of(body, required=False)
    if name != state.default_model:
        raise APIError(
            422, f"the index holds {state.default_model!r}'s embeddings; search with that model", param="model"
        )
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise APIError(422, "'query' must be a non-empty string", param="query", code="invalid_type")
    limits = state.config.limits
    if len(query) > limits.max_chars:
        raise APIError(
            413,
            f"'query' has {len(query)} characters, over the limit of {limits.max_chars} "
            "characters per input (--max-chars)",
            param="query",
            code="max_chars",
        )
    k = optional_int(body, "k", 1, limits.max_k) or 10
    embeddings, _ = await state.embed(name, [query])
    loop = asyncio.get_running_loop()
    hits = await loop.run_in_executor(state.executor, index.search, embeddings[0], k)
    return json_response(
        {
            "query": query,
            "model": name,
            "results": [{"row": h.row, "text": h.text, "cosine": round(h.cosine, 6)} for h in hits],
        }
    )
