"""The Hub's data model as the test server keeps it: repos, commits, files, and the git/LFS rules.

``Repo`` holds commits, branches and tags; every ``Commit`` is a full snapshot of ``FileEntry`` items
(content by sha256). The helpers compute what git and the Hub would: blob ids, LFS pointers, which paths
``.gitattributes`` sends through LFS, card metadata. ``HubError`` is the one error type; the handler turns
it into the Hub's HTTP error answer.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

#: The user every token authenticates as; repos created without a namespace go there.
USER = "psp-tester"

#: Files at least this large are stored with LFS, like on the Hub.
LFS_SIZE_THRESHOLD = 10 * 1024 * 1024

#: Page size of tree listings (the Hub uses 1000, and 50 when ``expand=True``).
TREE_PAGE_SIZE = 1000
TREE_PAGE_SIZE_EXPANDED = 50

PLURAL_TO_TYPE = {"models": "model", "datasets": "dataset", "spaces": "space"}
URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}
COMMIT_SHA = re.compile(r"[0-9a-f]{7,40}")
SHA256_HEX = re.compile(r"[0-9a-f]{64}")

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
        return len(lfs_pointer(self.sha256, self.size))


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
        return URL_PREFIX[self.repo_type] + self.repo_id


@dataclass
class FailRule:
    """Makes the server refuse matching requests (see :meth:`HubServer.failing`)."""

    status: int
    methods: tuple[str, ...] | None
    path_contains: str | None
    times: int | None
    message: str
    hits: int = 0
    drop_after: int | None = None  # a dropping rule (HubServer.dropping): bytes sent before the connection closes

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


def utc_now() -> str:
    """The current UTC time as the Hub writes it (ISO 8601, milliseconds, ``Z``)."""
    now = _dt.datetime.now(_dt.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def git_blob_id(data: bytes) -> str:
    """The git object id of a blob with this content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The LFS pointer file git stores in place of an LFS file's content."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def default_gitattributes(repo_type: str) -> bytes:
    """The ``.gitattributes`` a new repo of this type starts with."""
    patterns = _LFS_PATTERNS + (_DATASET_LFS_PATTERNS if repo_type == "dataset" else [])
    return "".join(f"{p} filter=lfs diff=lfs merge=lfs -text\n" for p in patterns).encode()


def lfs_patterns(gitattributes: bytes) -> list[str]:
    """The path patterns a ``.gitattributes`` sends through LFS."""
    patterns = []
    for line in gitattributes.decode("utf-8", "replace").splitlines():
        parts = line.split()
        if len(parts) >= 2 and not parts[0].startswith("#") and "filter=lfs" in parts[1:]:
            patterns.append(parts[0])
    return patterns


def matches_any(path: str, patterns: list[str]) -> bool:
    """Whether a repo path matches any of these ``.gitattributes`` patterns."""
    basename = path.rsplit("/", 1)[-1]
    for pattern in patterns:
        # Git matches slash-free patterns against the basename and the others against the full path.
        target = path if "/" in pattern else basename
        if fnmatch.fnmatchcase(target, pattern.lstrip("/")):
            return True
    return False


def clean_path(path: str) -> str:
    """A repo path without outer slashes, or an InvalidPath error for empty, ``.`` or ``..`` parts."""
    path = path.strip("/")
    if not path or any(part in ("", ".", "..") for part in path.split("/")):
        raise HubError(400, f"Invalid path in repo: {path!r}", "InvalidPath")
    return path


def card_data(readme: bytes) -> dict[str, Any] | None:
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


def tree_id(commit: Commit, folder: str) -> str:
    """A stable id for a folder of a commit (its files and their blob ids)."""
    items = sorted(f"{p}:{e.blob_id}" for p, e in commit.files.items() if p.startswith(folder + "/"))
    return hashlib.sha1("\n".join(items).encode()).hexdigest()


def folders_of(commit: Commit) -> set[str]:
    """Every folder that holds a file of the commit, at any depth."""
    folders = set()
    for path in commit.files:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            folders.add("/".join(parts[:i]))
    return folders
