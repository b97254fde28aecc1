"""A Hugging Face Hub-compatible HTTP server for the tests, on 127.0.0.1.

The real client libraries (huggingface_hub, transformers, datasets, sentence-transformers) talk to it
through ``HF_ENDPOINT``: it implements the parts of the Hub protocol they use to create repos, commit
files (regular and LFS uploads), list trees, read repo info and download files (with redirects to a
"CDN" host for LFS files and HTTP ranges). Nothing in the product code knows about it.

State lives in memory (repos, branches, commits); file contents live on disk under ``root`` in a
content-addressed store (``blobs/<sha256>``). Every commit is a full snapshot of its files, so any
commit sha can be read back.

Only the standard library is used, so the server can also run outside pytest:
``python tests/hub_server.py`` prints the endpoint and serves until interrupted.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import fnmatch
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import threading
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

#: The user every token authenticates as; repos created without a namespace go there.
USER = "psp-tester"

#: Files at least this large are stored with LFS, like on the Hub.
LFS_SIZE_THRESHOLD = 10 * 1024 * 1024

#: Page size of tree listings (the Hub uses 1000, and 50 when ``expand=True``).
TREE_PAGE_SIZE = 1000
TREE_PAGE_SIZE_EXPANDED = 50

_PLURAL_TO_TYPE = {"models": "model", "datasets": "dataset", "spaces": "space"}
_URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}
_COMMIT_SHA = re.compile(r"[0-9a-f]{7,40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")

# The .gitattributes a new Hub repo starts with: files matching these patterns are committed through LFS.
_LFS_PATTERN_TEXT = """
*.7z *.arrow *.bin *.bz2 *.ckpt *.ftz *.gz *.h5 *.joblib *.lfs.* *.mlmodel *.model *.msgpack *.npy *.npz
*.onnx *.ot *.parquet *.pb *.pickle *.pkl *.pt *.pth *.rar *.safetensors saved_model/**/* *.tar.* *.tar
*.tflite *.tgz *.wasm *.xz *.zip *.zst *tfevents*
"""
_DATASET_LFS_PATTERN_TEXT = "*.mp3 *.ogg *.wav *.flac *.jpg *.jpeg *.png *.webp *.gif *.mp4"
_LFS_PATTERNS = _LFS_PATTERN_TEXT.split()
_DATASET_LFS_PATTERNS = _DATASET_LFS_PATTERN_TEXT.split()


class HubError(Exception):
    """An HTTP error answered the way the Hub does (``X-Error-Code`` / ``X-Error-Message`` headers)."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})  # more fields of the JSON error body


@dataclass(frozen=True)
class FileEntry:
    """One file of a commit: its content (by sha256) and how git would see it."""

    sha256: str
    size: int
    lfs: bool
    blob_id: str  # git oid: of the content for regular files, of the LFS pointer for LFS files

    @property
    def pointer_size(self) -> int:
        """Size in bytes of the LFS pointer file git stores for an LFS entry."""
        return len(_lfs_pointer(self.sha256, self.size))


@dataclass
class Commit:
    """A commit: a full snapshot of the repo's files plus its metadata."""

    sha: str
    parent: str | None
    title: str
    message: str
    date: str
    files: dict[str, FileEntry]


@dataclass
class Repo:
    """A repo: its commits, branches and tags."""

    repo_type: str
    repo_id: str
    private: bool
    created_at: str
    sdk: str | None = None
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    next_pr: int = 1

    @property
    def url_path(self) -> str:
        """Path of the repo's web page, e.g. ``datasets/user/name``."""
        return _URL_PREFIX[self.repo_type] + self.repo_id


@dataclass
class FailRule:
    """Makes the server refuse matching requests (see :meth:`HubServer.failing`)."""

    status: int
    methods: tuple[str, ...] | None
    path_contains: str | None
    times: int | None
    message: str
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        """Whether this rule refuses ``method path`` (and counts the refusal)."""
        if self.methods is not None and method not in self.methods:
            return False
        if self.path_contains is not None and self.path_contains not in path:
            return False
        if self.times is not None and self.hits >= self.times:
            return False
        self.hits += 1
        return True


