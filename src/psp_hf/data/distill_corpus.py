"""The distillation corpus (unlabelled English text for the teacher to label): gather, clean, dedupe, and keep
evaluation text out.

Sources are the non-evaluation English text of the shared data folder (Flickr30k/Multi30k captions, WMT news
English sides) plus text that package registries ship (see `registry_sources`). The hard rule: no sentence of
any evaluation set (STS 2012–2017 incl. the 2012 training sets, STS-B, SICK, SentEval, MRPC, Tatoeba) enters
the corpus. Sentences are compared by `normalize_key` (NFKC, lowercased, Traditional Chinese folded, only letters
and digits kept), which also matches the tokenized, lower-cased SentEval copies against raw text.

Run: ``psp prepare distill-corpus -o CORPUS`` (`build_distill_corpus`) writes ``sentences.parquet`` (columns
``sentence``, ``source``), ``sentences.txt`` (one a line) and ``report.json`` (counts per source). Reports written
before the rename name the evaluation matches ``pool_sentences_matched`` (`evaluation_matches` reads both).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..data_folder import data_dir, existing_data_dir
from ..errors import PSPInputError
from ..io.reading import iter_tsv
from ..io.writing import atomic_path
from ..tokenization.chinese_script import fold_traditional

STS_YEARS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STS12-train")


def normalize_key(sentence: str) -> str:
    """The comparison key: NFKC, lowercased, Traditional Chinese folded into Simplified (as a Chinese vocabulary
    reads it), only letters and digits (spacing and punctuation ignored)."""
    text = fold_traditional(unicodedata.normalize("NFKC", sentence).lower())
    return "".join(ch for ch in text if ch.isalnum())


# ----------------------------------------------------------------------------------------------- evaluation sets
def _tsv_columns(path: Path, columns: tuple[int, ...]) -> Iterator[str]:
    """The given 0-based columns of a headed TSV file; a row without them is an error naming file:line."""
    needed = max(columns) + 1
    for number, row in iter_tsv(path, header=True):
        if len(row) < needed:
            raise PSPInputError(f"{path}:{number}: expected at least {needed} tab-separated fields, got {len(row)}")
        for column in columns:
            yield row[column]


def evaluation_sentences(root: str | Path | None = None) -> dict[str, list[str]]:
    """Every sentence of every evaluation set in the data folder, by set name.

    Raises `FileNotFoundError` when an expected folder is missing: a silent gap would let evaluation text leak.
    """
    base = data_dir(root)
    sets: dict[str, list[str]] = {}

    # A folder written by `psp data fetch` holds only the sets it can be scored on, and they are all here.
    fetched = (base / "SOURCES.tsv").is_file()

    def need(path: Path) -> Path:
        if not path.exists() and not fetched:
            raise FileNotFoundError(f"{path}: evaluation data missing; cannot guarantee the exclusion rule")
        return path

    for year in STS_YEARS:
        sets[year] = [
            s for p in sorted(need(base / "sts" / "en" / year).glob("*.tsv")) for s in _tsv_columns(p, (1, 2))
        ]
    # STS17: every side (the non-English ones are harmless and keep the rule simple).
    sets["STS17"] = [s for p in sorted(need(base / "sts" / "sts17").glob("*.tsv")) for s in _tsv_columns(p, (1, 2))]
    sets["STS-B"] = [
        s for p in sorted(need(base / "sts" / "stsbenchmark").glob("*.tsv")) for s in _tsv_columns(p, (5, 6))
    ]
    sets["SICK"] = [s for p in sorted(need(base / "sts" / "sick").glob("*.tsv")) for s in _tsv_columns(p, (1, 2))]
    sets["MRPC"] = [
        s for p in sorted(need(base / "paraphrase" / "en" / "mrpc").glob("*.tsv")) for s in _tsv_columns(p, (3, 4))
    ]
    senteval: list[str] = []
    for path in sorted(need(base / "senteval").glob("*/*.tsv")):
        # TREC's sentence is the third column, the others' the second.
        senteval += list(_tsv_columns(path, (2,) if path.parent.name == "TREC" else (1,)))
    sets["SentEval"] = senteval
    tatoeba: list[str] = []
    for path in sorted(need(base / "tatoeba" / "v1").glob("tatoeba.*-eng.eng")):
        tatoeba += path.read_text(encoding="utf-8").splitlines()
    sets["Tatoeba-en"] = tatoeba
    return sets


# ----------------------------------------------------------------------------------------------- cleaning
_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "inc", "ltd", "co", "corp",
    "no", "vol", "fig", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    "gen", "col", "capt", "lt", "sgt", "rev", "gov", "sen", "rep", "u.s", "u.k", "cf", "al", "approx",
}  # fmt: skip
_SPLIT_CANDIDATE = re.compile(r"([.!?]+[\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Split running text into sentences at . ! ? followed by a capital, not after common abbreviations."""
    text = " ".join(text.split())
    sentences: list[str] = []
    start = 0
    for match in _SPLIT_CANDIDATE.finditer(text):
        before = text[start : match.start()].rsplit(" ", 1)[-1].lower().rstrip(".")
        # "Mr. Smith", "e.g. This", single initials like "J. Smith" are not sentence ends.
        if match.group(1).startswith(".") and (before in _ABBREVIATIONS or len(before) == 1):
            continue
        sentences.append(text[start : match.end(1)].strip())
        start = match.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]


