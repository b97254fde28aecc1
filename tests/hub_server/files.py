"""The test Hub's file endpoints: tree and paths-info listings, uploads (preupload, commit, LFS) and downloads.

Downloads of LFS files are redirected to the "CDN" host, and every file answer honours HTTP ranges.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from .http_base import BaseHandler
from .repos import (
    TREE_PAGE_SIZE,
    TREE_PAGE_SIZE_EXPANDED,
    Commit,
    HubError,
    Repo,
    clean_path,
    folders_of,
    tree_id,
)


class FilesHandler(BaseHandler):
    """Lists, uploads and serves the files of a repo (routing lives in :class:`handler.HubHandler`)."""

    # -- listing -----------------------------------------------------------------------------------
    def _entry_json(self, repo: Repo, commit: Commit, path: str, expand: bool) -> dict[str, Any]:
        entry = commit.files.get(path)
        if entry is None:
            data: dict[str, Any] = {"type": "directory", "oid": tree_id(commit, path), "size": 0, "path": path}
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
        folders = folders_of(commit)
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
        folders = folders_of(commit)
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
            path = clean_path(item["path"])
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
        drop = self.hub.drop_rule(method, urlsplit(self.path).path)
        with path.open("rb") as handle:
            handle.seek(start)
            remaining = length if drop is None else min(length, drop.drop_after or 0)
            while remaining > 0:
                chunk = handle.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                self.wfile.write(chunk)
                remaining -= len(chunk)
        if drop is not None:
            self.close_connection = True  # the client was promised `length` bytes: it sees the connection drop
