"""Multilingual distillation and the cross-lingual dev set: what a bitext run reads from its pairs before training.

Multilingual distillation (Reimers & Gurevych, 2020): the teacher embeds the English side of every pair once, and
each pair (xx, en) then trains both student(xx) and student(en) toward teacher(en), so the teacher's English space
becomes the space both languages share. The labels go through the same `TeacherCache` as English distillation
(keyed by sentence, labelled once, resumable): `BitextTeacher.prepare` labels only what the cache lacks. A cache
labelled from original-case text serves lowercased bitext (what `psp prepare bitext` writes) when the teacher
lowercases its input anyway (all-MiniLM-L6-v2 does): its vectors are then the same.

The dev set of a bitext run is a held-back slice of the pairs: one pair in `DEV_BUCKET` (by a hash of its text, so
the choice does not depend on the order the data is read in), up to `--dev-pairs`; training skips exactly those
pairs. Its score is the mining accuracy (100 - Tatoeba-style error, both directions averaged).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ...errors import PSPInputError
from ...teachers.combine import WHITEN_SHRINK, transform_rows
from .pairs import BAD_LINE, pair_key

DEV_BUCKET = 20  # one pair in 20 is a dev candidate


@dataclass
class BitextScan:
    """One pass over the pairs: the English sides (when asked) and the held-back dev pairs."""

    english: set[str] = field(default_factory=set)
    foreign: set[str] = field(default_factory=set)
    dev: list[tuple[str, str]] = field(default_factory=list)
    dev_keys: set[int] = field(default_factory=set)
    pairs: int = 0


def scan_bitext(
    source, dev_pairs: int, english: bool, foreign: bool = False, exclude: set[int] | None = None
) -> BitextScan:
    """Read `source` (a `PairSource`, non-English side first) once, in file order.

    `english` / `foreign`: collect the English / non-English sides of the training pairs (those to label);
    `exclude`: keys of pairs of an outside dev set, skipped like held-back ones (and returned in `dev_keys`)."""
    scan = BitextScan()
    exclude = exclude or set()
    scan.dev_keys.update(exclude)
    for chunk in source.dataset.iter(batch_size=4096):
        left, right = source.columns(chunk)
        bad = chunk.get(BAD_LINE) or [None] * len(left)
        for a, b, broken in zip(left, right, bad, strict=True):
            if broken is not None or not (isinstance(a, str) and isinstance(b, str) and a.strip() and b.strip()):
                continue
            scan.pairs += 1
            key = pair_key(a, b)
            if key in exclude:
                continue
            if len(scan.dev) < dev_pairs and key % DEV_BUCKET == 0 and key not in scan.dev_keys:
                scan.dev.append((a, b))
                scan.dev_keys.add(key)
            else:
                if english:
                    scan.english.add(b)
                if foreign:
                    scan.foreign.add(a)
    return scan


def mining_accuracy(encoder, pairs: Sequence[tuple[str, str]], batch_size: int = 1024) -> float:
    """100 x (1 - mean error) of nearest-cosine retrieval of each pair's other side, both directions."""
    from ...inference.similarity import unit_rows

    source = unit_rows(encoder.encode([a for a, _ in pairs], batch_size=batch_size))
    target = unit_rows(encoder.encode([b for _, b in pairs], batch_size=batch_size))
    similarity = source @ target.T
    gold = np.arange(len(pairs))
    errors = np.mean(similarity.argmax(axis=1) != gold) + np.mean(similarity.argmax(axis=0) != gold)
    return float(100.0 * (1.0 - errors / 2))


def _teacher_lowercases(name: str | None) -> bool:
    """Whether the teacher's tokenizer lowercases (read from its local folder; unknown counts as no)."""
    from ...teachers.labels import default_teacher_path, teacher_name

    try:
        path = default_teacher_path() if name in (None, teacher_name(None)) else Path(name)
    except FileNotFoundError:
        return False
    config = path / "tokenizer_config.json"
    if not config.is_file():
        return False
    return bool(json.loads(config.read_text(encoding="utf-8")).get("do_lower_case", False))


def _collect(cache, wanted: set[str], fold: bool) -> dict[str, np.ndarray]:
    """Vectors of the `wanted` sentences found in the cache's chunks (with `fold`: also under a lowercased key)."""
    import pyarrow.parquet as pq

    found: dict[str, np.ndarray] = {}
    for path in cache.chunk_files():
        sentences = pq.read_table(path, columns=["sentence"]).column("sentence").to_pylist()
        keys = [s.lower() for s in sentences] if fold else sentences
        rows = [row for row, key in enumerate(keys) if key in wanted and key not in found]
        if not rows:
            continue
        column = pq.read_table(path, columns=["embedding"]).column("embedding").combine_chunks()
        matrix = column.values.to_numpy(zero_copy_only=False).reshape(-1, column.type.list_size)
        for row in rows:
            found.setdefault(keys[row], matrix[row])
    return found