def _now() -> str:
    now = _dt.datetime.now(_dt.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def _default_gitattributes(repo_type: str) -> bytes:
    patterns = _LFS_PATTERNS + (_DATASET_LFS_PATTERNS if repo_type == "dataset" else [])
    return "".join(f"{p} filter=lfs diff=lfs merge=lfs -text\n" for p in patterns).encode()


def _lfs_patterns(gitattributes: bytes) -> list[str]:
    patterns = []
    for line in gitattributes.decode("utf-8", "replace").splitlines():
        parts = line.split()
        if len(parts) >= 2 and not parts[0].startswith("#") and "filter=lfs" in parts[1:]:
            patterns.append(parts[0])
    return patterns


def _matches_any(path: str, patterns: list[str]) -> bool:
    basename = path.rsplit("/", 1)[-1]
    for pattern in patterns:
        # Git matches slash-free patterns against the basename and the others against the full path.
        target = path if "/" in pattern else basename
        if fnmatch.fnmatchcase(target, pattern.lstrip("/")):
            return True
    return False


def _clean_path(path: str) -> str:
    path = path.strip("/")
    if not path or any(part in ("", ".", "..") for part in path.split("/")):
        raise HubError(400, f"Invalid path in repo: {path!r}", "InvalidPath")
    return path


def _card_data(readme: bytes) -> dict[str, Any] | None:
    """The YAML metadata block of a README.md, as the Hub returns it in ``cardData``."""
    text = readme.decode("utf-8", "replace")
    match = re.match(r"^---\s*\n(.*?)\n---\s*(\n|$)", text, re.DOTALL)
    if match is None:
        return None
    try:
        import yaml  # optional: only used to echo the card metadata back
    except ImportError:
        return None
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


class HubState:
    """Repos and blob store of the server; every public method is thread-safe."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.blob_dir = root / "blobs"
        self.blob_dir.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self.repos: dict[tuple[str, str], Repo] = {}

    # -- blobs -------------------------------------------------------------------------------------
    def blob_path(self, sha256: str) -> Path:
        """Where the content with this sha256 is stored."""
        return self.blob_dir / sha256

    def has_blob(self, sha256: str, size: int | None = None) -> bool:
        """Whether the store holds this content (of this size, when given)."""
        if not _SHA256.fullmatch(sha256):  # also keeps client-sent oids from naming paths outside the store
            return False
        path = self.blob_path(sha256)
        return path.is_file() and (size is None or path.stat().st_size == size)

    def put_blob(self, data: bytes) -> str:
        """Store ``data`` (atomically) and return its sha256."""
        sha256 = hashlib.sha256(data).hexdigest()
        path = self.blob_path(sha256)
        if not path.is_file():
            fd, tmp = tempfile.mkstemp(dir=self.blob_dir, prefix=".upload-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        return sha256

    def read_blob(self, sha256: str) -> bytes:
        """The content stored under ``sha256``."""
        return self.blob_path(sha256).read_bytes()

    # -- repos -------------------------------------------------------------------------------------
    def get_repo(self, repo_type: str, repo_id: str) -> Repo:
        """The repo, or a RepoNotFound error."""
        repo = self.repos.get((repo_type, repo_id))
        if repo is None:
            raise HubError(404, f"Repository not found: {repo_type} {repo_id}", "RepoNotFound")
        return repo

    def create_repo(self, repo_type: str, repo_id: str, private: bool, sdk: str | None = None) -> Repo:
        """Create a repo with an initial commit holding the default ``.gitattributes``."""
        with self.lock:
            if (repo_type, repo_id) in self.repos:
                raise HubError(409, f"You already created this {repo_type} repo: {repo_id}")
            repo = Repo(repo_type=repo_type, repo_id=repo_id, private=private, created_at=_now(), sdk=sdk)
            content = _default_gitattributes(repo_type)
            entry = FileEntry(self.put_blob(content), len(content), False, _git_blob_id(content))
            self._add_commit(repo, "main", None, {".gitattributes": entry}, "initial commit", "")
            self.repos[(repo_type, repo_id)] = repo
            return repo

    def _add_commit(
        self, repo: Repo, branch: str, parent: str | None, files: dict[str, FileEntry], title: str, message: str
    ) -> Commit:
        date = _now()
        manifest = json.dumps({p: e.blob_id for p, e in sorted(files.items())})
        seed = f"{repo.repo_type}/{repo.repo_id}\n{parent}\n{title}\n{date}\n{uuid.uuid4()}\n{manifest}"
        commit = Commit(hashlib.sha1(seed.encode()).hexdigest(), parent, title, message, date, dict(files))
        repo.commits[commit.sha] = commit
        repo.branches[branch] = commit.sha
        return commit

    def resolve(self, repo: Repo, revision: str) -> Commit:
        """The commit a branch, tag, (abbreviated) commit sha or ``refs/...`` name points to."""
        rev = unquote(revision)
        for prefix, refs in (("refs/heads/", repo.branches), ("refs/tags/", repo.tags)):
            if rev.startswith(prefix) and rev[len(prefix) :] in refs:
                return repo.commits[refs[rev[len(prefix) :]]]
        if rev in repo.branches:
            return repo.commits[repo.branches[rev]]
        if rev in repo.tags:
            return repo.commits[repo.tags[rev]]
        if rev in repo.commits:
            return repo.commits[rev]
        if _COMMIT_SHA.fullmatch(rev):
            found = [sha for sha in repo.commits if sha.startswith(rev)]
            if len(found) == 1:
                return repo.commits[found[0]]
        raise HubError(404, f"Invalid rev id: {rev}", "RevisionNotFound")

    def commit(
        self,
        repo: Repo,
        revision: str,
        header: dict[str, Any],
        operations: list[dict[str, Any]],
        create_pr: bool,
    ) -> tuple[Commit, int | None]:
        """Apply commit operations (``file``, ``lfsFile``, ``deletedFile``, ``deletedFolder``) to a branch."""
        with self.lock:
            branch = unquote(revision)
            if branch.startswith("refs/heads/"):
                branch = branch[len("refs/heads/") :]
            pr_num = None
            if create_pr:
                base = self.resolve(repo, branch)
                pr_num = repo.next_pr
                repo.next_pr += 1
                branch = f"refs/pr/{pr_num}"
                repo.branches[branch] = base.sha
            if branch not in repo.branches:
                raise HubError(404, f"Invalid rev id: {branch} (not a branch)", "RevisionNotFound")
            head = repo.commits[repo.branches[branch]]
            parent = header.get("parentCommit")
            if parent and not head.sha.startswith(parent):
                raise HubError(412, "A commit has happened since. Please refresh and try again.")
            files = dict(head.files)
            for op in operations:
                self._apply(files, op["key"], op.get("value") or {})
            title = str(header.get("summary") or "").strip() or "Commit"
            commit = self._add_commit(repo, branch, head.sha, files, title, str(header.get("description") or ""))
            return commit, pr_num

    def _apply(self, files: dict[str, FileEntry], key: str, value: dict[str, Any]) -> None:
        if key == "file":
            path = _clean_path(value["path"])
            if value.get("encoding", "base64") != "base64":
                raise HubError(400, f"Unsupported encoding {value.get('encoding')!r} for {path}")
            data = base64.b64decode(value.get("content", ""))
            files[path] = FileEntry(self.put_blob(data), len(data), False, _git_blob_id(data))
        elif key == "lfsFile":
            path = _clean_path(value["path"])
            oid = str(value.get("oid", ""))
            if not self.has_blob(oid, value.get("size")):
                raise HubError(400, f"LFS object {oid} for {path} was not uploaded (or has the wrong size)")
            size = self.blob_path(oid).stat().st_size
            files[path] = FileEntry(oid, size, True, _git_blob_id(_lfs_pointer(oid, size)))
        elif key == "deletedFile":
            path = _clean_path(value["path"])
            if path not in files:
                raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
            del files[path]
        elif key == "deletedFolder":
            folder = _clean_path(value["path"]) + "/"
            doomed = [p for p in files if p.startswith(folder)]
            if not doomed:
                raise HubError(404, f"A folder with this name doesn't exist: {folder}", "EntryNotFound")
            for path in doomed:
                del files[path]
        else:
            raise HubError(400, f"Unknown commit operation {key!r}")

    def upload_mode(self, commit: Commit, path: str, size: int, sample: bytes, repo_type: str) -> str:
        """``lfs`` or ``regular``, decided like the Hub: size, ``.gitattributes`` patterns, binary content."""
        attributes = commit.files.get(".gitattributes")
        patterns = (
            _lfs_patterns(self.read_blob(attributes.sha256))
            if attributes is not None
            else _lfs_patterns(_default_gitattributes(repo_type))
        )
        if size >= LFS_SIZE_THRESHOLD or _matches_any(path, patterns) or b"\0" in sample:
            return "lfs"
        return "regular"

    def last_commit(self, repo: Repo, commit: Commit, path: str) -> Commit:
        """The most recent ancestor of ``commit`` that changed ``path`` (a file or a folder)."""

        def view(c: Commit) -> Any:
            if path in c.files:
                return c.files[path].blob_id
            return sorted((p, e.blob_id) for p, e in c.files.items() if p.startswith(path + "/"))

        current = commit
        while current.parent is not None:
            parent = repo.commits[current.parent]
            if view(parent) != view(current):
                return current
            current = parent
        return current


def _tree_id(commit: Commit, folder: str) -> str:
    items = sorted(f"{p}:{e.blob_id}" for p, e in commit.files.items() if p.startswith(folder + "/"))
    return hashlib.sha1("\n".join(items).encode()).hexdigest()


def _folders(commit: Commit) -> set[str]:
    folders = set()
    for path in commit.files:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            folders.add("/".join(parts[:i]))
    return folders


class _Handler(BaseHTTPRequestHandler):
    """Routes one request to the Hub endpoint it imitates."""

    protocol_version = "HTTP/1.1"  # keep-alive, like the Hub: every response carries a Content-Length
    server: _HubHTTPServer

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
        self.hub._log_request(method, split.path)
        try:
            rule = self.hub._failing_rule(method, split.path)
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

    # -- routing -----------------------------------------------------------------------------------
    def _route(self, method: str, segs: list[str]) -> None:
        if not segs:
            raise HubError(404, "Not found")
        if segs[0] == "api":
            self._route_api(method, segs[1:])
            return
        if segs[0] == "lfs-upload" and method == "PUT" and len(segs) == 2:
            self._lfs_upload(segs[1])
            return
        if segs[0] == "lfs-verify" and method == "POST" and len(segs) == 2:
            self._lfs_verify(segs[1])
            return
        if segs[0] == "cdn" and method in ("GET", "HEAD") and len(segs) == 2:
            self._serve_cdn(method, segs[1])
            return
        repo_type = "model"
        if segs[0] in ("datasets", "spaces"):
            repo_type = _PLURAL_TO_TYPE[segs[0]]
            segs = segs[1:]
        if len(segs) >= 2 and segs[1].endswith(".git") and segs[2:] == ["info", "lfs", "objects", "batch"]:
            if method != "POST":
                raise HubError(405, "Method not allowed")
            self._lfs_batch(repo_type, f"{unquote(segs[0])}/{unquote(segs[1])[: -len('.git')]}")
            return
        if len(segs) >= 5 and segs[2] == "resolve" and method in ("GET", "HEAD"):
            repo_id = f"{unquote(segs[0])}/{unquote(segs[1])}"
            rest = segs[3:]
            # `refs/pr/N` and `refs/convert/x` may come unquoted (HfFileSystem keeps their slashes).
            n_rev = 3 if unquote(rest[0]) == "refs" and len(rest) > 3 else 1
            revision = "/".join(unquote(s) for s in rest[:n_rev])
            self._resolve(method, repo_type, repo_id, revision, "/".join(unquote(s) for s in rest[n_rev:]))
            return
        raise HubError(404, f"Not found: {self.path}")

    def _route_api(self, method: str, segs: list[str]) -> None:
        if segs == ["whoami-v2"] and method == "GET":
            self._require_auth()
            self._send_json(self.hub.whoami())
            return
        if segs == ["agent-harnesses"] and method == "GET":
            self._send_json({"standardEnvVars": [], "harnesses": {}})
            return
        if segs == ["validate-yaml"] and method == "POST":
            self._send_json({"errors": [], "warnings": []})
            return
        if len(segs) == 2 and segs[0] == "repos":
            self._require_auth()
            handlers = {"create": self._create_repo, "delete": self._delete_repo, "move": self._move_repo}
            if segs[1] not in handlers or method != {"delete": "DELETE"}.get(segs[1], "POST"):
                raise HubError(404, f"Not found: {self.path}")
            handlers[segs[1]]()
            return
        if len(segs) >= 3 and segs[0] in _PLURAL_TO_TYPE:
            repo_type = _PLURAL_TO_TYPE[segs[0]]
            repo_id = f"{unquote(segs[1])}/{unquote(segs[2])}"
            action = segs[3] if len(segs) > 3 else None
            rest = "/".join(unquote(s) for s in segs[4:])
            self._repo_api(method, repo_type, repo_id, action, rest, segs[4:])
            return
        raise HubError(404, f"Not found: {self.path}")

    def _repo_api(
        self, method: str, repo_type: str, repo_id: str, action: str | None, rest: str, raw_rest: list[str]
    ) -> None:
        state = self.state
        with state.lock:
            repo = state.get_repo(repo_type, repo_id)
            self._check_read_access(repo)
            if action is None and method == "GET":
                self._send_json(self.hub.info_json(repo, state.resolve(repo, "main")))
            elif action == "revision" and method == "GET" and rest:
                self._send_json(self.hub.info_json(repo, state.resolve(repo, rest)))
            elif action == "tree" and method == "GET" and raw_rest:
                self._tree(repo, unquote(raw_rest[0]), "/".join(unquote(s) for s in raw_rest[1:]))
            elif action == "paths-info" and method == "POST" and rest:
                self._paths_info(repo, rest)
            elif action == "refs" and method == "GET":
                self._send_json(self.hub.refs_json(repo, include_prs=bool(self.query.get("include_prs"))))
            elif action == "commits" and method == "GET":
                commit = state.resolve(repo, rest or "main")
                self._send_json(self.hub.commits_json(repo, commit))
            elif action == "preupload" and method == "POST":
                self._require_auth()
                self._preupload(repo, rest or "main")
            elif action == "commit" and method == "POST":
                self._require_auth()
                self._commit(repo, rest or "main")
            elif action == "branch" and method in ("POST", "DELETE") and rest:
                self._require_auth()
                self._branch(method, repo, rest)
            elif action == "tag" and method in ("POST", "DELETE") and rest:
                self._require_auth()
                self._tag(method, repo, rest)
            elif action == "settings" and method == "PUT":
                self._require_auth()
                body = self._json_body()
                if "visibility" in body:
                    repo.private = body["visibility"] != "public"
                elif "private" in body:
                    repo.private = bool(body["private"])
                self._send_json({})
            else:
                raise HubError(404, f"Not found: {self.path}")

    # -- repos -------------------------------------------------------------------------------------
    def _create_repo(self) -> None:
        body = self._json_body()
        repo_type = body.get("type") or "model"
        if repo_type not in _URL_PREFIX:
            raise HubError(400, f"Invalid repo type: {repo_type}")
        name = str(body.get("name") or "")
        if not re.fullmatch(r"[\w.-]{1,96}", name):
            raise HubError(400, f"Invalid repo name: {name!r}")
        repo_id = f"{body.get('organization') or USER}/{name}"
        visibility = body.get("visibility")
        private = visibility in ("private", "protected") if visibility is not None else bool(body.get("private"))
        url = f"{self._base()}/{_URL_PREFIX[repo_type]}{repo_id}"
        try:
            self.state.create_repo(repo_type, repo_id, private, body.get("sdk"))
        except HubError as err:
            err.extra["url"] = url  # the Hub tells where the existing repo is; create_repo(exist_ok=True) reads it
            raise
        self._send_json({"url": url, "name": repo_id, "id": uuid.uuid4().hex})

    def _delete_repo(self) -> None:
        body = self._json_body()
        repo_id = f"{body.get('organization') or USER}/{body.get('name')}"
        repo_type = body.get("type") or "model"
        with self.state.lock:
            self.state.get_repo(repo_type, repo_id)
            del self.state.repos[(repo_type, repo_id)]
        self._send_json({})

    def _move_repo(self) -> None:
        body = self._json_body()
        repo_type = body.get("type") or "model"
        src, dst = str(body.get("fromRepo")), str(body.get("toRepo"))
        with self.state.lock:
            repo = self.state.get_repo(repo_type, src)
            if (repo_type, dst) in self.state.repos:
                raise HubError(409, f"Repository {dst} already exists")
            del self.state.repos[(repo_type, src)]
            repo.repo_id = dst
            self.state.repos[(repo_type, dst)] = repo
        self._send_json({})

    def _branch(self, method: str, repo: Repo, branch: str) -> None:
        if method == "DELETE":
            if branch not in repo.branches:
                raise HubError(404, f"Invalid rev id: {branch}", "RevisionNotFound")
            if branch == "main":
                raise HubError(403, "Cannot delete the default branch")
            del repo.branches[branch]
        else:
            if branch in repo.branches:
                raise HubError(409, f"Reference already exists: refs/heads/{branch}")
            start = self.state.resolve(repo, self._json_body().get("startingPoint") or "main")
            repo.branches[branch] = start.sha
        self._send_json({})

    def _tag(self, method: str, repo: Repo, name: str) -> None:
        if method == "DELETE":
            if name not in repo.tags:
                raise HubError(404, f"Invalid rev id: {name}", "RevisionNotFound")
            del repo.tags[name]
        else:
            tag = str(self._json_body().get("tag") or "")
            if not tag:
                raise HubError(400, "Missing tag name")
            if tag in repo.tags:
                raise HubError(409, f"Tag already exists: {tag}")
            repo.tags[tag] = self.state.resolve(repo, name).sha
        self._send_json({})

    # -- listing -----------------------------------------------------------------------------------
    def _entry_json(self, repo: Repo, commit: Commit, path: str, expand: bool) -> dict[str, Any]:
        entry = commit.files.get(path)
        if entry is None:
            data: dict[str, Any] = {"type": "directory", "oid": _tree_id(commit, path), "size": 0, "path": path}
        else:
            data = {"type": "file", "oid": entry.blob_id, "size": entry.size, "path": path}
            if entry.lfs:
                data["lfs"] = {"oid": entry.sha256, "size": entry.size, "pointerSize": entry.pointer_size}
        if expand:
            last = self.state.last_commit(repo, commit, path)
            data["lastCommit"] = {"id": last.sha, "title": last.title, "date": last.date}
            if entry is not None:
                data["securityFileStatus"] = {
                    "status": "safe",
                    "avScan": {"virusFound": False, "virusNames": None},
                    "pickleImportScan": None,
                }
        return data

    def _tree(self, repo: Repo, revision: str, path: str) -> None:
        commit = self.state.resolve(repo, revision)
        path = path.strip("/")
        folders = _folders(commit)
        if path and path not in folders:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound", {"X-Repo-Commit": commit.sha})
        recursive = self.query.get("recursive", ["false"])[0].lower() in ("1", "true")
        expand = self.query.get("expand", ["false"])[0].lower() in ("1", "true")
        prefix = path + "/" if path else ""
        paths = []
        for candidate in sorted(folders) + sorted(commit.files):
            if not candidate.startswith(prefix):
                continue
            if recursive or "/" not in candidate[len(prefix) :]:
                paths.append(candidate)
        page_size = int(self.query.get("limit", [0])[0]) or (TREE_PAGE_SIZE_EXPANDED if expand else TREE_PAGE_SIZE)
        page_size = min(page_size, self.hub.tree_page_size or page_size)
        start = int(self.query.get("cursor", ["0"])[0] or 0)
        page = paths[start : start + page_size]
        headers = {}
        if start + page_size < len(paths):
            params = {k: v[0] for k, v in self.query.items() if k != "cursor"}
            params["cursor"] = str(start + page_size)
            link = f"{self._base()}{urlsplit(self.path).path}?{urlencode(params)}"
            headers["Link"] = f'<{link}>; rel="next"'
        self._send_json([self._entry_json(repo, commit, p, expand) for p in page], headers=headers)

    def _paths_info(self, repo: Repo, revision: str) -> None:
        commit = self.state.resolve(repo, revision)
        if self.headers.get("Content-Type", "").startswith("application/json"):
            body = self._json_body()
            paths, expand = body.get("paths", []), bool(body.get("expand"))
        else:
            form = parse_qs(self.body.decode(), keep_blank_values=True)
            paths = form.get("paths", [])
            expand = form.get("expand", ["false"])[0].lower() in ("1", "true")
        if isinstance(paths, str):
            paths = [paths]
        folders = _folders(commit)
        found = []
        for raw in paths:
            path = str(raw).strip("/")
            if path in commit.files or path in folders:
                found.append(self._entry_json(repo, commit, path, expand))
        self._send_json(found)

    # -- uploads -----------------------------------------------------------------------------------
    def _preupload(self, repo: Repo, revision: str) -> None:
        commit = self.state.resolve(repo, "main" if self.query.get("create_pr") else revision)
        answers = []
        for item in self._json_body().get("files", []):
            path = _clean_path(item["path"])
            sample = base64.b64decode(item.get("sample", ""))
            mode = self.state.upload_mode(commit, path, int(item["size"]), sample, repo.repo_type)
            existing = commit.files.get(path)
            oid = None if existing is None else (existing.sha256 if existing.lfs else existing.blob_id)
            answers.append({"path": item["path"], "uploadMode": mode, "shouldIgnore": False, "oid": oid})
        self._send_json({"files": answers, "commitOid": commit.sha})

    def _commit(self, repo: Repo, revision: str) -> None:
        lines = [json.loads(line) for line in self.body.decode().splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "The commit payload must start with a header line")
        create_pr = self.query.get("create_pr", ["0"])[0] in ("1", "true")
        commit, pr_num = self.state.commit(repo, revision, lines[0]["value"], lines[1:], create_pr)
        base = f"{self._base()}/{repo.url_path}"
        self._send_json(
            {
                "success": True,
                "commitOid": commit.sha,
                "commitUrl": f"{base}/commit/{commit.sha}",
                "hookOutput": "",
                "pullRequestUrl": f"{base}/discussions/{pr_num}" if pr_num is not None else None,
            }
        )

    def _lfs_batch(self, repo_type: str, repo_id: str) -> None:
        self._require_auth()
        self.state.get_repo(repo_type, repo_id)
        body = self._json_body()
        if body.get("operation") != "upload":
            raise HubError(400, "Only the 'upload' LFS batch operation is supported")
        objects = []
        for obj in body.get("objects", []):
            oid, size = str(obj["oid"]), int(obj["size"])
            answer: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
            if not self.state.has_blob(oid, size):
                # Uploads go to the "CDN" host, like the Hub's pre-signed storage URLs.
                answer["actions"] = {
                    "upload": {"href": f"{self.hub.cdn_url}/lfs-upload/{oid}?{urlencode({'size': size})}"},
                    "verify": {"href": f"{self._base()}/lfs-verify/{oid}", "header": {}},
                }
            objects.append(answer)
        self._send(
            200, json.dumps({"transfer": "basic", "objects": objects}).encode(), None, "application/vnd.git-lfs+json"
        )

    def _lfs_upload(self, oid: str) -> None:
        expected_size = self.query.get("size", [None])[0]
        if hashlib.sha256(self.body).hexdigest() != oid:
            raise HubError(400, f"Uploaded content does not match its oid {oid}")
        if expected_size is not None and int(expected_size) != len(self.body):
            raise HubError(400, f"Uploaded content has {len(self.body)} bytes, announced {expected_size}")
        self.state.put_blob(self.body)
        self._send(200, b"", {"ETag": f'"{oid}"'})

    def _lfs_verify(self, oid: str) -> None:
        self._require_auth()
        if not self.state.has_blob(oid, self._json_body().get("size")):
            raise HubError(404, f"LFS object {oid} not found")
        self._send_json({"success": True})

    # -- downloads ---------------------------------------------------------------------------------
    def _resolve(self, method: str, repo_type: str, repo_id: str, revision: str, path: str) -> None:
        with self.state.lock:
            repo = self.state.get_repo(repo_type, repo_id)
            self._check_read_access(repo)
            commit = self.state.resolve(repo, revision)
        entry = commit.files.get(path)
        if entry is None:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound", {"X-Repo-Commit": commit.sha})
        headers = {"X-Repo-Commit": commit.sha, "ETag": f'"{entry.blob_id}"', "Accept-Ranges": "bytes"}
        if entry.lfs:
            # LFS content is served by another host: the clients take size and etag from this redirect.
            query = urlencode({"commit": commit.sha, "filename": path.rsplit("/", 1)[-1]})
            headers["Location"] = f"{self.hub.cdn_url}/cdn/{entry.sha256}?{query}"
            headers["X-Linked-Etag"] = f'"{entry.sha256}"'
            headers["X-Linked-Size"] = str(entry.size)
            self._send(302, b"", headers, "text/plain", head=method == "HEAD")
            return
        self._send_file(method, entry.sha256, headers)

    def _serve_cdn(self, method: str, sha256: str) -> None:
        if not self.state.has_blob(sha256):
            raise HubError(404, "Blob not found")
        headers = {"ETag": f'"{sha256}"', "Accept-Ranges": "bytes"}
        commit = self.query.get("commit", [None])[0]
        if commit:
            # Only needed when the CDN host is the Hub host itself (the clients then follow the redirect).
            headers.update({"X-Repo-Commit": commit, "X-Linked-Etag": f'"{sha256}"'})
            headers["X-Linked-Size"] = str(self.state.blob_path(sha256).stat().st_size)
        filename = self.query.get("filename", [None])[0]
        if filename:
            headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(filename)}"
        self._send_file(method, sha256, headers)

    def _send_file(self, method: str, sha256: str, headers: dict[str, str]) -> None:
        path = self.state.blob_path(sha256)
        size = path.stat().st_size
        start, end, status = 0, size - 1, 200
        range_header = self.headers.get("Range")
        if range_header:
            match = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*(,.*)?", range_header)
            if match is None or match.group(1) == match.group(2) == "":
                raise HubError(416, f"Invalid range {range_header!r}", headers={"Content-Range": f"bytes */{size}"})
            if match.group(1) == "":
                start = max(size - int(match.group(2)), 0)
            else:
                start = int(match.group(1))
                end = min(int(match.group(2)), size - 1) if match.group(2) else size - 1
            if start >= size or start > end:
                raise HubError(
                    416, f"Range {range_header!r} not satisfiable", headers={"Content-Range": f"bytes */{size}"}
                )
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        length = end - start + 1 if size else 0
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if method == "HEAD":
            return
        with path.open("rb") as handle:
            handle.seek(start)
            remaining = length
            while remaining > 0:
                chunk = handle.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                self.wfile.write(chunk)
                remaining -= len(chunk)


class _HubHTTPServer(ThreadingHTTPServer):
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
        self._rules_lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []
        self._httpd = _HubHTTPServer(("127.0.0.1", port), _Handler)
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
        card = _card_data(self.state.read_blob(readme.sha256)) if readme is not None else None
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
    def _log_request(self, method: str, path: str) -> None:
        with self._rules_lock:
            self.requests.append((method, path))

    def _failing_rule(self, method: str, path: str) -> FailRule | None:
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


if __name__ == "__main__":
    server = HubServer().start()
    print(f"HF_ENDPOINT={server.url}  (storage: {server.root}); Ctrl-C to stop", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()
