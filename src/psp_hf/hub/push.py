"""Uploading a model folder to the Hugging Face Hub, with errors that say how to retry.

A failed push never touches the local folder: the error names the folder, says it is kept, and gives the
exact `psp push` command that retries the upload.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import stat
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..errors import PSPInputError

logger = logging.getLogger(__name__)

DEFAULT_COMMIT_MESSAGE = "Upload P-SP model with psp-hf"

#: Left out of every model upload unless the caller passes its own patterns: `psp train` keeps its
#: checkpoints, optimizer state and logs in `<output-dir>/training/`, which is not part of the published model.
DEFAULT_IGNORE_PATTERNS = ("training/*",)


class PSPPushError(RuntimeError):
    """The Hub refused an upload or could not be reached; the message says how to retry."""

    def __init__(self, message: str, folder: Path, retry_command: str):
        super().__init__(message)
        self.folder = folder
        self.retry_command = retry_command


def retry_command(
    folder: str | os.PathLike,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
    repo_type: str = "model",
    extra_args: Sequence[str] = (),
) -> str:
    """The `psp push` command line that uploads `folder` to `repo_id` again (the token is never included)."""
    parts = ["psp", "push", str(Path(folder).resolve()), repo_id]
    if private:
        parts.append("--private")
    if revision:
        parts += ["--revision", revision]
    if commit_message and commit_message != DEFAULT_COMMIT_MESSAGE:
        parts += ["--commit-message", commit_message]
    if repo_type != "model":
        parts += ["--repo-type", repo_type]
    return shlex.join([*parts, *extra_args])


def _network_errors() -> tuple[type[BaseException], ...]:
    from huggingface_hub import errors

    # huggingface_hub raises HfHubHTTPError for answers and its HTTP client's own errors (connection refused,
    # timeouts) otherwise; both derive from the client's HTTPError, which huggingface_hub.errors re-exports.
    client_error = getattr(errors, "HTTPError", None)
    found: tuple[type[BaseException], ...] = (OSError, errors.HfHubHTTPError)
    return (*found, client_error) if isinstance(client_error, type) else found


def _reason(error: BaseException) -> str:
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return f"HTTP {status}: {first_line}" if status and str(status) not in first_line else first_line


def _local_files(folder: Path, ignore: Iterable[str]) -> dict[str, Path]:
    """The files to upload: regular files inside `folder` only. A symlink (to a file or a folder) would publish
    whatever it points at, a secret planted as `notes.txt` included, and a pipe or device has no content to
    upload: those are left out, and named in a warning."""
    import fnmatch

    ignore = list(ignore)
    files: dict[str, Path] = {}
    skipped: list[str] = []
    for parent, folders, names in os.walk(folder):  # never into a symlinked folder (followlinks=False)
        base = Path(parent)
        for name in list(folders):
            relative = (base / name).relative_to(folder).as_posix()
            # Hidden entries are temp files of atomic writes, caches and VCS folders, never part of a model.
            if name.startswith(".") or (base / name).is_symlink():
                folders.remove(name)
                if not name.startswith(".") and not any(fnmatch.fnmatch(relative, p) for p in ignore):
                    skipped.append(f"{relative}/ (a symlink)")
        for name in names:
            path = base / name
            relative = path.relative_to(folder).as_posix()
            if name.startswith(".") or any(fnmatch.fnmatch(relative, pattern) for pattern in ignore):
                continue
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                files[relative] = path
            else:
                skipped.append(f"{relative} ({'a symlink' if stat.S_ISLNK(mode) else 'not a regular file'})")
    if skipped:
        logger.warning(
            "psp push: left out of the upload (only regular files inside %s are pushed): %s", folder, ", ".join(skipped)
        )
    return dict(sorted(files.items()))


def push_folder(
    folder: str | os.PathLike,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    commit_message: str = DEFAULT_COMMIT_MESSAGE,
    token: str | bool | None = None,
    repo_type: str = "model",
    extra_files: Mapping[str, bytes | str | os.PathLike] | None = None,
    ignore_patterns: Iterable[str] | None = None,
    retry_args: Sequence[str] = (),
    source: str | os.PathLike | None = None,
) -> str:
    """Create `repo_id` if needed and upload every file of `folder` in one commit; returns the repo's URL.

    `revision` is a branch, created from the default branch if it does not exist. `extra_files` maps paths in
    the repo to bytes or local files uploaded beside (or instead of) the folder's own files, so a caller can
    change what is uploaded without writing into `folder`. Hidden files and `ignore_patterns` (fnmatch on the
    path inside the folder; default `DEFAULT_IGNORE_PATTERNS` for models, nothing otherwise) are left out.
    `retry_args` are added to the `psp push` command the error gives; `source` is the folder that command names
    when `folder` is a temporary copy made from it (`psp push --quantize-to`), which is gone by then.

    Raises `PSPInputError` for a missing folder or a malformed repo id, and `PSPPushError` when the Hub
    refuses or cannot be reached; `folder` is never modified.
    """
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    from .card import CARD_FILENAME, fill_repo_id

    folder = Path(folder)
    if not folder.is_dir():
        raise PSPInputError(f"{folder}: no such folder to push")
    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise PSPInputError(f"repo id {repo_id!r} is not valid: {str(error).splitlines()[0]}") from None
    if "/" not in repo_id:
        raise PSPInputError(f"repo id {repo_id!r}: expected <user or org>/<name>, e.g. my-org/p-sp-de")
    if ignore_patterns is None:
        ignore_patterns = DEFAULT_IGNORE_PATTERNS if repo_type == "model" else ()
    files: dict[str, bytes | Path] = dict(_local_files(folder, ignore_patterns))
    card = files.get(CARD_FILENAME)
    if isinstance(card, Path):
        # A card rendered before the repo id was known names a placeholder; the uploaded copy names the repo.
        text = card.read_text(encoding="utf-8")
        filled = fill_repo_id(text, repo_id)
        if filled != text:
            files[CARD_FILENAME] = filled.encode("utf-8")
    for path_in_repo, content in (extra_files or {}).items():
        files[path_in_repo] = content if isinstance(content, bytes) else Path(content)
    if not files:
        raise PSPInputError(f"{folder}: nothing to push (the folder has no files)")

    kept = Path(source) if source is not None else folder
    command = retry_command(kept, repo_id, private, revision, commit_message, repo_type, retry_args)
    api = HfApi(token=token)
    try:
        repo_url = api.create_repo(repo_id, private=private, repo_type=repo_type, exist_ok=True)
        if revision:
            api.create_branch(repo_id, branch=revision, repo_type=repo_type, exist_ok=True)
        operations = [
            CommitOperationAdd(path_in_repo=path_in_repo, path_or_fileobj=content if isinstance(content, bytes)
                               else str(content))
            for path_in_repo, content in sorted(files.items())
        ]  # fmt: skip
        api.create_commit(
            repo_id, operations=operations, commit_message=commit_message, revision=revision, repo_type=repo_type
        )
    except _network_errors() as error:
        raise PSPPushError(
            f"pushing {kept} to {repo_id} failed ({_reason(error)}). The local folder {kept.resolve()} is "
            f"kept as it was. Retry with:\n    {command}",
            folder=kept,
            retry_command=command,
        ) from error
    url = str(repo_url).rstrip("/")
    return f"{url}/tree/{revision}" if revision else url


def push_encoder(
    encoder,
    repo_id: str,
    *,
    language: str | None = None,
    eval_results: Mapping | None = None,
    training_info: Mapping | None = None,
    save_dir: str | os.PathLike | None = None,
    private: bool = False,
    revision: str | None = None,
    commit_message: str = DEFAULT_COMMIT_MESSAGE,
    token: str | bool | None = None,
) -> str:
    """Save a `PSPEncoder` (weights, tokenizer, remote code, sentence-transformers layout, card) and push it.

    The folder is `save_dir`, or a new temporary folder that is removed after a successful push and kept after
    a failed one (the `PSPPushError` names it, so the upload can be retried with `psp push`). A card is
    written when `language` is given and the folder has none yet.
    """
    from ..persistence.sentence_transformers_layout import write_sentence_transformers_files
    from .card import CARD_FILENAME, write_model_card

    own_folder = save_dir is None
    folder = Path(tempfile.mkdtemp(prefix="psp-push-")) if own_folder else Path(save_dir)
    encoder.save_pretrained(folder)
    if not (folder / "modules.json").is_file():
        write_sentence_transformers_files(folder, encoder)
    if language is not None and not (folder / CARD_FILENAME).is_file():
        write_model_card(
            folder, encoder, language=language, eval_results=eval_results, training_info=training_info,
            repo_id=repo_id,
        )  # fmt: skip
    url = push_folder(folder, repo_id, private=private, revision=revision, commit_message=commit_message, token=token)
    if own_folder:
        shutil.rmtree(folder, ignore_errors=True)
    return url


__all__ = [
    "DEFAULT_COMMIT_MESSAGE",
    "DEFAULT_IGNORE_PATTERNS",
    "PSPPushError",
    "push_encoder",
    "push_folder",
    "retry_command",
]
