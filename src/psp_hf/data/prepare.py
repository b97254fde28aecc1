"""The papers' data recipes as streamed jobs: ParaNMT-style paraphrase pairs and X–English bitext.

`prepare_paraphrases` and `prepare_bitext` read their inputs a batch at a time, run the filters of
`filters.py`, and write a datasets folder:

    README.md                     dataset card; its YAML `configs` point at data/
    data/train-00000-of-0000N.parquet
    tokenizer/                    sentencepiece vocabulary trained on the output (tokenizer.json, ...)
    report/                       report.json, report.md, score/overlap histograms (PNG)

`datasets.load_dataset(folder, streaming=True)` reads it, and so does the same call on a Hub repo after
`push_dataset`. Memory stays flat in the input size except for the duplicate filter's hashes (8 bytes per
distinct pair kept) and, when shuffling, one shard's rows at the end.

Output columns: paraphrases `sentence1`, `sentence2`, `overlap` (+ `score` when the input has one or a
score model is given); bitext `<lang>` (e.g. `de`) and `en`.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from ..errors import PSPInputError
from .filters import (
    DropDuplicates,
    DropEmpty,
    FilterChain,
    LanguageMatch,
    LengthRange,
    Normalize,
    OverlapMaximum,
    PairBatch,
    ScoreRange,
    length_unit_for,
)
from .readers import BadLines, Column, PairReader, bitext_layout, paraphrase_layout
from .report import DATA_DIR, REPORT_DIR, TOKENIZER_DIR, dataset_card, write_report
from .shards import ShardWriter, estimate_num_shards


class ModelScorer:
    """Paraphrase score of a pair = cosine of a psp model's embeddings of its two sides."""

    def __init__(self, model: str | os.PathLike, batch_size: int = 1024):
        from .. import load

        self.model_name = str(model)
        self.model = load(model)
        self.batch_size = batch_size

    def __call__(self, first: Sequence[str], second: Sequence[str]) -> np.ndarray:
        a = self.model.encode(list(first), batch_size=self.batch_size, normalize_embeddings=True)
        b = self.model.encode(list(second), batch_size=self.batch_size, normalize_embeddings=True)
        return np.einsum("ij,ij->i", a, b).astype(np.float64)


# ---------------------------------------------------------------------------------------------- helpers
def _check_inputs(inputs: Sequence[str | os.PathLike]) -> list[Path]:
    if not inputs:
        raise PSPInputError("no input files given")
    paths = [Path(p) for p in inputs]
    for path in paths:
        if not path.is_file():
            raise PSPInputError(f"{path}: no such file")
    return paths


def _check_range(name: str, low: float, high: float) -> None:
    if low > high:
        raise PSPInputError(f"{name}: minimum {low} is above maximum {high}")


