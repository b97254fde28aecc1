"""The server's storage: repos in memory and file contents in a content-addressed store on disk.

``HubState`` creates repos, applies commit operations, resolves revisions and decides upload modes
(LFS or regular) like the Hub. Every public method is thread-safe (one re-entrant lock).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from .repos import (
    COMMIT_SHA,
    LFS_SIZE_THRESHOLD,
    SHA256_HEX,
    Commit,
    FileEntry,
    HubError,
    Repo,
    clean_path,
    default_gitattributes,
    git_blob_id,
    lfs_patterns,
    lfs_pointer,
    matches_any,
    utc_now,
)


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
        if not SHA256_HEX.fullmatch(sha256):  # also keeps client-sent oids from naming paths outside the store
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
            repo = Repo(repo_type=repo_type, repo_id=repo_id, private=private, created_at=utc_now(), sdk=sdk)
            content = default_gitattributes(repo_type)
            entry = FileEntry(self.put_blob(content), len(content), False, git_blob_id(content))
            self._add_commit(repo, "main", None, {".gitattributes": entry}, "initial commit", "")
            self.repos[(repo_type, repo_id)] = repo
            return repo

    def _add_commit(
        self, repo: Repo, branch: str, parent: str | None, files: dict[str, FileEntry], title: str, message: str
    ) -> Commit:
        date = utc_now()
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
        if COMMIT_SHA.fullmatch(rev):
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
            path = clean_path(value["path"])
            if value.get("encoding", "base64") != "base64":
                raise HubError(400, f"Unsupported encoding {value.get('encoding')!r} for {path}")
            data = base64.b64decode(value.get("content", ""))
            files[path] = FileEntry(self.put_blob(data), len(data), False, git_blob_id(data))
        elif key == "lfsFile":
            path = clean_path(value["path"])
            oid = str(value.get("oid", ""))
            if not self.has_blob(oid, value.get("size")):
                raise HubError(400, f"LFS object {oid} for {path} was not uploaded (or has the wrong size)")
            size = self.blob_path(oid).stat().st_size
            files[path] = FileEntry(oid, size, True, git_blob_id(lfs_pointer(oid, size)))
        elif key == "deletedFile":
            path = clean_path(value["path"])
            if path not in files:
                raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
            del files[path]
        elif key == "deletedFolder":
            folder = clean_path(value["path"]) + "/"
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
            lfs_patterns(self.read_blob(attributes.sha256))
            if attributes is not None
            else lfs_patterns(default_gitattributes(repo_type))
        )
        if size >= LFS_SIZE_THRESHOLD or matches_any(path, patterns) or b"\0" in sample:
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
