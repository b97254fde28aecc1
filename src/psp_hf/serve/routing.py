"""The route class every handler is registered with: FastAPI's `APIRoute` (so the route has its OpenAPI entry)
calling the handler with the bare request, without FastAPI's per-request dependency and body machinery, which
none of the handlers use: they read their body with `requests` and answer a finished `Response`.

A refusal raised as `APIError` is answered as JSON in the shape of the route's API; any other exception is logged
and answered as a JSON 500, so that no traceback reaches a client.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from fastapi.routing import APIRoute

from .requests import APIError
from .responses import error_response

logger = logging.getLogger(__name__)


class Route(APIRoute):
    """An APIRoute whose handler takes the request and returns its Response."""

    def get_route_handler(self) -> Callable[..., Awaitable]:
        endpoint, path = self.endpoint, self.path

        async def handle(request):
            try:
                return await endpoint(request)
            except APIError as error:
                return error_response(path, error)
            except Exception:
                logger.exception("%s %s failed", request.method, path)
                return error_response(path, APIError(500, "internal error; see the server's log", code="internal"))

        return handle


class Routes:
    """A module's routes, declared at module level with `get`/`post` and added to an app by `create_app` (each as a
    `Route` in the app's own route list, where the middleware's metrics find its path)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.declared: list[tuple[str, list[str], Callable, dict]] = []

    def route(self, path: str, methods: list[str], **options) -> Callable[[Callable], Callable]:
        def declare(endpoint: Callable) -> Callable:
            self.declared.append((path, methods, endpoint, options))
            return endpoint

        return declare

    def get(self, path: str, **options) -> Callable[[Callable], Callable]:
        """A GET route; HEAD answers it too (HTTP asks for HEAD wherever GET is; load balancers probe with it)."""
        declare_get = self.route(path, ["GET"], **options)
        # HEAD: the same handler (the server sends no body); out of the document, which has its GET.
        declare_head = self.route(path, ["HEAD"], **{**options, "include_in_schema": False})
        return lambda endpoint: declare_head(declare_get(endpoint))

    def post(self, path: str, **options) -> Callable[[Callable], Callable]:
        return self.route(path, ["POST"], **options)

    def add_to(self, app) -> None:
        for path, methods, endpoint, options in self.declared:
            app.router.add_api_route(
                path, endpoint, methods=methods, tags=[self.tag], route_class_override=Route, **options
            )