def _staging_dir(out: Path, overwrite: bool) -> Path:
    if out.exists() and not overwrite:
        raise PSPInputError(f"{out}: already exists; pass --overwrite to replace it")
    if out.exists() and not out.is_dir():
        raise PSPInputError(f"{out}: exists and is not a folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))


def _publish(staging: Path, out: Path) -> None:
    """Move the finished folder into place; an old `out` is replaced only now, after everything succeeded."""
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        os.replace(out, old / "previous")
        os.replace(staging, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, out)


def _batches(
    readers: Sequence[_LazyReader], batch_size: int, limit: int | None
) -> Iterator[tuple[list[str], list[str], list[float] | None]]:
    first: list[str] = []
    second: list[str] = []
    score: list[float] = []
    with_score = any(reader.has_score for reader in readers)
    seen = 0
    for reader in readers:
        if limit is not None and seen >= limit:
            break
        for a, b, s in reader:
            seen += 1
            first.append(a)
            second.append(b)
            if with_score:
                score.append(np.nan if s is None else s)
            if len(first) >= batch_size:
                yield first, second, (score if with_score else None)
                first, second, score = [], [], []
            # Stop right after the last wanted pair, so no further line is read (or counted).
            if limit is not None and seen >= limit:
                break
    if first:
        yield first, second, (score if with_score else None)


def _open_readers(paths, layout, header, skip_bad_lines, bad_lines) -> list[_LazyReader]:
    return [_LazyReader(path, layout, header, skip_bad_lines, bad_lines) for path in paths]


class _LazyReader:
    """A `PairReader` reopened when iteration starts, so many inputs do not hold many open files.

    Its header is checked at construction: a wrong layout fails before any work is done.
    """

    def __init__(self, path, layout, header, skip_bad_lines, bad_lines):
        self._args = (path, layout, header, skip_bad_lines, bad_lines)
        # A throwaway BadLines: lines skipped while probing are counted again when the file is read.
        probe = PairReader(path, layout, header=header, skip_bad_lines=skip_bad_lines, bad_lines=BadLines())
        self.has_score = probe.has_score
        self.stats = probe.stats
        probe.close()
        self.stats.pairs = self.stats.bad_lines = 0

    def __iter__(self):
        path, layout, header, skip_bad_lines, bad_lines = self._args
        reader = PairReader(path, layout, header=header, skip_bad_lines=skip_bad_lines, bad_lines=bad_lines)
        self.stats = reader.stats
        try:
            yield from reader
        finally:
            reader.close()


def _psp_version() -> str:
    from .. import __version__

    return __version__


# ---------------------------------------------------------------------------------------------- the run
def _run(
    *,
    kind: str,
    paths: list[Path],
    readers: list[_LazyReader],
    chain: FilterChain,
    columns: list[str],
    schema,
    to_columns,
    out: Path | None,
    push_to_hub: str | None,
    private: bool,
    overwrite: bool,
    shuffle: bool,
    seed: int,
    num_shards: int | None,
    vocab_size: int,
    train_tokenizer: bool,
    lowercase: bool,
    batch_size: int,
    limit: int | None,
    bad_lines: BadLines,
    report_extra: dict,
    options: dict,
    command: str | None,
    progress: bool,
) -> dict:
    if out is None and push_to_hub is None:
        raise PSPInputError("give --out DIR, --push-to-hub REPO, or both")
    staging = _staging_dir(out, overwrite) if out is not None else Path(tempfile.mkdtemp(prefix="psp-prepare-"))
    keep_staging = False
    try:
        shard_count = num_shards or estimate_num_shards(paths)
        writer = ShardWriter(staging / DATA_DIR, schema, seed=seed if shuffle else None, num_shards=shard_count)
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(unit=" pairs", desc=f"prepare {kind}", file=sys.stderr)
        started, started_cpu = time.perf_counter(), time.process_time()
        try:
            for first, second, score in _batches(readers, batch_size, limit):
                batch = chain.apply(PairBatch.from_lists(first, second, score))
                if len(batch):
                    writer.write(to_columns(batch))
                if bar is not None:
                    bar.update(len(first))
            shards = writer.close()
        except BaseException:
            writer.abort()
            raise
        finally:
            if bar is not None:
                bar.close()
        filter_seconds = time.perf_counter() - started
        filter_cpu_seconds = time.process_time() - started_cpu

        tokenizer_info = None
        tokenizer_seconds = 0.0
        if train_tokenizer and chain.pairs_out:
            started = time.perf_counter()
            tokenizer = _train_tokenizer(shards, columns[:2], vocab_size, staging / TOKENIZER_DIR, lowercase)
            tokenizer_seconds = time.perf_counter() - started
            tokenizer_info = {
                "path": TOKENIZER_DIR,
                "pieces": len(tokenizer),
                "vocab_size_asked": vocab_size,
                "lowercase": lowercase,
                "trained_on": columns[:2],
            }

        steps = []
        for step, stats in zip(chain.steps, chain.stats, strict=True):
            entry = {
                "name": stats.name,
                "enabled": stats.enabled,
                "description": stats.description,
                "removed": stats.removed,
                "seconds": round(stats.seconds, 3),
            }
            if isinstance(step, Normalize):
                entry["changed"] = step.changed
            if isinstance(step, DropDuplicates):
                entry["hash_bytes"] = step.seen.nbytes
            steps.append(entry)
        report = {
            "kind": kind,
            **report_extra,
            "columns": columns,
            "command": command or f"psp prepare {kind} " + " ".join(str(p) for p in paths),
            "options": options,
            "psp_hf_version": _psp_version(),
            "inputs": [vars(reader.stats) for reader in readers],
            "bad_lines": {"count": bad_lines.count, "examples": bad_lines.examples},
            "pairs_in": chain.pairs_in,
            "pairs_out": chain.pairs_out,
            "steps": steps,
            "histograms": _histograms(chain),
            "num_shards": len(shards),
            "shards": [f"{DATA_DIR}/{path.name}" for path in shards],
            "tokenizer": tokenizer_info,
            "seconds": {
                "filter_and_write": round(filter_seconds, 3),
                "filter_and_write_cpu": round(filter_cpu_seconds, 3),
                "tokenizer": round(tokenizer_seconds, 3),
            },
            "pairs_per_second": chain.pairs_in / filter_seconds if filter_seconds > 0 else 0.0,
        }
        report["repo_id"] = push_to_hub
        report["out"] = None if out is None else str(out)
        write_report(report, staging / REPORT_DIR)
        (staging / "README.md").write_text(dataset_card(report), encoding="utf-8")
        if out is not None:
            _publish(staging, out)
            report["path"] = str(out)
        folder = out if out is not None else staging
        if push_to_hub is not None:
            try:
                report["url"] = push_dataset(
                    folder,
                    push_to_hub,
                    private=private,
                    commit_message=f"psp prepare {kind}: {chain.pairs_out:,} pairs",
                )
            except Exception:
                # Without --out the prepared folder exists only in `staging`: keep it for the retry the error gives.
                keep_staging = out is None
                raise
        return report
    finally:
        if staging.exists() and not keep_staging:
            shutil.rmtree(staging, ignore_errors=True)


def _histograms(chain: FilterChain) -> dict:
    result = {}
    overlap = chain.step("overlap")
    if isinstance(overlap, OverlapMaximum):
        marks = [(overlap.maximum, f"max {overlap.maximum}")] if overlap.enabled else []
        result["overlap"] = {
            **overlap.histogram.to_dict(),
            "title": "trigram overlap of the pairs reaching the overlap filter",
            "xlabel": "shared trigrams / trigrams of the shorter side",
            "marks": marks,
        }
    score = chain.step("score")
    if isinstance(score, ScoreRange):
        marks = [(score.low, f"min {score.low}"), (score.high, f"max {score.high}")] if score.enabled else []
        result["score"] = {
            **score.histogram.to_dict(),
            "title": "paraphrase score of the pairs reaching the score filter",
            "xlabel": "score",
            "marks": marks,
        }
    return result


def _train_tokenizer(shards: list[Path], columns: list[str], vocab_size: int, output_dir: Path, lowercase: bool):
    import pyarrow.parquet as pq

    from ..tokenizer import train_tokenizer

    def texts() -> Iterator[str]:
        # Both sides feed one vocabulary (for bitext: shared by the two languages, as in P-SP).
        for shard in shards:
            for record_batch in pq.ParquetFile(shard).iter_batches(columns=columns, batch_size=65536):
                for column in record_batch.columns:
                    yield from column.to_pylist()

    return train_tokenizer(texts(), vocab_size=vocab_size, output_dir=output_dir, lowercase=lowercase)


# ---------------------------------------------------------------------------------------------- public API
def prepare_paraphrases(
    inputs: Sequence[str | os.PathLike],
    out: str | os.PathLike | None = None,
    *,
    push_to_hub: str | None = None,
    private: bool = False,
    overwrite: bool = False,
    columns: Sequence[Column] | None = None,
    score_column: Column | None = None,
    header: str = "auto",
    skip_bad_lines: bool = False,
    language: str = "en",
    langid: bool = True,
    langid_candidates: Sequence[str] | None = None,
    score_filter: bool = True,
    min_score: float = 0.7,
    max_score: float = 1.0,
    score_model: str | os.PathLike | None = None,
    overlap_filter: bool = True,
    max_overlap: float = 0.5,
    length_filter: bool = True,
    min_tokens: int = 5,
    max_tokens: int = 40,
    length_unit: str = "auto",
    lowercase: bool = True,
    dedupe: bool = True,
    shuffle: bool = True,
    seed: int = 0,
    num_shards: int | None = None,
    vocab_size: int = 50000,
    train_tokenizer: bool = True,
    batch_size: int = 8192,
    limit: int | None = None,
    command: str | None = None,
    progress: bool = False,
) -> dict:
    """Filter ParaNMT-format paraphrase pairs into a datasets folder (and/or a Hub dataset repo).

    Steps, in order, each counted in the report: lowercasing (and whitespace folding), empty side, token
    length of both sides in [min_tokens, max_tokens], trigram overlap <= max_overlap, exact duplicates,
    langid of both sides == `language`, paraphrase score in [min_score, max_score] (the input's score
    column, or the cosine of `score_model`). `langid_candidates` restricts the languages langid chooses from
    (default: all 97 it knows). Returns the report (also written to `report/report.json`).
    """
    paths = _check_inputs(inputs)
    _check_range("--min-score/--max-score", min_score, max_score)
    _check_range("--min-tokens/--max-tokens", min_tokens, max_tokens)
    if not 0.0 <= max_overlap <= 1.0:
        raise PSPInputError(f"--max-overlap must be between 0 and 1, got {max_overlap}")
    bad_lines = BadLines()
    layout = paraphrase_layout(columns, score_column)
    readers = _open_readers(paths, layout, header, skip_bad_lines, bad_lines)
    if score_filter and score_model is None:
        for reader in readers:
            if not reader.has_score:
                raise PSPInputError(
                    f"{reader.stats.path}: no score column for the paraphrase-score filter; give --score-column, "
                    "--score-model MODEL to compute scores, or --no-score-filter"
                )
    language_step = LanguageMatch((language, language), enabled=langid, candidates=langid_candidates)
    try:
        language_step.check()
    except ValueError as error:
        raise PSPInputError(f"--lang: {error}") from None
    unit = length_unit_for(language) if length_unit == "auto" else length_unit
    scorer = ModelScorer(score_model) if score_model is not None else None
    chain = FilterChain(
        [
            Normalize(lowercase),
            DropEmpty(),
            LengthRange(min_tokens, max_tokens, (unit, unit), enabled=length_filter),
            OverlapMaximum(max_overlap, enabled=overlap_filter),
            DropDuplicates(ordered=False, enabled=dedupe),
            language_step,
            ScoreRange(min_score, max_score, scorer=scorer, enabled=score_filter),
        ]
    )
    import pyarrow as pa

    with_score = scorer is not None or any(reader.has_score for reader in readers)
    fields = [pa.field("sentence1", pa.string()), pa.field("sentence2", pa.string())]
    if with_score:
        fields.append(pa.field("score", pa.float32()))
    fields.append(pa.field("overlap", pa.float32()))
    schema = pa.schema(fields)

    def to_columns(batch: PairBatch) -> dict:
        data = {"sentence1": batch.first.tolist(), "sentence2": batch.second.tolist()}
        if with_score:
            data["score"] = pa.array(batch.score, type=pa.float32(), from_pandas=True)
        data["overlap"] = batch.overlap.astype(np.float32)
        return data

    options = {
        "language": language,
        "langid": langid,
        "langid_candidates": langid_candidates,
        "score_filter": score_filter,
        "min_score": min_score,
        "max_score": max_score,
        "score_model": None if score_model is None else str(score_model),
        "overlap_filter": overlap_filter,
        "max_overlap": max_overlap,
        "length_filter": length_filter,
        "min_tokens": min_tokens,
        "max_tokens": max_tokens,
        "length_unit": unit,
        "lowercase": lowercase,
        "dedupe": dedupe,
        "shuffle": shuffle,
        "seed": seed,
        "skip_bad_lines": skip_bad_lines,
        "header": header,
        "vocab_size": vocab_size,
        "train_tokenizer": train_tokenizer,
        "limit": limit,
    }
    return _run(
        kind="paraphrases",
        paths=paths,
        readers=readers,
        chain=chain,
        columns=[f.name for f in fields],
        schema=schema,
        to_columns=to_columns,
        out=None if out is None else Path(out),
        push_to_hub=push_to_hub,
        private=private,
        overwrite=overwrite,
        shuffle=shuffle,
        seed=seed,
        num_shards=num_shards,
        vocab_size=vocab_size,
        train_tokenizer=train_tokenizer,
        lowercase=lowercase,
        batch_size=batch_size,
        limit=limit,
        bad_lines=bad_lines,
        report_extra={"lang": language, "languages": [language]},
        options=options,
        command=command,
        progress=progress,
    )


def prepare_bitext(
    inputs: Sequence[str | os.PathLike],
    lang: str,
    out: str | os.PathLike | None = None,
    *,
    push_to_hub: str | None = None,
    private: bool = False,
    overwrite: bool = False,
    columns: Sequence[Column] | None = None,
    header: str = "auto",
    skip_bad_lines: bool = False,
    length_filter: bool = True,
    min_tokens: int = 3,
    max_tokens: int = 100,
    length_unit: str = "auto",
    langid: bool = False,
    langid_candidates: Sequence[str] | None = None,
    lowercase: bool = True,
    dedupe: bool = True,
    shuffle: bool = True,
    seed: int = 0,
    num_shards: int | None = None,
    vocab_size: int = 50000,
    train_tokenizer: bool = True,
    batch_size: int = 8192,
    limit: int | None = None,
    command: str | None = None,
    progress: bool = False,
) -> dict:
    """Filter `lang`–English bitext into a datasets folder with columns `<lang>` and `en`.

    Steps: lowercasing, empty side, token length of both sides in [min_tokens, max_tokens] (the `lang` side
    in characters for languages written without spaces, e.g. zh/ja/th, unless `length_unit` says otherwise),
    exact duplicates of the ordered pair, optionally langid (`lang` side is `lang`, English side is `en`),
    then a random order. The sentencepiece vocabulary is trained on both sides together.
    """
    paths = _check_inputs(inputs)
    if not lang or lang == "en":
        raise PSPInputError(f"--lang must name the non-English language (e.g. de), got {lang!r}")
    _check_range("--min-tokens/--max-tokens", min_tokens, max_tokens)
    bad_lines = BadLines()
    layout = bitext_layout(lang, columns)
    readers = _open_readers(paths, layout, header, skip_bad_lines, bad_lines)
    language_step = LanguageMatch((lang, "en"), enabled=langid, candidates=langid_candidates)
    try:
        language_step.check()
    except ValueError as error:
        raise PSPInputError(f"--lang: {error}") from None
    unit = length_unit_for(lang) if length_unit == "auto" else length_unit
    chain = FilterChain(
        [
            Normalize(lowercase),
            DropEmpty(),
            LengthRange(min_tokens, max_tokens, (unit, "words"), enabled=length_filter),
            DropDuplicates(ordered=True, enabled=dedupe),
            language_step,
        ]
    )
    import pyarrow as pa

    schema = pa.schema([pa.field(lang, pa.string()), pa.field("en", pa.string())])

    def to_columns(batch: PairBatch) -> dict:
        return {lang: batch.first.tolist(), "en": batch.second.tolist()}

    options = {
        "lang": lang,
        "langid": langid,
        "langid_candidates": langid_candidates,
        "length_filter": length_filter,
        "min_tokens": min_tokens,
        "max_tokens": max_tokens,
        "length_unit": unit,
        "lowercase": lowercase,
        "dedupe": dedupe,
        "shuffle": shuffle,
        "seed": seed,
        "skip_bad_lines": skip_bad_lines,
        "header": header,
        "vocab_size": vocab_size,
        "train_tokenizer": train_tokenizer,
        "limit": limit,
    }
    return _run(
        kind="bitext",
        paths=paths,
        readers=readers,
        chain=chain,
        columns=[lang, "en"],
        schema=schema,
        to_columns=to_columns,
        out=None if out is None else Path(out),
        push_to_hub=push_to_hub,
        private=private,
        overwrite=overwrite,
        shuffle=shuffle,
        seed=seed,
        num_shards=num_shards,
        vocab_size=vocab_size,
        train_tokenizer=train_tokenizer,
        lowercase=lowercase,
        batch_size=batch_size,
        limit=limit,
        bad_lines=bad_lines,
        report_extra={"lang": lang, "languages": [lang, "en"]},
        options=options,
        command=command,
        progress=progress,
    )


# ---------------------------------------------------------------------------------------------- Hub
def push_dataset(
    folder: str | os.PathLike,
    repo_id: str,
    private: bool = False,
    token: str | None = None,
    commit_message: str | None = None,
) -> str:
    """Upload a prepared folder as a Hub dataset repo (created if missing) in one commit; returns the repo URL.

    The uploaded card's `load_dataset(...)` example names `repo_id`; the local folder is not modified.
    Raises `psp_hf.hub.PSPPushError` (with a `psp push ... --repo-type dataset` retry command) on Hub errors.
    """
    from ..hub import push_folder

    folder = Path(folder)
    extra = {}
    card = folder / "README.md"
    if card.is_file():
        text = card.read_text(encoding="utf-8")
        extra["README.md"] = re.sub(r'load_dataset\("[^"]*"', f'load_dataset("{repo_id}"', text, count=1).encode()
    return push_folder(
        folder,
        repo_id,
        private=private,
        token=token,
        repo_type="dataset",
        commit_message=commit_message or "psp prepare",
        extra_files=extra,
    )


def tokenizer_folder(dataset: str | os.PathLike, revision: str | None = None, token: str | None = None) -> Path | None:
    """The `tokenizer/` folder saved with a prepared dataset (local folder or Hub dataset repo), or None."""
    path = Path(dataset)
    if path.is_dir():
        folder = path / TOKENIZER_DIR
        return folder if (folder / "tokenizer.json").is_file() else None
    from huggingface_hub import snapshot_download

    local = Path(
        snapshot_download(
            repo_id=str(dataset),
            repo_type="dataset",
            revision=revision,
            token=token,
            allow_patterns=[f"{TOKENIZER_DIR}/*"],
        )
    )
    folder = local / TOKENIZER_DIR
    return folder if (folder / "tokenizer.json").is_file() else None


def load_prepared_tokenizer(dataset: str | os.PathLike, revision: str | None = None, token: str | None = None):
    """The fast tokenizer trained by `psp prepare` for a dataset folder or Hub dataset repo (None if absent)."""
    folder = tokenizer_folder(dataset, revision=revision, token=token)
    if folder is None:
        return None
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(folder))
