"""Where the real data lives (`PSP_DATA`) and small readers shared by benches, the demo and tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

DATA_ENV = "PSP_DATA"
CACHE_ENV = "PSP_CACHE"
# Both defaults are relative to the working directory (the repository root when run through `make`), never to this
# file: installed as a wheel, this file's parents are site-packages'.
DEFAULT_DATA = Path("..") / "shared" / "data"
DEFAULT_CACHE = Path(".cache")


def data_dir(path: str | os.PathLike | None = None) -> Path:
    """The data folder: `path`, else $PSP_DATA, else ../shared/data (from the working directory)."""
    if path is not None:
        return Path(path)
    env = os.environ.get(DATA_ENV)
    return Path(env) if env else DEFAULT_DATA


def cache_dir() -> Path:
    """Where unpacked Debian packages and other rebuildable files live: $PSP_CACHE, else ./.cache (the Makefile's)."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else DEFAULT_CACHE


def existing_data_dir(path: str | os.PathLike | None = None) -> Path:
    """`data_dir(path)`, which must exist (the error says how to point at it)."""
    from .errors import PSPInputError

    folder = data_dir(path)
    if folder.exists() and not folder.is_dir():
        flag = "--data-dir" if path is not None else DATA_ENV
        raise PSPInputError(f"{flag} {folder}: is a file, not a folder; give the data folder (the one that holds sts/)")
    if not folder.is_dir():
        raise PSPInputError(
            f"data folder {folder} not found; pass --data-dir DIR or set {DATA_ENV} "
            "(the folder that holds sts/, senteval/, tatoeba/ and MANIFEST.tsv)"
        )
    return folder


def sts_sentences(root: str | os.PathLike | None = None) -> list[str]:
    """Every sentence of STS 2012–2016 (both sides, file order)."""
    sentences: list[str] = []
    from .io.reading import iter_tsv as numbered_rows

    for year in ("STS12", "STS13", "STS14", "STS15", "STS16"):
        for path in sorted((data_dir(root) / "sts" / "en" / year).glob("*.tsv")):
            for _, row in numbered_rows(path, header=True):
                sentences += [row[1], row[2]]
    return sentences


def english_training_text(root: str | os.PathLike | None = None) -> Iterator[str]:
    """English non-evaluation text: Flickr30k caption pairs (train) and the WMT news English sides."""
    from .io.reading import iter_tsv as numbered_rows

    base = data_dir(root)
    for _, row in numbered_rows(base / "paraphrase" / "en" / "flickr30k-captions" / "train.pairs.tsv.gz", header=True):
        yield row[1]
        yield row[2]
    for path in sorted((base / "bitext" / "wmt-news").glob("*-en.tsv.gz")):
        for _, row in numbered_rows(path, header=True):
            yield row[2]
