"""The test Hub server itself: ``HubServer`` starts it, holds its state and gives tests their helpers.

Tests use ``failing(...)`` to make it refuse requests, ``unique_repo_id()``, ``repo_files()`` and
``repo_exists()`` to check what was pushed without HTTP, and ``requests`` to see what the clients asked.
The JSON views (repo info, refs, commits) live here as they read the whole server state.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import tempfile
import threading
import uuid
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .handler import HubHandler
from .repos import USER, Commit, FailRule, Repo, card_data
from .state import HubState


class HubHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    hub: HubServer


class HubServer:
    """A running Hub-compatible server.

    Attributes:
        url: the endpoint to put in ``HF_ENDPOINT`` (``http://127.0.0.1:<port>``).
        cdn_url: the host LFS downloads are redirected to and LFS uploads are sent to
            (``http://localhost:<port>``: another origin, so clients treat it like the Hub's CDN).
        root: the storage folder (``blobs/<sha256>`` holds every stored file content).
        user: the user name every token authenticates as.
        tree_page_size: when set, tree listings are paginated with at most this many entries per page.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, port: int = 0) -> None:
        self._own_root = root is None
        self.root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="psp-hub-"))
        self.state = HubState(self.root)
        self.user = USER
        self.tree_page_size: int | None = None
        self._rules: list[FailRule] = []
        self._drops: list[FailRule] = []
        self._rules_lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []
        self._httpd = HubHTTPServer(("127.0.0.1", port), HubHandler)
        self._httpd.hub = self
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        # A different origin for LFS content when `localhost` is this very interface; otherwise the clients
        # simply follow a same-host redirect, which the server answers with the full Hub headers too.
        self.cdn_url = f"http://localhost:{self.port}" if _localhost_is_loopback() else self.url
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> HubServer:
        """Serve in a daemon thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever, name="hub-server", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the socket and remove the storage folder if the server created it."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def reset(self) -> None:
        """Forget every repo, stored file, failure rule and logged request.

        On the session-wide server this also wipes repos other tests (or session fixtures) created: prefer
        unique repo ids (:meth:`unique_repo_id`) to isolate tests.
        """
        with self.state.lock:
            self.state.repos.clear()
            shutil.rmtree(self.state.blob_dir, ignore_errors=True)
            self.state.blob_dir.mkdir(parents=True, exist_ok=True)
        with self._rules_lock:
            self._rules.clear()
            self._drops.clear()
            self.requests.clear()
        self.tree_page_size = None

    # -- test helpers ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def failing(
        self,
        status: int = 403,
        *,
        methods: str | tuple[str, ...] | None = None,
        path_contains: str | None = None,
        times: int | None = None,
        message: str = "The test Hub server refuses this request",
    ) -> Iterator[FailRule]:
        """Refuse matching requests with ``status`` (and a JSON error body) inside the ``with`` block.

        Args:
            status: HTTP status to answer. 4xx fail at once; 5xx (and 429) are retried by the clients'
                backoff (about 20 s for the upload endpoints), so prefer 4xx unless retries are the point.
            methods: only refuse these methods (``"POST"`` or a tuple); all by default. Use
                ``methods=("POST", "PUT", "DELETE")`` to refuse writes but keep downloads working.
            path_contains: only refuse URLs whose path contains this text (e.g. ``"/commit/"``).
            times: refuse only the first ``times`` matching requests.
            message: the ``X-Error-Message`` sent back.

        Yields the rule; ``rule.hits`` counts the refused requests.
        """
        if isinstance(methods, str):
            methods = (methods,)
        rule = FailRule(status, tuple(m.upper() for m in methods) if methods else None, path_contains, times, message)
        with self._rules_lock:
            self._rules.append(rule)
        try:
            yield rule
        finally:
            with self._rules_lock:
                self._rules.remove(rule)

    @contextlib.contextmanager
    def dropping(self, path_contains: str, *, after: int = 64, times: int | None = None) -> Iterator[FailRule]:
        """Inside the block, file downloads whose URL path contains ``path_contains`` send their headers and
        ``after`` bytes of the body, then close the connection: a connection dropped mid-download.

        ``times`` limits it to the first ``times`` such downloads; the rule's ``hits`` counts them.
        """
        rule = FailRule(0, ("GET",), path_contains, times, f"drop after {after} bytes")
        rule.drop_after = after
        with self._rules_lock:
            self._drops.append(rule)
        try:
            yield rule
        finally:
            with self._rules_lock:
                self._drops.remove(rule)

    def drop_rule(self, method: str, path: str) -> FailRule | None:
        """The dropping rule that applies to this download, if any (counted as a hit)."""
        with self._rules_lock:
            for rule in self._drops:
                if rule.matches(method, path):
                    return rule
        return None

    def unique_repo_id(self, name: str = "repo") -> str:
        """A fresh ``<user>/<name>-<random>`` repo id, so tests sharing the server never collide."""
        return f"{self.user}/{name}-{uuid.uuid4().hex[:8]}"

    def repo_files(self, repo_id: str, repo_type: str = "model", revision: str = "main") -> dict[str, bytes]:
        """Every file of a repo revision with its content, read straight from the store (no HTTP)."""
        with self.state.lock:
            repo = self.state.get_repo(repo_type, repo_id)
            commit = self.state.resolve(repo, revision)
            return {path: self.state.read_blob(entry.sha256) for path, entry in sorted(commit.files.items())}

    def repo_exists(self, repo_id: str, repo_type: str = "model") -> bool:
        """Whether the server holds this repo (no HTTP)."""
        return (repo_type, repo_id) in self.state.repos

    def whoami(self) -> dict[str, Any]:
        """The ``/api/whoami-v2`` answer for any token."""
        return {
            "type": "user",
            "id": hashlib.sha1(self.user.encode()).hexdigest()[:24],
            "name": self.user,
            "fullname": "PSP Tester",
            "email": f"{self.user}@example.invalid",
            "emailVerified": True,
            "canPay": False,
            "isPro": False,
            "periodEnd": None,
            "avatarUrl": f"{self.url}/avatars/{self.user}.svg",
            "orgs": [],
            "auth": {"type": "access_token", "accessToken": {"displayName": "tests", "role": "write"}},
        }

    # -- JSON views --------------------------------------------------------------------------------
    def info_json(self, repo: Repo, commit: Commit) -> dict[str, Any]:
        """The ``/api/{type}s/{id}[/revision/{rev}]`` answer (siblings always carry their metadata)."""
        siblings = []
        for path, entry in sorted(commit.files.items()):
            sibling: dict[str, Any] = {"rfilename": path, "size": entry.size, "blobId": entry.blob_id}
            if entry.lfs:
                sibling["lfs"] = {"size": entry.size, "sha256": entry.sha256, "pointerSize": entry.pointer_size}
            siblings.append(sibling)
        data: dict[str, Any] = {
            "_id": hashlib.sha1(f"{repo.repo_type}/{repo.repo_id}".encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "author": repo.repo_id.split("/")[0],
            "sha": commit.sha,
            "lastModified": commit.date,
            "createdAt": repo.created_at,
            "private": repo.private,
            "gated": False,
            "disabled": False,
            "likes": 0,
            "tags": [],
            "siblings": siblings,
            "usedStorage": sum(e.size for e in commit.files.values()),
        }
        readme = commit.files.get("README.md")
        card = card_data(self.state.read_blob(readme.sha256)) if readme is not None else None
        if card is not None:
            data["cardData"] = card
            tags = card.get("tags")
            data["tags"] = [str(t) for t in tags] if isinstance(tags, list) else []
        if repo.repo_type == "model":
            data.update({"modelId": repo.repo_id, "downloads": 0, "spaces": []})
            if card is not None and card.get("library_name"):
                data["library_name"] = card["library_name"]
            config = commit.files.get("config.json")
            if config is not None:
                with contextlib.suppress(ValueError):
                    parsed = json.loads(self.state.read_blob(config.sha256))
                    if isinstance(parsed, dict):
                        keys = ("architectures", "model_type", "auto_map")
                        data["config"] = {k: parsed[k] for k in keys if k in parsed}
        elif repo.repo_type == "dataset":
            data.update({"downloads": 0, "description": "", "citation": ""})
        else:
            data.update({"sdk": repo.sdk, "subdomain": repo.repo_id.replace("/", "-")})
        return data

    def refs_json(self, repo: Repo, include_prs: bool) -> dict[str, Any]:
        """The ``/api/{type}s/{id}/refs`` answer."""

        def ref(name: str, full: str, sha: str) -> dict[str, str]:
            return {"name": name, "ref": full, "targetCommit": sha}

        data: dict[str, Any] = {
            "branches": [ref(b, f"refs/heads/{b}", s) for b, s in repo.branches.items() if not b.startswith("refs/")],
            "converts": [],
            "tags": [ref(t, f"refs/tags/{t}", s) for t, s in repo.tags.items()],
        }
        if include_prs:
            data["pullRequests"] = [ref(b, b, s) for b, s in repo.branches.items() if b.startswith("refs/pr/")]
        return data

    def commits_json(self, repo: Repo, commit: Commit) -> list[dict[str, Any]]:
        """The ``/api/{type}s/{id}/commits/{rev}`` answer: history from ``commit``, newest first."""
        history = []
        current: Commit | None = commit
        while current is not None:
            history.append(
                {
                    "id": current.sha,
                    "title": current.title,
                    "message": current.message,
                    "authors": [{"user": self.user, "avatar": None}],
                    "date": current.date,
                }
            )
            current = repo.commits[current.parent] if current.parent else None
        return history

    # -- internals used by the handler -------------------------------------------------------------
    def log_request(self, method: str, path: str) -> None:
        with self._rules_lock:
            self.requests.append((method, path))

    def failing_rule(self, method: str, path: str) -> FailRule | None:
        with self._rules_lock:
            for rule in self._rules:
                if rule.matches(method, path):
                    return rule
        return None


def _localhost_is_loopback() -> bool:
    try:
        return socket.gethostbyname("localhost") == "127.0.0.1"
    except OSError:
        return False
