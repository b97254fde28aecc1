"""A Hugging Face Hub-compatible HTTP server for the tests, on 127.0.0.1.

The real client libraries (huggingface_hub, transformers, datasets, sentence-transformers) talk to it
through ``HF_ENDPOINT``: it implements the parts of the Hub protocol they use to create repos, commit
files (regular and LFS uploads), list trees, read repo info and download files (with redirects to a
"CDN" host for LFS files and HTTP ranges). Nothing in the product code knows about it.

State lives in memory (repos, branches, commits); file contents live on disk under ``root`` in a
content-addressed store (``blobs/<sha256>``). Every commit is a full snapshot of its files, so any
commit sha can be read back.

Only the standard library is used, so the server can also run outside pytest:
``cd tests && python -m hub_server`` prints the endpoint and serves until interrupted.

Parts, by role:

- ``repos``: the data model (repos, commits, files), the error type and the git/LFS rules;
- ``state``: the storage (``HubState``): repos in memory, contents on disk, commits and revisions;
- ``http_base``: reading requests and answering them (errors, JSON, failure rules);
- ``files``: tree listings, uploads (preupload, commit, LFS) and downloads (redirects, ranges);
- ``handler``: routing of every URL, and the repo, branch and tag endpoints;
- ``server``: ``HubServer``, which runs it all and carries the helpers tests use.

tests/ is not a package: conftest.py puts tests/ on ``sys.path`` and imports this as ``hub_server``.
"""

from .repos import LFS_SIZE_THRESHOLD, TREE_PAGE_SIZE, TREE_PAGE_SIZE_EXPANDED, USER, FailRule, HubError
from .server import HubServer
from .state import HubState

__all__ = [
    "LFS_SIZE_THRESHOLD",
    "TREE_PAGE_SIZE",
    "TREE_PAGE_SIZE_EXPANDED",
    "USER",
    "FailRule",
    "HubError",
    "HubServer",
    "HubState",
]
