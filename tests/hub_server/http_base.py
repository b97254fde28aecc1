"""HTTP plumbing of the test Hub: reading a request, refusing it on a failure rule, answering in JSON.

``BaseHandler`` reads the body (chunked or not) before anything else so keep-alive connections stay
usable, turns ``HubError`` into the Hub's error headers and body, and leaves routing to its subclasses
(``files.FilesHandler`` then ``handler.HubHandler``).
"""

from __future__ import annotations

import json
import traceback
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from .repos import HubError, Repo

if TYPE_CHECKING:
    from .server import HubHTTPServer, HubServer
    from .state import HubState


class BaseHandler(BaseHTTPRequestHandler):
    """Reads one request and answers it the Hub's way; subclasses route it (:meth:`_route`)."""

    protocol_version = "HTTP/1.1"  # keep-alive, like the Hub: every response carries a Content-Length
    server: HubHTTPServer

    # The clients send requests at a quick pace; default logging would flood the pytest output.
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature of the base class
        return

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        self._handle("GET")

    def do_HEAD(self) -> None:  # noqa: N802
        self._handle("HEAD")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")

    # -- plumbing ----------------------------------------------------------------------------------
    @property
    def hub(self) -> HubServer:
        return self.server.hub

    @property
    def state(self) -> HubState:
        return self.server.hub.state

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():  # trailers, then the final empty line
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self, method: str) -> None:
        split = urlsplit(self.path)
        self.query = parse_qs(split.query, keep_blank_values=True)
        # Read the body first, always: an error answered before reading it would break keep-alive.
        self.body = self._read_body()
        self.hub.log_request(method, split.path)
        try:
            rule = self.hub.failing_rule(method, split.path)
            if rule is not None:
                raise HubError(rule.status, rule.message)
            self._route(method, [s for s in split.path.split("/") if s])
        except HubError as err:
            self._send_error(method, err)
        except (BrokenPipeError, ConnectionResetError):
            # The client hung up mid-response (e.g. a streamed read stopped early): nothing left to answer.
            self.close_connection = True
        except (KeyError, ValueError, TypeError) as err:  # malformed client payloads
            self._send_error(method, HubError(400, f"Bad request: {err!r}"))
        except Exception as err:  # a bug in this server: say so loudly, in the response and on stderr
            traceback.print_exc()
            self._send_error(method, HubError(500, f"Test Hub server error: {err!r}"))

    def _send(
        self,
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
        head: bool = False,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if not head and body:
            self.wfile.write(body)

    def _send_json(self, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(data).encode(), headers)

    def _send_error(self, method: str, err: HubError) -> None:
        headers = dict(err.headers)
        # Header values must be one latin-1 line.
        one_line = " ".join(err.message.split())
        headers["X-Error-Message"] = one_line.encode("latin-1", "replace").decode("latin-1")
        if err.code:
            headers["X-Error-Code"] = err.code
        body = json.dumps({"error": err.message, **err.extra}).encode()
        self._send(err.status, body, headers, head=method == "HEAD")

    def _json_body(self) -> Any:
        return json.loads(self.body or b"{}")

    def _require_auth(self) -> None:
        if not self.headers.get("Authorization", "").startswith("Bearer "):
            raise HubError(401, "Invalid credentials in Authorization header")

    def _check_read_access(self, repo: Repo) -> None:
        if repo.private and not self.headers.get("Authorization"):
            raise HubError(401, f"Repository not found: {repo.repo_id}", "RepoNotFound")

    def _base(self) -> str:
        return self.hub.url

    def _route(self, method: str, segs: list[str]) -> None:
        """Answer ``method`` on the path segments ``segs`` (subclasses implement the endpoints)."""
        raise NotImplementedError
