"""The ASGI app: `create_app` assembles the routes (OpenAI's, text-embeddings-inference's, the search page), the
middleware (key, limits, timeout, metrics; CORS when asked) and the OpenAPI document; the handlers live in
`openai_api`, `tei_api` and `search`, at module level, reading the app's `ServerState`.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from .middleware import Gate
from .openai_api import base64_rows
from .requests import APIError
from .responses import error_response
from .state import ServeConfig, ServerState

__all__ = ["ServeConfig", "base64_rows", "create_app"]

logger = logging.getLogger(__name__)


def create_app(models: dict, config: ServeConfig | None = None, index=None):
    """A FastAPI app serving `models` (served name -> PSPEncoder; the first is the default) and `index` if given."""
    from fastapi import FastAPI
    from starlette.exceptions import HTTPException

    from .. import __version__
    from . import openai_api, search, tei_api
    from .schemas import openapi_document

    config = config or ServeConfig()
    if not models:
        raise ValueError("create_app needs at least one model")
    state = ServerState(models, config, index)

    @asynccontextmanager
    async def lifespan(app):
        state.start()
        yield
        await state.stop()

    app = FastAPI(
        title="psp serve",
        version=__version__,
        description="Sentence embeddings of psp models: OpenAI's and text-embeddings-inference's routes.",
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.psp = state
    app.openapi = lambda: openapi_document(app)
    for module in (openai_api, tei_api, search):
        module.routes.add_to(app)

    async def http_error(request, error: HTTPException):
        # Starlette's own refusals (no such route, a method the route lacks) in the API's JSON error shape.
        message = {404: f"no route {request.url.path}", 405: f"{request.method} is not allowed on {request.url.path}"}
        refusal = APIError(error.status_code, message.get(error.status_code, str(error.detail)), code="no_route")
        response = error_response(request.url.path, refusal)
        response.headers.update(error.headers or {})
        return response

    app.add_exception_handler(HTTPException, http_error)
    # Added first, so it runs inside CORS: a browser's preflight is answered before the key is asked for.
    app.add_middleware(Gate, state=state)
    if config.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=config.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
        )
    return app