@dataclass
class CleaningRules:
    """What a corpus sentence must look like; the defaults keep ordinary English sentences of 3–80 words."""

    min_words: int = 3
    max_words: int = 80
    min_letter_ratio: float = 0.6  # letters among non-space characters
    min_ascii_letter_ratio: float = 0.9  # a cheap English filter: Latin-script text

    def clean(self, sentence: str) -> str | None:
        """The sentence with control characters removed and whitespace folded, or None when it fails a rule."""
        text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in sentence)
        text = " ".join(text.split())
        words = text.split(" ")
        if not text or not self.min_words <= len(words) <= self.max_words:
            return None
        letters = [ch for ch in text if ch.isalpha()]
        non_space = len(text) - text.count(" ")
        if not letters or len(letters) < self.min_letter_ratio * non_space:
            return None
        if sum(ch.isascii() for ch in letters) < self.min_ascii_letter_ratio * len(letters):
            return None
        return text


# ----------------------------------------------------------------------------------------------- sources
@dataclass
class CorpusSource:
    """A named stream of English sentences with its licence, read lazily by `sentences()`."""

    name: str
    license: str
    description: str
    sentences: Callable[[], Iterable[str]]


def shared_data_sources(root: str | Path | None = None) -> list[CorpusSource]:
    """The non-evaluation English text of the shared data folder."""
    base = data_dir(root)

    def flickr_captions() -> Iterator[str]:
        for path in sorted((base / "paraphrase" / "en" / "flickr30k-captions").glob("*.groups.jsonl.gz")):
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                for line in handle:
                    yield from json.loads(line)["captions"]

    def multi30k_english() -> Iterator[str]:
        for folder in ("multi30k", "multi30k-nllb"):
            for path in sorted((base / "bitext" / folder).glob("*-en/*.tsv.gz")):
                yield from _tsv_columns(path, (1,))

    def wmt_english() -> Iterator[str]:
        for path in sorted((base / "bitext" / "wmt-news").glob("*-en.tsv.gz")):
            yield from _tsv_columns(path, (2,))

    def wikipedia() -> Iterator[str]:
        path = base / "unlabeled" / "en" / "wikipedia-2015" / "sentences.txt.gz"
        if not path.is_file():
            return  # older copies of the data folder do not have it; the report then counts 0 read
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                yield line.rstrip("\n")

    return [
        CorpusSource(
            "flickr30k-captions",
            "Flickr30k terms of use: research / non-commercial",
            "Multi30k task 2: 5 English captions per image (train, val, test_2016)",
            flickr_captions,
        ),
        CorpusSource(
            "multi30k-en",
            "Multi30k: research / non-commercial (Flickr30k and MS COCO captions)",
            "English sides of Multi30k task 1 (all splits, incl. the MS COCO 2017 test captions)",
            multi30k_english,
        ),
        CorpusSource(
            "wmt-news-en",
            "WMT news test sets: free for research use",
            "English sides of the WMT news test/dev sets 2008-2019 (cs de es fr ru tr zh)",
            wmt_english,
        ),
        CorpusSource(
            "wikipedia-2015",
            "Wikipedia text, CC BY-SA 3.0 (and GFDL); attribution: Wikipedia contributors; share-alike",
            "English Wikipedia sentences (2015 dump, 30,729 articles), one per line",
            wikipedia,
        ),
    ]


# ----------------------------------------------------------------------------------------------- building
@dataclass
class CorpusResult:
    """The distillation corpus: sentences with their source, and counts of what was read, rejected and kept."""

    sentences: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    report: dict = field(default_factory=dict)


def build_corpus(
    sources: Iterable[CorpusSource],
    excluded: dict[str, Iterable[str]],
    rules: CleaningRules | None = None,
    shuffle_seed: int | None = 0,
) -> CorpusResult:
    """Clean, drop evaluation sentences, dedupe (first source wins), and count everything per source.

    `excluded` maps an evaluation-set name to its sentences; a corpus sentence whose `normalize_key` equals
    any of theirs is dropped. With `shuffle_seed`, the output order is a seeded shuffle (sources mixed).
    """
    rules = rules or CleaningRules()
    excluded_by_key: dict[str, set[str]] = {}
    eval_counts = {}
    for set_name, sentences in excluded.items():
        keys = {normalize_key(s) for s in sentences}
        keys.discard("")
        eval_counts[set_name] = len(keys)
        for key in keys:
            excluded_by_key.setdefault(key, set()).add(set_name)
    seen: set[str] = set()
    result = CorpusResult()
    per_source = {}
    matched_eval = Counter()
    for source in sources:
        counts = Counter()
        for raw in source.sentences():
            counts["read"] += 1
            sentence = rules.clean(raw)
            if sentence is None:
                counts["rejected_by_cleaning"] += 1
                continue
            key = normalize_key(sentence)
            hit = excluded_by_key.get(key)
            if hit:
                counts["excluded_as_evaluation"] += 1
                matched_eval.update(hit)
                continue
            if key in seen:
                counts["duplicates"] += 1
                continue
            seen.add(key)
            counts["kept"] += 1
            result.sentences.append(sentence)
            result.sources.append(source.name)
        per_source[source.name] = {
            "license": source.license,
            "description": source.description,
            **{k: counts[k] for k in ("read", "rejected_by_cleaning", "excluded_as_evaluation", "duplicates", "kept")},
        }
    if shuffle_seed is not None:
        order = list(range(len(result.sentences)))
        random.Random(shuffle_seed).shuffle(order)
        result.sentences = [result.sentences[i] for i in order]
        result.sources = [result.sources[i] for i in order]
    result.report = {
        "total_sentences": len(result.sentences),
        "normalization": "NFKC, lowercased, only letters and digits kept (normalize_key)",
        "cleaning": vars(rules),
        "sources": per_source,
        "evaluation_sets": {
            name: {"distinct_sentences": eval_counts[name], "corpus_sentences_matched": matched_eval[name]}
            for name in eval_counts
        },
    }
    return result


