"""The one runner of `psp prepare`: read a recipe's inputs a batch at a time, filter, write a datasets folder.

A `Recipe` (see `prepare.py` for the two the papers use) says which columns to read, which filter steps to
run and what to call the output columns; `run_recipe` does everything else, the same way for every recipe:

    README.md                     dataset card; its YAML `configs` point at data/
    data/train-00000-of-0000N.parquet
    tokenizer/                    sentencepiece vocabulary trained on the output (tokenizer.json, ...)
    report/                       report.json, report.md, score/overlap histograms (PNG)

Arguments and the output folder are checked before any input is read past its header. The folder is built
beside `out` and moved into place only when everything succeeded, so a failed run leaves an old folder as it
was; the staging folders of a killed run (named after its process id) are removed by the next run into the
same `out`. Memory stays flat in the input size except for the duplicate filter's hashes (8 bytes per
distinct pair kept) and, when shuffling, one shard's rows at the end.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import PSPInputError
from ..io.writing import publish_folder, staging_folder
from .checks import check_inputs, check_output_folder, check_repo_id
from .filters import FilterChain, FilterStep, PairBatch
from .readers import BadLines, PairLayout, PairReader
from .report import DATA_DIR, REPORT_DIR, TOKENIZER_DIR, dataset_card, filter_histograms, step_report, write_report
from .shards import ShardWriter, estimate_num_shards

logger = logging.getLogger(__name__)


@dataclass
class Recipe:
    """A data recipe: where the pair is in the input, the filter steps, and the output columns.

    `steps` is called once the arguments and the output are checked, so a slow step (a scoring model,
    langid's tables) is built only for a run that can go ahead. `needs_score`: every input must have a
    score column; `computes_score`: a step fills the score itself. The output has the two `sides`, then
    `score` when the inputs have one or a step computes it, then `overlap` when `keeps_overlap`.
    """

    kind: str
    layout: PairLayout
    steps: Callable[[], list[FilterStep]]
    sides: tuple[str, str]
    languages: list[str]
    options: dict = field(default_factory=dict)
    needs_score: bool = False
    computes_score: bool = False
    keeps_overlap: bool = False
    # Languages the two sides are declared to be in, checked by language ID on the first rows when no langid step
    # filters them (a warning: de-en bitext prepared as --lang fr would otherwise pass in silence).
    declared_languages: tuple[str, str] | None = None


def _warn_on_other_language(first: Sequence[str], second: Sequence[str], languages: tuple[str, str]) -> None:
    """A loud warning when language ID on the first rows finds another language than the declared one."""
    from .language_id import language_mismatch

    for texts, language in zip((first, second), languages, strict=True):
        try:
            mismatch = language_mismatch([text for text in texts[:200] if text.strip()], language)
        except ImportError:  # langid's model comes with the data extra; without it there is nothing to check with
            return
        if mismatch:
            logger.warning(
                "psp prepare: warning: the side read as %s does not look like it: %s; check --lang and --columns "
                "(or pass --langid to drop the pairs in another language)",
                language,
                mismatch,
            )


# ---------------------------------------------------------------------------------------------- reading
class _LazyReader:
    """A `PairReader` reopened when iteration starts, so many inputs do not hold many open files.

    Its header is checked at construction: a wrong layout fails before any work is done.
    """

    def __init__(self, path: Path, layout: PairLayout, header: str, skip_bad_lines: bool, bad_lines: BadLines):
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


# ---------------------------------------------------------------------------------------------- the run
@dataclass
class RunSettings:
    """How `run_recipe` runs a recipe: where the output goes, how the inputs are read, the shards, the vocabulary.

    `out`: the datasets folder to write; `push_to_hub`: the Hub dataset repo to push it to (one or both).
    `tokenizer_texts`: more text the vocabulary is trained on besides the pairs (the monolingual text a
    multilingual-distillation run also reads), so its words have pieces of their own. `command`: the command line
    the report records (default: one built from the recipe's kind and inputs).
    """

    out: str | os.PathLike | None = None
    push_to_hub: str | None = None
    private: bool = False
    overwrite: bool = False
    header: str = "auto"
    skip_bad_lines: bool = False
    shuffle: bool = True
    seed: int = 0
    num_shards: int | None = None
    vocab_size: int = 50000
    train_tokenizer: bool = True
    lowercase: bool = True
    batch_size: int = 8192
    limit: int | None = None
    command: str | None = None
    progress: bool = False
    tokenizer_texts: Sequence[str] = ()

    def check(self) -> None:
        """Refuse settings that cannot run, before anything is read."""
        if self.out is None and self.push_to_hub is None:
            raise PSPInputError("give --output DIR, --push-to-hub REPO, or both")
        if self.batch_size < 1 or (self.num_shards is not None and self.num_shards < 1) or self.vocab_size < 1:
            raise PSPInputError("--batch-size, --num-shards and --vocab-size must be positive")


@dataclass
class _Output:
    """The columns a recipe writes over given inputs, and their Arrow schema."""

    recipe: Recipe
    columns: list[str]
    with_score: bool
    schema: object  # pyarrow.Schema

    @classmethod
    def of(cls, recipe: Recipe, readers: Sequence[_LazyReader]) -> _Output:
        import pyarrow as pa

        columns = list(recipe.sides)
        with_score = recipe.computes_score or any(reader.has_score for reader in readers)
        columns += ["score"] if with_score else []
        columns += ["overlap"] if recipe.keeps_overlap else []
        schema = pa.schema([pa.field(name, pa.string() if name in recipe.sides else pa.float32()) for name in columns])
        return cls(recipe, columns, with_score, schema)

    def to_columns(self, batch: PairBatch) -> dict:
        import pyarrow as pa

        sides = self.recipe.sides
        data = {sides[0]: batch.first.tolist(), sides[1]: batch.second.tolist()}
        if self.with_score:
            data["score"] = pa.array(batch.score, type=pa.float32(), from_pandas=True)
        if self.recipe.keeps_overlap:
            data["overlap"] = batch.overlap.astype(np.float32)
        return data


def run_recipe(recipe: Recipe, inputs: Sequence[str | os.PathLike], settings: RunSettings) -> dict:
    """Run `recipe` over `inputs` into the folder `settings.out` and/or the Hub dataset repo `settings.push_to_hub`.

    Returns the report (also written to `report/report.json`).
    """
    settings.check()
    paths = check_inputs(inputs)
    out = None if settings.out is None else Path(settings.out)
    if out is not None:
        check_output_folder(out, settings.overwrite, inputs=paths)
    if settings.push_to_hub is not None:
        check_repo_id(settings.push_to_hub)
    opened = _open_inputs(recipe, paths, settings)
    chain = FilterChain(recipe.steps())
    output = _Output.of(recipe, opened.readers)
    staging = _staging_folder(out)
    keep_staging = False
    try:
        written = _filter_and_write(recipe, opened, chain, output, staging, settings)
        _check_not_empty(chain)
        tokenizer_info = _tokenizer_step(written, output, staging, settings)
        report = _report(recipe, opened, chain, output, written, tokenizer_info, settings)
        write_report(report, staging / REPORT_DIR)
        (staging / "README.md").write_text(dataset_card(report), encoding="utf-8")
        if out is not None:
            publish_folder(staging, out)
            report["path"] = str(out)
        if settings.push_to_hub is not None:
            from .dataset_repo import push_dataset

            try:
                report["url"] = push_dataset(
                    out if out is not None else staging,
                    settings.push_to_hub,
                    private=settings.private,
                    commit_message=f"psp prepare {recipe.kind}: {chain.pairs_out:,} pairs",
                )
            except Exception:
                # Without --output the prepared folder exists only in `staging`: keep it for the retry the error gives.
                keep_staging = out is None
                raise
        return report
    finally:
        if staging.exists() and not keep_staging:
            shutil.rmtree(staging, ignore_errors=True)


@dataclass
class _Inputs:
    """The checked input files, a reader for each, and the bad lines they share."""

    paths: list[Path]
    readers: list[_LazyReader]
    bad_lines: BadLines


@dataclass
class _Written:
    """The shards written, and the seconds it took (filtering and writing, then the vocabulary)."""

    shards: list[Path]
    seconds: dict[str, float]
    pairs_per_second: float


def _open_inputs(recipe: Recipe, paths: list[Path], settings: RunSettings) -> _Inputs:
    """A reader per input, each header checked; an input without the score column a recipe needs is refused."""
    bad_lines = BadLines()
    readers = [_LazyReader(path, recipe.layout, settings.header, settings.skip_bad_lines, bad_lines) for path in paths]
    if recipe.needs_score:
        for reader in readers:
            if not reader.has_score:
                raise PSPInputError(
                    f"{reader.stats.path}: no score column for the paraphrase-score filter; give --score-column, "
                    "--score-model MODEL to compute scores, or --no-score-filter"
                )
    return _Inputs(paths, readers, bad_lines)


def _staging_folder(out: Path | None) -> Path:
    """The folder the output is built in: beside `out` (moved into place at the end), or a temporary one."""
    return Path(tempfile.mkdtemp(prefix="psp-prepare-")) if out is None else staging_folder(out)


def _filter_and_write(
    recipe: Recipe, inputs: _Inputs, chain: FilterChain, output: _Output, staging: Path, settings: RunSettings
) -> _Written:
    """Read, filter and write the shards into `staging`."""
    shard_count = settings.num_shards or estimate_num_shards(inputs.paths)
    writer = ShardWriter(
        staging / DATA_DIR, output.schema, seed=settings.seed if settings.shuffle else None, num_shards=shard_count
    )
    bar = None
    if settings.progress:
        from tqdm.auto import tqdm

        bar = tqdm(unit=" pairs", desc=f"prepare {recipe.kind}", file=sys.stderr)
    started, started_cpu = time.perf_counter(), time.process_time()
    try:
        for number, (first, second, score) in enumerate(_batches(inputs.readers, settings.batch_size, settings.limit)):
            if number == 0 and recipe.declared_languages:
                _warn_on_other_language(first, second, recipe.declared_languages)
            batch = chain.apply(PairBatch.from_lists(first, second, score))
            if len(batch):
                writer.write(output.to_columns(batch))
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
    seconds = {
        "filter_and_write": round(filter_seconds, 3),
        "filter_and_write_cpu": round(time.process_time() - started_cpu, 3),
        "tokenizer": 0.0,
    }
    return _Written(shards, seconds, chain.pairs_in / filter_seconds if filter_seconds > 0 else 0.0)


def _check_not_empty(chain: FilterChain) -> None:
    """An empty dataset is no success (a header-only file, --lang fr on de-en data)."""
    if chain.pairs_out:
        return
    removed = ", ".join(f"{stats.name} {stats.removed:,}" for stats in chain.stats if stats.enabled and stats.removed)
    raise PSPInputError(
        f"no pairs left to write: {chain.pairs_in:,} read"
        + (f", removed by {removed}" if removed else "")
        + "; check the inputs and the options (--lang, --columns, the filters); nothing was written"
    )


def _tokenizer_step(written: _Written, output: _Output, staging: Path, settings: RunSettings) -> dict | None:
    """Train the vocabulary on the written pairs (when asked; its seconds go to `written`); its report entry."""
    if not settings.train_tokenizer:
        return None
    started = time.perf_counter()
    columns = output.columns
    tokenizer = _train_tokenizer(
        written.shards,
        columns[:2],
        settings.vocab_size,
        staging / TOKENIZER_DIR,
        settings.lowercase,
        settings.tokenizer_texts,
    )
    written.seconds["tokenizer"] = round(time.perf_counter() - started, 3)
    info = {
        "path": TOKENIZER_DIR,
        "pieces": len(tokenizer),
        "vocab_size_asked": settings.vocab_size,
        "lowercase": settings.lowercase,
        "trained_on": columns[:2],
        **({"extra_texts": len(settings.tokenizer_texts)} if settings.tokenizer_texts else {}),
    }
    if len(tokenizer) < settings.vocab_size:
        from .checks import vocabulary_warning

        info["warning"] = vocabulary_warning(len(tokenizer), settings.vocab_size)
    return info


def _report(
    recipe: Recipe,
    inputs: _Inputs,
    chain: FilterChain,
    output: _Output,
    written: _Written,
    tokenizer_info: dict | None,
    settings: RunSettings,
) -> dict:
    """The run's report: settings, inputs, what each step removed, the shards, the vocabulary, the timings."""
    options = {
        **recipe.options,
        "shuffle": settings.shuffle,
        "seed": settings.seed,
        "skip_bad_lines": settings.skip_bad_lines,
        "header": settings.header,
        "vocab_size": settings.vocab_size,
        "train_tokenizer": settings.train_tokenizer,
        "limit": settings.limit,
    }
    return {
        "kind": recipe.kind,
        "lang": recipe.languages[0],
        "languages": recipe.languages,
        "columns": output.columns,
        "command": settings.command or f"psp prepare {recipe.kind} " + " ".join(str(p) for p in inputs.paths),
        "options": options,
        "psp_hf_version": _psp_version(),
        "inputs": [vars(reader.stats) for reader in inputs.readers],
        "bad_lines": {"count": inputs.bad_lines.count, "examples": inputs.bad_lines.examples},
        "pairs_in": chain.pairs_in,
        "pairs_out": chain.pairs_out,
        "steps": step_report(chain),
        "histograms": filter_histograms(chain),
        "num_shards": len(written.shards),
        "shards": [f"{DATA_DIR}/{path.name}" for path in written.shards],
        "tokenizer": tokenizer_info,
        "seconds": written.seconds,
        "pairs_per_second": written.pairs_per_second,
        "repo_id": settings.push_to_hub,
        "out": None if settings.out is None else str(Path(settings.out)),
    }


def _psp_version() -> str:
    from .. import __version__

    return __version__


def _train_tokenizer(
    shards: list[Path],
    columns: list[str],
    vocab_size: int,
    output_dir: Path,
    lowercase: bool,
    extra: Sequence[str] = (),
):
    import pyarrow.parquet as pq

    from ..tokenization.pieces import train_tokenizer

    def texts() -> Iterator[str]:
        # Both sides feed one vocabulary (for bitext: shared by the two languages, as in P-SP).
        for shard in shards:
            for record_batch in pq.ParquetFile(shard).iter_batches(columns=columns, batch_size=65536):
                for column in record_batch.columns:
                    yield from column.to_pylist()
        yield from extra

    return train_tokenizer(texts(), vocab_size=vocab_size, output_dir=output_dir, lowercase=lowercase)
