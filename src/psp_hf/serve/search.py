"""The search page (GET /) and its route (POST /search), present when `psp serve --index` gave an index."""

import html
import json
from importlib import resources

from .requests import APIError, optional_int


def page_html(model: str, sentences: int, source: str, needs_key: bool) -> str:
    """The page (package data page.html) with what it shows filled in."""
    template = resources.files("psp_hf.serve").joinpath("page.html").read_text(encoding="utf-8")
    settings = json.dumps({"model": model, "needsKey": needs_key}).replace("<", "\\u003c")
    return (
        template.replace("{{MODEL}}", html.escape(model))
        .replace("{{SENTENCES}}", f"{sentences:,}")
        .replace("{{SOURCE}}", html.escape(source))
        .replace("{{SETTINGS}}", settings)
    )


def add_search_routes(app, state, handler, on_error, embed, body_of, model_of) -> None:
    """GET / and POST /search on `app`; both answer 404 (JSON) when the server has no index."""
    import asyncio

    from fastapi import Request
    from fastapi.responses import HTMLResponse

    from .responses import json_response as _json

    def index_or_404():
        if state.index is None:
            raise APIError(404, "this server has no search index (start it with psp serve MODEL --index ...)")
        return state.index

    @app.get("/")
    @handler("GET /", on_error, public=True)
    async def page(request: Request):
        index = index_or_404()
        text = page_html(state.default_model, len(index), index.source, state.config.api_key is not None)
        return HTMLResponse(text)

    @app.post("/search")
    @handler("/search", on_error)
    async def search(request: Request):
        index = index_or_404()
        body = await body_of(request)
        # The index was built with the first model's embeddings: another model's queries would not match them.
        name = model_of(body, required=False)
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
        embeddings, _ = await embed(name, [query])
        loop = asyncio.get_running_loop()
        hits = await loop.run_in_executor(state.executor, index.search, embeddings[0], k)
        return _json(
            {
                "query": query,
                "model": name,
                "results": [{"row": h.row, "text": h.text, "cosine": round(h.cosine, 6)} for h in hits],
            }
        )
