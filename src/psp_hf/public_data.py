"""Public Hugging Face Hub copies of the data the project reads, and the one reader that fetches their rows.

Each `HubSet` names a dataset repo, how its configs lie, the columns read, its licence and what it feeds. `read_rows`
resolves the revision to a commit (recorded beside what is written), checks that the config and split exist (an
error lists those that do), then streams the rows through `datasets.load_dataset`; a missing column or a failed
download ends in one `PSPInputError` that names the dataset, config, split and revision.

Two layouts occur (looked up in the cards; see docs/data.md):

- `export`: the Hub's parquet export (branch `refs/convert/parquet`, files `<config>/<split>/NNNN.parquet`). MTEB's
  STS and Tatoeba repos hold JSON lines on `main` (and loading scripts in older revisions, which `datasets` no
  longer runs); the export is the same rows as parquet, and what `datasets` itself falls back to.
- `configs`: parquet on `main`, with the configs in the card's YAML (`<config>/<split>-NNNNN-of-NNNNN.parquet`):
  sentence-transformers' `parallel-sentences-*`, `flickr30k-captions` and `wikipedia-en-sentences`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from .errors import PSPInputError

logger = logging.getLogger(__name__)

PARQUET_EXPORT = "refs/convert/parquet"


@dataclass(frozen=True)
class HubSet:
    """A dataset repo of the Hub as the project reads it."""

    repo_id: str
    columns: tuple[str, ...]
    license: str
    feeds: str
    layout: str = "export"  # "export" (the parquet export) or "configs" (parquet on main, configs in the card)
    revision: str | None = None  # None: the layout's branch (`refs/convert/parquet` or `main`)

    @property
    def branch(self) -> str:
        """The revision asked for: the pinned one, else the layout's branch."""
        return self.revision or (PARQUET_EXPORT if self.layout == "export" else "main")


class HubReadError(PSPInputError):
    """A Hub dataset could not be read (gone, changed, or the connection failed)."""


def endpoint() -> str:
    """The Hub the libraries talk to ($HF_ENDPOINT, else huggingface.co)."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co")


@lru_cache(maxsize=64)
def _repo_files(repo_id: str, revision: str) -> tuple[str, tuple[str, ...]]:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    api = HfApi()
    try:
        info = api.dataset_info(repo_id, revision=revision)
        files = api.list_repo_files(repo_id, repo_type="dataset", revision=info.sha)
    except RepositoryNotFoundError:
        raise HubReadError(f"dataset {repo_id} not found on the Hub ({endpoint()})") from None
    except RevisionNotFoundError:
        raise HubReadError(f"dataset {repo_id} has no revision {revision!r} on the Hub ({endpoint()})") from None
    except (HfHubHTTPError, OSError) as error:
        raise HubReadError(f"dataset {repo_id}: cannot reach the Hub ({endpoint()}): {_reason(error)}") from None
    return str(info.sha), tuple(files)


def forget_revisions() -> None:
    """Resolve every branch again on the next read (a long-lived process sees new commits)."""
    _repo_files.cache_clear()


def resolve(hub_set: HubSet) -> tuple[str, tuple[str, ...]]:
    """The commit the set's revision points at now, and the files of that commit."""
    return _repo_files(hub_set.repo_id, hub_set.branch)


def configs(hub_set: HubSet) -> list[str]:
    """The configs of the set (the top folders that hold parquet files)."""
    _, files = resolve(hub_set)
    folders = {path.split("/", 1)[0] for path in files if path.endswith(".parquet") and "/" in path}
    return sorted("default" if folder == "data" and hub_set.layout == "configs" else folder for folder in folders)


def _split_files(hub_set: HubSet, files: tuple[str, ...], config: str, split: str) -> list[str]:
    if hub_set.layout == "export":
        return [path for path in files if path.startswith(f"{config}/{split}/") and path.endswith(".parquet")]
    # A card's `default` config keeps its files in data/ (what push_to_hub writes).
    folder = "data" if config == "default" else config
    return [path for path in files if path.startswith(f"{folder}/{split}-") and path.endswith(".parquet")]


