"""Routing of the test Hub: which URL is which endpoint, plus the repo, branch and tag endpoints.

``HubHandler`` is the request handler the server runs: it maps ``/api/...``, ``/<repo>/resolve/...``,
the LFS batch/upload/verify URLs and the ``/cdn/`` host to the methods of ``FilesHandler`` and its own.
"""

from __future__ import annotations

import re
import uuid
from urllib.parse import unquote

from .files import FilesHandler
from .repos import PLURAL_TO_TYPE, URL_PREFIX, USER, HubError, Repo


class HubHandler(FilesHandler):
    """Routes one request to the Hub endpoint it imitates."""

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
            repo_type = PLURAL_TO_TYPE[segs[0]]
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
        if len(segs) >= 3 and segs[0] in PLURAL_TO_TYPE:
            repo_type = PLURAL_TO_TYPE[segs[0]]
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
        if repo_type not in URL_PREFIX:
            raise HubError(400, f"Invalid repo type: {repo_type}")
        name = str(body.get("name") or "")
        if not re.fullmatch(r"[\w.-]{1,96}", name):
            raise HubError(400, f"Invalid repo name: {name!r}")
        repo_id = f"{body.get('organization') or USER}/{name}"
        visibility = body.get("visibility")
        private = visibility in ("private", "protected") if visibility is not None else bool(body.get("private"))
        url = f"{self._base()}/{URL_PREFIX[repo_type]}{repo_id}"
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