class BitextTeacher:
    """Teacher vectors (float16) of a bitext's sentences (the English sides; with a multilingual teacher also the
    other sides and monolingual text), looked up by sentence during training."""

    def __init__(self, vectors: dict[str, np.ndarray], teacher: str, cache_dir: Path, labelled_now: int):
        self.index = {text: row for row, text in enumerate(vectors)}
        self.vectors = np.stack(list(vectors.values())).astype(np.float16) if vectors else np.zeros((0, 0))
        self.teacher = teacher
        self.dim = int(self.vectors.shape[1])
        self.directory = cache_dir
        self.labelled_now = labelled_now
        self.counts: dict[str, int] = {}  # sentences labelled per role (english, other_language, monolingual)

    def __len__(self) -> int:
        return len(self.index)

    def transform(self, kind: str, shrink: float = WHITEN_SHRINK) -> None:
        """Distil toward the vectors centred or whitened over the run's sentences (`--teacher-transform`)."""
        if len(self.vectors):
            self.vectors = transform_rows(self.vectors, kind, shrink)

    @classmethod
    def prepare(
        cls,
        english: Iterable[str],
        cache_dir: str | os.PathLike,
        teacher: str | None,
        is_main: bool = True,
        wait_for_everyone: Callable[[], None] = lambda: None,
        say: Callable[[str], None] = lambda message: None,
        load: Callable[[str | None], object] | None = None,
    ) -> BitextTeacher:
        """Label (main process) what the cache lacks of `english` (any sentences to label, whatever their
        language), then read the vectors back (every process).

        `teacher`: a sentence-transformers path or Hub id, 'default' (all-MiniLM-L6-v2), or None for the teacher
        the cache names. `load` loads a teacher by name (default `labelling_teacher`; tests pass a fake).
        """
        from ...teachers.labels import TeacherCache, default_backend, labelling_teacher, teacher_name

        cache = TeacherCache(cache_dir)
        meta = cache.meta() or {}
        path = None if teacher in (None, "default") else teacher
        name = teacher_name(path) if teacher is not None else meta.get("teacher")
        if name is None:
            raise PSPInputError(f"--teacher-cache {cache_dir}: empty; give --teacher MODEL to label the English side")
        if meta and meta.get("teacher") != name:
            raise PSPInputError(
                f"--teacher-cache {cache_dir} holds labels of teacher {meta.get('teacher')!r}, not {name!r}: "
                "use another cache folder or drop --teacher"
            )
        wanted = set(english)
        fold = _teacher_lowercases(path if teacher is not None else name)
        labelled = 0
        if is_main:
            found = _collect(cache, wanted, False)
            missing = wanted - found.keys()
            if missing and fold:
                lowered = _collect(cache, {s.lower() for s in missing}, True)
                missing = {s for s in missing if s.lower() not in lowered}
            if missing:
                say(f"teacher {name}: labelling {len(missing):,} sentence(s) into {cache_dir}")
                # A cache keeps the backend it was started with; a new one gets the teacher's CPU default.
                source = path if teacher is not None else name
                backend = meta.get("backend", "torch") if meta else default_backend(source)
                if load is not None:
                    model = load(source)
                else:
                    model = labelling_teacher(source, backend, torch.get_num_threads(), Path(cache_dir) / "onnx")
                labelled = cache.label(sorted(missing), model, name=name, backend=backend)
        wait_for_everyone()
        found = _collect(cache, wanted, False)
        if fold and len(found) < len(wanted):
            lowered = _collect(cache, {s.lower() for s in wanted - found.keys()}, True)
            found.update({s: lowered[s.lower()] for s in wanted - found.keys() if s.lower() in lowered})
        if len(found) < len(wanted):
            example = next(iter(wanted - found.keys()))
            raise PSPInputError(f"--teacher-cache {cache_dir}: no teacher label for {example!r} after labelling")
        return cls(found, name, Path(cache_dir), labelled)

    def lookup(self, english: Sequence[str]) -> torch.Tensor:
        """Teacher vectors of `english` as float32 `(len, dim)`."""
        rows = np.fromiter((self.index[s] for s in english), dtype=np.int64, count=len(english))
        return torch.from_numpy(self.vectors[rows].astype(np.float32))

    def targets(self, foreign: Sequence[str], english: Sequence[str], mode: str) -> torch.Tensor:
        """The teacher vectors that the rows [student(xx); student(en)] of n pairs learn, as `(k, 2n, dim)`.

        `mode` (`--bitext-targets`): en, both sides toward teacher(en) (k = 1); same, each side toward its own
        vector (k = 1); both, the two target sets (k = 2), whose losses `bitext_distill_loss` averages."""
        en = self.lookup(english)
        toward_english = torch.cat([en, en])
        if mode == "en":
            return toward_english[None]
        own = torch.cat([self.lookup(foreign), en])
        return own[None] if mode == "same" else torch.stack([toward_english, own])

    def vectors_of(self, sentences: Sequence[str]) -> np.ndarray:
        """float16 vectors of `sentences` (all labelled), rows in that order."""
        return self.vectors[[self.index[s] for s in sentences]]

    def text_info(self) -> dict:
        """Teacher and label counts, for the training info and the model card."""
        info = {"teacher": self.teacher, "teacher_dim": self.dim}
        info["teacher_labelled_english"] = self.counts.get("english", len(self))
        if self.counts.get("other_language"):
            info["teacher_labelled_other_language"] = self.counts["other_language"]
        return info