def write_corpus(result: CorpusResult, out_dir: str | Path) -> Path:
    """Write ``sentences.parquet``, ``sentences.txt`` and ``report.json`` into `out_dir` (atomically each)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = pa.table({"sentence": result.sentences, "source": result.sources})
    with atomic_path(out / "sentences.parquet") as tmp:
        pq.write_table(table, tmp)
    with atomic_path(out / "sentences.txt") as tmp:
        tmp.write_text("".join(s + "\n" for s in result.sentences), encoding="utf-8")
    with atomic_path(out / "report.json") as tmp:
        tmp.write_text(json.dumps(result.report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def read_corpus(path: str | Path) -> list[str]:
    """Sentences of a corpus written by `write_corpus` (its folder, its parquet or its txt file)."""
    path = Path(path)
    if path.is_dir():
        path = path / "sentences.parquet"
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path, columns=["sentence"]).column("sentence").to_pylist()
    from ..io.reading import read_sentences

    if not path.is_file():
        raise PSPInputError(f"{path}: no such file")
    # The line reader: bad UTF-8 is an error naming FILE:LINE, a truncated .gz names the last good line.
    return [line for line in read_sentences(path).rows if line]


def build_distill_corpus(
    out: str | Path, data: str | Path | None = None, extra_sources: Iterable[CorpusSource] = ()
) -> CorpusResult:
    """Build the distillation corpus from the shared-data sources and `extra_sources` (the registry's, say:
    `registry_text` provides them), every evaluation sentence removed, and write it into `out`."""
    root = existing_data_dir(data)
    result = build_corpus([*shared_data_sources(root), *extra_sources], evaluation_sentences(root))
    write_corpus(result, out)
    return result


def evaluation_matches(entry: dict) -> int:
    """How many corpus sentences matched one evaluation set, from an entry of `report.json`'s "evaluation_sets"
    (`pool_sentences_matched` in reports written before the distillation corpus was renamed)."""
    return int(entry.get("corpus_sentences_matched", entry.get("pool_sentences_matched", 0)))


def label_corpus(
    corpus: str | os.PathLike,
    cache: str | os.PathLike,
    teacher: str | os.PathLike | None = None,
    threads: int = 1,
    chunk_size: int = 8192,
    batch_size: int | None = None,
    device: str = "cpu",
    progress: bool | None = None,
    backend: str | None = None,
    max_sentences: int | None = None,
) -> tuple[int, int, float]:
    """Label a distillation corpus (`distill_corpus.build_distill_corpus`) into a cache folder, resuming it.

    Returns (sentences labelled now, sentences in the corpus, seconds). `teacher`: a sentence-transformers
    folder or Hub id (default: the packaged all-MiniLM-L6-v2); `threads`: CPU threads; `backend`: see
    `labelling_teacher` (None: `cache_backend`); `max_sentences`: label only the corpus's first N sentences (the
    corpus is shuffled, so a prefix is a sample of every source, and a larger N later labels only what is new).
    """
    from ..teachers.labels import TeacherCache, cache_backend, labelling_teacher, record_provenance, teacher_name

    sentences = read_corpus(corpus)
    if max_sentences is not None:
        sentences = sentences[:max_sentences]
    labels = TeacherCache(cache)
    backend = cache_backend(cache, teacher, backend, device)
    if labels.meta() is not None:
        labels.check_meta(teacher_name(teacher), None, backend)  # before the teacher loads
        if set(sentences) <= labels.labelled_sentences():
            return 0, len(sentences), 0.0  # all done: no need to load (or export) the teacher
    model = labelling_teacher(teacher, backend, threads, Path(cache) / "onnx", device=device)
    started = time.perf_counter()
    count = labels.label(
        sentences,
        model,
        name=teacher_name(teacher),
        chunk_size=chunk_size,
        batch_size=batch_size,
        show_progress_bar=progress,
        backend=backend,
    )
    seconds = time.perf_counter() - started
    record_provenance(cache, corpus, seconds)
    return count, len(sentences), seconds
