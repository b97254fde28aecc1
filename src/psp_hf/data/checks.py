"""Checks of `psp prepare`'s inputs and outputs, made before any work starts; each failure is one error line."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import PSPInputError
from ..io.writing import check_writable_parent


def check_inputs(inputs: Sequence[str | os.PathLike]) -> list[Path]:
    """The input paths, each of which must be a readable file."""
    if not inputs:
        raise PSPInputError("no input files given")
    paths = [Path(p) for p in inputs]
    for path in paths:
        if str(path) == "-":
            raise PSPInputError(
                "-: standard input is not supported here (each input is opened twice: its header is checked "
                "before the run); save it to a file first"
            )
        if path.is_dir():
            raise PSPInputError(f"{path}: is a folder, not a file of pairs")
        if path.exists() and not path.is_file():
            raise PSPInputError(f"{path}: not a regular file (a pipe, socket or device); save it to a file first")
        if not path.is_file():
            raise PSPInputError(f"{path}: no such file")
        if not os.access(path, os.R_OK):
            raise PSPInputError(f"{path}: not readable (permission denied)")
    return paths


def check_output_folder(
    out: Path, overwrite: bool, flag: str = "--output", inputs: Sequence[Path] = (), replaces: bool = True
) -> None:
    """`out` can become a folder: not a file, not there yet unless `overwrite`, and its parent writable.

    With `replaces` (the whole folder is swapped for a new one), a folder that holds one of the `inputs` or the
    working directory is refused: replacing it would delete them. Without it, files are written into `out`.
    """
    if out.exists() and not out.is_dir():
        raise PSPInputError(f"{flag} {out}: exists and is not a folder (this output is a folder: give a folder name)")
    if out.exists() and not overwrite:
        raise PSPInputError(f"{flag} {out}: already exists; pass --overwrite to replace it")
    if out.exists() and replaces:
        target = out.resolve()
        for path in [*inputs, Path.cwd()]:
            resolved = path.resolve()
            if resolved == target or target in resolved.parents:
                raise PSPInputError(f"{flag} {out}: holds {path}, which replacing the folder would delete")
    check_writable_parent(out, f"{flag} {out}")


def check_output_file(path: str | os.PathLike, flag: str = "--output") -> Path:
    """`path` can become a file: not a folder, and its folder writable (created when missing)."""
    path = Path(path)
    if path.is_dir():
        raise PSPInputError(f"{flag} {path}: is a folder; give a file name")
    if path.exists() and not os.access(path, os.W_OK):
        raise PSPInputError(f"{flag} {path}: not writable (permission denied)")
    check_writable_parent(path, f"{flag} {path}")
    return path


def check_repo_id(repo_id: str, flag: str = "--push-to-hub") -> None:
    """A Hub repo id of the form `name` or `namespace/name` (checked before the work, not at the upload)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise PSPInputError(f"{flag} {repo_id!r}: not a valid repo id: {str(error).splitlines()[0]}") from None


def vocabulary_warning(pieces: int, asked: int) -> str | None:
    """The warning for a vocabulary smaller than asked (sentencepiece stops where the text has no more pieces)."""
    if pieces >= asked:
        return None
    return f"warning: vocabulary has {pieces:,} pieces of the {asked:,} asked: the text supports no more"
