"""The search page's index: sentences, their embeddings and a Faiss index built as `psp mine` builds its own.

Two sources: a `psp embed-dataset` output folder (its embeddings, and its text read again from the input its
manifest names) or a text file, one sentence a line, embedded at start-up. Empty lines are left out; each result
keeps its row (0-based line number of a text file, input row of a folder).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import PSPInputError

logger = logging.getLogger(__name__)


@dataclass
class Hit:
    """One nearest sentence."""

    row: int
    text: str
    cosine: float


class SearchIndex:
    """Sentences and a Faiss inner-product index over their unit-length embeddings."""

    def __init__(self, texts: list[str], rows: np.ndarray, embeddings: np.ndarray, source: str) -> None:
        from ..corpus.mine import build_index

        if len(texts) != len(embeddings) or len(rows) != len(texts):
            raise ValueError(f"{len(texts)} texts, {len(rows)} rows and {len(embeddings)} embeddings")
        self.texts = texts
        self.rows = rows
        self.source = source
        self.dim = embeddings.shape[1]
        self.index = build_index(embeddings, kind="auto")

    @property
    def name(self) -> str:
        """What the page and /info show: the file or folder name, not its path on the server."""
        return Path(self.source).name

    def __len__(self) -> int:
        return len(self.texts)

    def search(self, query: np.ndarray, k: int) -> list[Hit]:
        """The `k` sentences nearest to one query embedding, most similar first."""
        from ..corpus.mine import search

        sims, ids = search(self.index, query.reshape(1, -1), k)
        return [Hit(int(self.rows[i]), self.texts[i], float(s)) for s, i in zip(sims[0], ids[0], strict=True) if i >= 0]


def load_index(path: str | Path, encoder, num_threads: int = 1) -> SearchIndex:
    """A SearchIndex from an embed-dataset folder or a text file (embedded here with `encoder`)."""
    path = Path(path)
    if path.is_dir():
        return _from_folder(path, encoder)
    if not path.is_file():
        raise PSPInputError(f"--index {path}: no such file or folder")
    from ..io.reading import read_sentences

    lines = read_sentences(path).rows
    keep = [i for i, line in enumerate(lines) if line.strip()]
    if not keep:
        raise PSPInputError(f"--index {path}: no sentences (every line is empty)")
    texts = [lines[i] for i in keep]
    logger.info("embedding %d sentences of %s for the search index", len(texts), path)
    embeddings = encoder.encode(texts, num_threads=num_threads)
    return SearchIndex(texts, np.asarray(keep, dtype=np.int64), embeddings, str(path))


def _from_folder(folder: Path, encoder) -> SearchIndex:
    from ..corpus.shards import load_embeddings, read_index
    from ..corpus.sources import iter_part, list_parts

    folder = folder.resolve()
    _refuse_links_outside(folder)
    info = read_index(folder)
    if info["dim"] != encoder.dim:
        raise PSPInputError(
            f"--index {folder}: its embeddings are {info['dim']}-d, the served model's {encoder.dim}-d "
            f"(embedded with {info.get('model')})"
        )
    rows, embeddings = load_embeddings(folder)
    if len(rows) == 0:
        raise PSPInputError(f"--index {folder}: no embeddings")
    # The folder holds no text of its own: the text is its input, copied into the folder under the input's name.
    # Nothing outside the folder is read, whatever its manifest.json names (a planted manifest could name any file).
    source = str(info["input"])
    text = folder / Path(source).name
    if not text.exists():
        raise PSPInputError(
            f"--index {folder}: its text ({source}, named in its manifest.json) is outside the folder, and psp serve "
            f"reads nothing outside it; copy the text into the folder as {text}"
        )
    try:
        parts = list_parts(str(text))
        for part in parts:
            _inside(folder, Path(part.name))
        all_texts = [t for part in parts for t in iter_part(part, info["column"], info["data_config"], info["split"])]
    except (PSPInputError, OSError) as error:
        raise PSPInputError(f"--index {folder}: cannot read its text from {text}: {error}") from None
    if len(all_texts) != info["rows"]:
        raise PSPInputError(f"--index {folder}: {text} has {len(all_texts)} rows, the embeddings {info['rows']}")
    keep = np.array([bool(all_texts[r].strip()) for r in rows.tolist()], dtype=bool)
    rows = rows[keep]
    texts = [all_texts[r] for r in rows.tolist()]
    return SearchIndex(texts, rows, np.asarray(embeddings)[keep], str(folder))


def _inside(folder: Path, path: Path) -> None:
    """Refuse `path` unless it resolves (links followed) inside `folder` (itself resolved)."""
    if not path.resolve().is_relative_to(folder):
        raise PSPInputError(f"--index {folder}: {path} leads outside the folder ({path.resolve()}); refused")


def _refuse_links_outside(folder: Path) -> None:
    """Every link in the folder must stay inside it: the manifest, the shards and the text are read through them."""
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            if path.is_symlink():
                _inside(folder, path)
