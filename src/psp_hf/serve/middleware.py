"""What stands around every route, as one ASGI middleware: the API key, the limit on requests answered at once, the
request timeout and the metrics.

Authentication is the rule and `PUBLIC_ROUTES` the exceptions: a route added to the app needs the key (when the
server has one) without a word about it in its handler. The public ones are the probes a load balancer or an
orchestrator calls without credentials (/health, as text-embeddings-inference keeps it open), the page (which asks
for the key itself and sends it with its searches) and the API's description. /metrics needs the key: it names the
models and the traffic (Prometheus sends a bearer token with `authorization: {credentials: KEY}`).
"""

from __future__ import annotations

import asyncio
import hmac
import time

from .requests import APIError
from .responses import error_response
from .state import ServerState

# (method, path) answered without the key.
PUBLIC_ROUTES = frozenset(
    {
        ("GET", "/health"),
        ("HEAD", "/health"),
        ("GET", "/"),
        ("HEAD", "/"),
        ("GET", "/openapi.json"),
        ("HEAD", "/openapi.json"),
        ("GET", "/docs"),
        ("HEAD", "/docs"),
    }
)
# Paths that neither count against --max-concurrent-requests nor time out: probes and scrapes still answer when
# the server is full, which is when they matter.
UNLIMITED_PATHS = frozenset({"/health", "/metrics"})

_timeout = getattr(asyncio, "timeout", None)  # Python 3.11+

_KEY_MESSAGE = "missing or wrong API key: send the header 'Authorization: Bearer KEY'"


class Gate:
    """The ASGI middleware of `create_app`: key, concurrency limit, timeout and metrics, in that order."""

    def __init__(self, app, state: ServerState) -> None:
        self.app = app
        self.state = state
        config = state.config
        # Compared as bytes: HTTP headers are bytes, and a key outside ASCII is sent as its UTF-8 bytes.
        self.key = None if config.api_key is None else b"bearer " + config.api_key.encode("utf-8")
        self.limit = config.max_concurrent_requests
        self.timeout = config.request_timeout
        self.active = 0  # limited requests being answered
        hosts = config.allowed_hosts
        self.hosts = None if hosts is None or "*" in hosts else frozenset(host_name(h.encode()) for h in hosts)
        self._labels: dict[tuple[str, str], str] | None = None

    def _label(self, scope) -> str:
        """The route's name in the metrics: its path (methods told apart where a path has two), or "other", so
        that scanners' paths cannot grow the metrics without bound."""
        app = scope.get("app")
        if app is None:
            return "other"
        if self._labels is None:
            methods: dict[str, set[str]] = {}
            for route in app.routes:
                methods.setdefault(route.path, set()).update(getattr(route, "methods", None) or {"GET"})
            self._labels = {}
            for path, names in methods.items():
                for method in names:
                    shared = len(names - {"HEAD"}) > 1 and method != "POST"
                    self._labels[(method, path)] = f"{method} {path}" if shared else path
        return self._labels.get((scope["method"], scope["path"]), "other")

    def _host_allowed(self, scope) -> bool:
        for name, value in scope["headers"]:
            if name == b"host":
                return host_name(value) in self.hosts
        return False

    def _authorised(self, scope) -> bool:
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, token = value.strip().partition(b" ")
                given = scheme.lower() + b" " + token.strip()
                return hmac.compare_digest(given, self.key)
        return False

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = self.state
        path = scope["path"]
        start = time.perf_counter()
        response_status = 500
        started = False

        async def send_and_note(message) -> None:
            nonlocal response_status, started
            if message["type"] == "http.response.start":
                response_status, started = message["status"], True
            await send(message)

        state.metrics.in_flight += 1
        try:
            error = None
            limited = path not in UNLIMITED_PATHS
            if self.hosts is not None and not self._host_allowed(scope):
                error = APIError(
                    400,
                    "the Host header names another server; start it with --allowed-hosts to accept that name",
                    code="host_not_allowed",
                )
            elif self.key is not None and (scope["method"], path) not in PUBLIC_ROUTES and not self._authorised(scope):
                error = APIError(401, _KEY_MESSAGE, code="api_key")
            elif limited and self.limit is not None and self.active >= self.limit:
                error = APIError(
                    429,
                    f"the server is answering {self.active} requests, its limit (--max-concurrent-requests); "
                    "retry later",
                    code="too_many_requests",
                    headers={"Retry-After": "1"},
                )
            if error is not None:
                await error_response(path, error)(scope, receive, send_and_note)
            elif not limited:
                await self.app(scope, receive, send_and_note)
            else:
                await self._limited(scope, receive, send_and_note, lambda: started)
        except asyncio.CancelledError:
            # Cancelled: the shutdown's grace period ended with the request still running. It gets a JSON answer
            # (the server would send a plain-text 500), then the cancellation goes on.
            if not started:
                error = APIError(
                    503, "the server is shutting down; retry", code="shutting_down", headers={"Retry-After": "1"}
                )
                await error_response(path, error)(scope, receive, send_and_note)
            raise
        finally:
            state.release(scope)
            state.metrics.in_flight -= 1
            state.metrics.request_done(self._label(scope), response_status, time.perf_counter() - start)

    async def _limited(self, scope, receive, send, started) -> None:
        """A request counted against the limit, within the timeout."""
        state = self.state
        self.active += 1
        state.arriving += 1
        try:
            if self.timeout is None:
                await self.app(scope, receive, send)
            elif _timeout is not None:
                # asyncio.timeout cancels this task at the deadline: no second task per request, as wait_for makes.
                async with _timeout(self.timeout):
                    await self.app(scope, receive, send)
            else:  # Python 3.10
                await asyncio.wait_for(self.app(scope, receive, send), self.timeout)
        except (TimeoutError, asyncio.TimeoutError):
            if started():  # the answer is on its way: nothing else can be sent
                return
            error = APIError(
                503,
                f"the request took longer than {self.timeout:g} s (--request-timeout)",
                code="timeout",
                headers={"Retry-After": "1"},
            )
            await error_response(scope["path"], error)(scope, receive, send)
        finally:
            state.arriving -= 1
            self.active -= 1


def host_name(value: bytes) -> str:
    """A Host header's (or an --allowed-hosts entry's) name: lower case, without the port and IPv6 brackets."""
    text = value.decode("latin-1").strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text
    return text.rpartition(":")[0] if text.count(":") == 1 else text