def _reason(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}" if text else type(error).__name__


def read_rows(
    hub_set: HubSet, config: str, split: str, *, limit: int | None = None
) -> tuple[str, Iterator[dict[str, str]]]:
    """The commit read and the rows of `config`/`split` (only the set's columns, as strings), streamed.

    Errors (missing config or split, a renamed column, a dropped connection) raise `HubReadError`, naming what was
    read and what to do.
    """
    sha = check_split(hub_set, config, split)
    where = f"{hub_set.repo_id} (config {config!r}, split {split!r}, revision {sha[:12]})"
    return sha, _stream(hub_set, sha, config, split, where, limit)


def check_split(hub_set: HubSet, config: str, split: str) -> str:
    """The commit the set's revision points at, after checking it holds `config`/`split` (the error lists the
    configs it has)."""
    sha, files = resolve(hub_set)
    if not _split_files(hub_set, files, config, split):
        known = configs(hub_set)
        if config not in known:
            shown = ", ".join(known[:40]) + (" ..." if len(known) > 40 else "")
            raise HubReadError(f"{hub_set.repo_id} has no config {config!r} at revision {sha[:12]}; configs: {shown}")
        raise HubReadError(
            f"{hub_set.repo_id} (config {config!r}, revision {sha[:12]}): no split {split!r} (no parquet files for it)"
        )
    return sha


def _stream(
    hub_set: HubSet,
    sha: str,
    config: str,
    split: str,
    where: str,
    limit: int | None,
) -> Iterator[dict[str, str]]:
    from datasets import load_dataset

    try:
        if hub_set.layout == "export":
            # The export carries no card: the split's files are named, as `datasets` names them for that branch.
            dataset = load_dataset(
                hub_set.repo_id,
                data_files={split: f"{config}/{split}/*.parquet"},
                split=split,
                revision=sha,
                streaming=True,
            )
        else:
            dataset = load_dataset(hub_set.repo_id, name=config, split=split, revision=sha, streaming=True)
        dataset = dataset.select_columns(list(hub_set.columns)) if _has_columns(dataset, hub_set, where) else dataset
        for index, row in enumerate(dataset):
            if limit is not None and index >= limit:
                break
            if index == 0:
                _check_columns(list(row), hub_set, where)
            yield {column: _text(row[column], where, column, index) for column in hub_set.columns}
    except PSPInputError:
        raise
    except Exception as error:  # noqa: BLE001 - datasets, fsspec and httpx raise many types; one message for all
        raise HubReadError(f"{where}: reading from the Hub ({endpoint()}) failed: {_reason(error)}") from None


def _has_columns(dataset, hub_set: HubSet, where: str) -> bool:
    features = getattr(dataset, "features", None)
    if features is None:
        return False  # not known before the first file is read: `_text` checks each row instead
    _check_columns(list(features), hub_set, where)
    return True


def _check_columns(present: list[str], hub_set: HubSet, where: str) -> None:
    missing = [column for column in hub_set.columns if column not in present]
    if missing:
        raise HubReadError(
            f"{where}: column(s) {', '.join(missing)} missing (the dataset has {', '.join(present)}); the dataset "
            "changed since this version of psp-hf was written"
        )


def _text(value, where: str, column: str, index: int) -> str:
    if value is None:
        raise HubReadError(f"{where}: row {index}: {column} is empty")
    return value if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class FetchItem:
    """Files of the data folder's layout made from one config and split of a Hub set.

    `write(rows, handles)` writes the rows to one open text handle per path of `paths` (in order) and returns how
    many records it wrote; `protocol` says where the Hub copy cannot give the original protocol.
    """

    hub_set: HubSet
    config: str
    split: str
    paths: tuple[str, ...]
    write: Callable[[Iterator[dict[str, str]], list], int]
    protocol: str = ""
    limit: int | None = None


def tsv_field(text: str) -> str:
    """One field of the data folder's TSV: tabs, newlines and runs of spaces folded into single spaces."""
    return " ".join(text.split())
