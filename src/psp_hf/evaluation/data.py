"""Readers for the evaluation data in `PSP_DATA` (layout and formats: the data folder's README.md).

Every reader checks what it reads and raises `PSPInputError` naming the file (and line) when a file is
missing or malformed, so a bad data folder fails with a message instead of a wrong number.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data_folder import DATA_ENV
from ..errors import PSPInputError
from ..io.reading import iter_tsv, read_sentences

# SemEval STS 2012-2016 sub-datasets in the order of the organisers' papers (and SentEval).
STS_YEARS: dict[str, tuple[str, tuple[str, ...]]] = {
    "sts12": ("STS12", ("MSRpar", "MSRvid", "SMTeuroparl", "OnWN", "SMTnews")),
    "sts13": ("STS13", ("FNWN", "headlines", "OnWN")),
    "sts14": ("STS14", ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news")),
    "sts15": ("STS15", ("answers-forums", "answers-students", "belief", "headlines", "images")),
    "sts16": ("STS16", ("answer-answer", "headlines", "plagiarism", "postediting", "question-question")),
}

# SemEval-2017 track files: the language of (sentence1, sentence2) as stored, which differs per file.
STS17_FILES: dict[str, tuple[str, str]] = {
    "ar-ar": ("ar", "ar"),
    "ar-en": ("en", "ar"),
    "es-es": ("es", "es"),
    "es-en": ("es", "en"),
    "es-en-wmt": ("en", "es"),
    "en-en": ("en", "en"),
    "tr-en": ("en", "tr"),
}
STS17_DEFAULT_PAIRS: tuple[str, ...] = ("ar-ar", "ar-en", "es-es", "es-en", "en-en", "tr-en")
# STS17 tracks as the harness names them (X-en) -> the config of mteb/sts17-crosslingual-sts (the card's
# model-index links to it; `psp eval --from-hub` reads it). The second Spanish-English track (WMT news,
# `es-en-wmt`) has no config there.
STS17_HUB_CONFIGS: dict[str, str] = {
    "ar-ar": "ar-ar", "ar-en": "en-ar", "en-ar": "en-ar", "de-en": "en-de", "en-de": "en-de", "en-en": "en-en",
    "tr-en": "en-tr", "en-tr": "en-tr", "es-en": "es-en", "es-es": "es-es", "fr-en": "fr-en", "it-en": "it-en",
    "ko-ko": "ko-ko", "nl-en": "nl-en",
}  # fmt: skip

# Two-letter codes users type, mapped to the ISO 639-3 codes of the Tatoeba file names.
TATOEBA_CODES: dict[str, str] = {
    "ar": "ara", "de": "deu", "es": "spa", "fr": "fra", "ru": "rus", "tr": "tur", "zh": "cmn",
    "it": "ita", "nl": "nld", "pt": "por", "pl": "pol", "cs": "ces", "ja": "jpn", "ko": "kor",
    "hi": "hin", "fi": "fin", "sv": "swe", "da": "dan", "el": "ell", "he": "heb", "hu": "hun",
    "id": "ind", "ro": "ron", "uk": "ukr", "vi": "vie", "bg": "bul", "fa": "pes", "th": "tha",
}  # fmt: skip
TATOEBA_DEFAULT_LANGUAGES: tuple[str, ...] = ("ar", "de", "es", "fr", "ru", "tr", "zh")

SENTEVAL_BINARY = {"mr": "MR", "cr": "CR", "subj": "SUBJ", "mpqa": "MPQA"}
TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
SICK_ENTAILMENT_CLASSES = ("CONTRADICTION", "NEUTRAL", "ENTAILMENT")


@dataclass
class PairSet:
    """Sentence pairs with a gold value per pair: a similarity score or a class index."""

    name: str
    sentences1: list[str]
    sentences2: list[str]
    gold: np.ndarray
    paths: list[Path] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.sentences1)


@dataclass
class LabelledSentences:
    """Single sentences with an integer class label each."""

    name: str
    sentences: list[str]
    labels: np.ndarray
    paths: list[Path] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.sentences)


@dataclass
class Bitext:
    """Parallel sentences: `other[i]` translates `english[i]`."""

    language: str
    other: list[str]
    english: list[str]
    paths: list[Path] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.other)


def _require_file(path: Path, what: str) -> Path:
    if not path.is_file():
        raise PSPInputError(f"{what}: expected data file {path} (set --data-dir or {DATA_ENV}; see the data README)")
    return path


def read_tsv(path: Path, columns: Iterable[str]) -> list[list[str]]:
    """Rows of a headered TSV (no quoting) whose header is exactly `columns`; errors name file:line."""
    rows = [fields for _, fields in iter_tsv(path, header=list(columns))]
    if not rows:
        raise PSPInputError(f"{path}: no data rows")
    return rows


def _floats(values: list[str], path: Path, column: str) -> np.ndarray:
    out = np.empty(len(values), dtype=np.float64)
    for index, value in enumerate(values):
        try:
            out[index] = float(value)
        except ValueError:
            # +2: line 1 is the header and lines count from 1.
            raise PSPInputError(f"{path}:{index + 2}: {column} {value!r} is not a number") from None
        if not np.isfinite(out[index]):  # "nan" parses, and would make the correlation NaN without a word
            raise PSPInputError(f"{path}:{index + 2}: {column} {value!r} is not a finite number")
    return out


def _labels(values: list[str], path: Path, column: str, classes: Iterable[str]) -> np.ndarray:
    index_of = {name: index for index, name in enumerate(classes)}
    out = np.empty(len(values), dtype=np.int64)
    for index, value in enumerate(values):
        if value not in index_of:
            raise PSPInputError(f"{path}:{index + 2}: {column} {value!r} is not one of {sorted(index_of)}")
        out[index] = index_of[value]
    return out


def _score_pairs(path: Path, name: str) -> PairSet:
    rows = read_tsv(path, ["score", "sentence1", "sentence2"])
    return PairSet(
        name=name,
        sentences1=[row[1] for row in rows],
        sentences2=[row[2] for row in rows],
        gold=_floats([row[0] for row in rows], path, "score"),
        paths=[path],
    )


# ----------------------------------------------------------------------------------------------- STS
def read_sts_year(data_dir: Path, task: str) -> list[PairSet]:
    """Every sub-dataset of one STS year present in the data (known ones in paper order, then others)."""
    folder_name, known = STS_YEARS[task]
    folder = Path(data_dir) / "sts" / "en" / folder_name
    if not folder.is_dir():
        raise PSPInputError(
            f"{task}: expected data folder {folder} (set --data-dir or {DATA_ENV}; see the data README)"
        )
    present = {path.stem: path for path in folder.glob("*.tsv")}
    if not present:
        raise PSPInputError(f"{task}: no .tsv files in {folder}")
    names = [name for name in known if name in present] + sorted(set(present) - set(known))
    return [_score_pairs(present[name], name) for name in names]


def read_stsb(data_dir: Path, split: str) -> PairSet:
    """STS Benchmark `train`, `dev` or `test`."""
    path = _require_file(Path(data_dir) / "sts" / "stsbenchmark" / f"{split}.tsv", f"stsb-{split}")
    rows = read_tsv(path, ["genre", "filename", "year", "sid", "score", "sentence1", "sentence2"])
    return PairSet(
        name=f"stsb-{split}",
        sentences1=[row[5] for row in rows],
        sentences2=[row[6] for row in rows],
        gold=_floats([row[4] for row in rows], path, "score"),
        paths=[path],
    )


def _read_sick(data_dir: Path, split: str) -> tuple[Path, list[list[str]]]:
    path = _require_file(Path(data_dir) / "sts" / "sick" / f"{split}.tsv", f"sick-{split}")
    columns = ["pair_ID", "sentence_A", "sentence_B", "relatedness_score", "entailment_judgment"]
    return path, read_tsv(path, columns)


def read_sick_relatedness(data_dir: Path, split: str) -> PairSet:
    """SICK `train`, `trial` or `test` with the relatedness score (1-5) as gold."""
    path, rows = _read_sick(data_dir, split)
    return PairSet(
        name=f"sickr-{split}",
        sentences1=[row[1] for row in rows],
        sentences2=[row[2] for row in rows],
        gold=_floats([row[3] for row in rows], path, "relatedness_score"),
        paths=[path],
    )


def read_sick_entailment(data_dir: Path, split: str) -> PairSet:
    """SICK `train`, `trial` or `test` with the entailment class (index into SICK_ENTAILMENT_CLASSES) as gold."""
    path, rows = _read_sick(data_dir, split)
    return PairSet(
        name=f"sicke-{split}",
        sentences1=[row[1] for row in rows],
        sentences2=[row[2] for row in rows],
        gold=_labels([row[4] for row in rows], path, "entailment_judgment", SICK_ENTAILMENT_CLASSES),
        paths=[path],
    )


def read_sts17(data_dir: Path, pair: str) -> PairSet:
    """One SemEval-2017 track, reordered so sentence1 is in the pair's first language (X of X-en)."""
    if pair not in STS17_FILES:
        raise PSPInputError(f"unknown STS17 pair {pair!r}; valid: {', '.join(STS17_FILES)}")
    pairs = _score_pairs(_require_file(Path(data_dir) / "sts" / "sts17" / f"{pair}.tsv", f"sts17-{pair}"), pair)
    first_language = pair.split("-")[0]
    if STS17_FILES[pair][0] != first_language:
        pairs.sentences1, pairs.sentences2 = pairs.sentences2, pairs.sentences1
    return pairs


# ----------------------------------------------------------------------------------------------- Tatoeba
def tatoeba_code(language: str) -> str:
    """ISO 639-3 code of the Tatoeba files for a two- or three-letter language code."""
    language = language.lower()
    return TATOEBA_CODES.get(language, language)


def tatoeba_languages(data_dir: Path) -> list[str]:
    """ISO 639-3 codes of every language with a Tatoeba test set in the data."""
    folder = Path(data_dir) / "tatoeba" / "v1"
    return sorted(path.name.split(".")[1].split("-")[0] for path in folder.glob("tatoeba.*-eng.eng"))


def read_tatoeba(data_dir: Path, language: str) -> Bitext:
    """The Tatoeba test set of one language (two- or three-letter code) against English."""
    code = tatoeba_code(language)
    folder = Path(data_dir) / "tatoeba" / "v1"
    other_path = folder / f"tatoeba.{code}-eng.{code}"
    english_path = folder / f"tatoeba.{code}-eng.eng"
    if not other_path.is_file() and folder.is_dir():
        present = tatoeba_languages(data_dir)
        if code not in present:
            raise PSPInputError(
                f"tatoeba: no test set for language {language!r} (expected {other_path}); present: {', '.join(present)}"
            )
    other = _read_lines(_require_file(other_path, f"tatoeba-{language}"))
    english = _read_lines(_require_file(english_path, f"tatoeba-{language}"))
    if len(other) != len(english):
        raise PSPInputError(f"{other_path}: {len(other)} lines but {english_path} has {len(english)}")
    return Bitext(language=language, other=other, english=english, paths=[other_path, english_path])


# The bitext dev sets of the X-English models, one `<xx>\ten` file per language (data README sections 15, 17): PUD
# (news and Wikipedia) and XNLI's dev split (the everyday register Tatoeba tests). Dev sets: scored to choose
# recipes and checkpoints, never trained on.
BITEXT_DEV_PATTERNS = {"xnli-dev": "bitext/everyday/xnli/dev/{xx}-en.tsv.gz", "pud-dev": "bitext/ud-pud/{xx}-en.tsv.gz"}


def two_letter_code(language: str) -> str:
    """The two-letter code of a language given by two or three letters (the Tatoeba codes' inverse)."""
    language = language.lower()
    return next((short for short, long in TATOEBA_CODES.items() if long == language), language)


def bitext_dev_languages(data_dir: Path, task: str) -> list[str]:
    """Two-letter codes of every language with a file of the dev set `task` (xnli-dev, pud-dev) in the data."""
    folder = Path(data_dir) / Path(BITEXT_DEV_PATTERNS[task]).parent
    return sorted(path.name.split("-")[0] for path in folder.glob("*-en.tsv.gz"))


def read_bitext_dev(data_dir: Path, task: str, language: str) -> Bitext:
    """The dev pairs of `task` (xnli-dev, pud-dev) of one language (two- or three-letter code) against English."""
    code = two_letter_code(language)
    path = _require_file(Path(data_dir) / BITEXT_DEV_PATTERNS[task].format(xx=code), f"{task}-{language}")
    other, english = [], []
    for _, row in iter_tsv(path, header=[code, "en"]):
        other.append(row[0])
        english.append(row[1])
    if not other:
        raise PSPInputError(f"{path}: no pairs")
    return Bitext(language=code, other=other, english=english, paths=[path])


def _read_lines(path: Path) -> list[str]:
    lines = read_sentences(path).rows
    if not lines:
        raise PSPInputError(f"{path}: empty file")
    return lines


# ----------------------------------------------------------------------------------------------- SentEval
def read_senteval_binary(data_dir: Path, task: str) -> LabelledSentences:
    """MR, CR, SUBJ or MPQA (`all.tsv`, labels 0/1; no fixed split: evaluated by 10-fold CV)."""
    path = _require_file(Path(data_dir) / "senteval" / SENTEVAL_BINARY[task] / "all.tsv", task)
    rows = read_tsv(path, ["label", "sentence"])
    labels = _labels([row[0] for row in rows], path, "label", "01")
    return LabelledSentences(task, [row[1] for row in rows], labels, [path])


def read_trec(data_dir: Path, split: str) -> LabelledSentences:
    """TREC `train` or `test` with the six coarse classes (index into TREC_CLASSES)."""
    path = _require_file(Path(data_dir) / "senteval" / "TREC" / f"{split}.tsv", f"trec-{split}")
    rows = read_tsv(path, ["coarse", "fine", "question"])
    labels = _labels([row[0] for row in rows], path, "coarse", TREC_CLASSES)
    return LabelledSentences(f"trec-{split}", [row[2] for row in rows], labels, [path])


def read_sst(data_dir: Path, task: str, split: str) -> LabelledSentences:
    """SST-2 (`sst2`, labels 0/1) or SST-5 (`sst5`, labels 0-4), split `train`, `dev` or `test`."""
    folder = {"sst2": "SST2", "sst5": "SST5"}[task]
    path = _require_file(Path(data_dir) / "senteval" / folder / f"{split}.tsv", f"{task}-{split}")
    rows = read_tsv(path, ["label", "sentence"])
    labels = _labels([row[0] for row in rows], path, "label", "01" if task == "sst2" else "01234")
    return LabelledSentences(f"{task}-{split}", [row[1] for row in rows], labels, [path])


def read_mrpc(data_dir: Path, split: str) -> PairSet:
    """MRPC `train` or `test`; gold is 1 for a paraphrase."""
    path = _require_file(Path(data_dir) / "paraphrase" / "en" / "mrpc" / f"{split}.tsv", f"mrpc-{split}")
    rows = read_tsv(path, ["label", "id1", "id2", "sentence1", "sentence2"])
    return PairSet(
        name=f"mrpc-{split}",
        sentences1=[row[3] for row in rows],
        sentences2=[row[4] for row in rows],
        gold=_labels([row[0] for row in rows], path, "label", "01"),
        paths=[path],
    )


# ----------------------------------------------------------------------------------------------- checksums
def read_manifest(data_dir: Path) -> dict[str, tuple[int, str]]:
    """`MANIFEST.tsv` as {relative path: (records, sha256)}; empty when the data has no manifest."""
    path = Path(data_dir) / "MANIFEST.tsv"
    if not path.is_file():
        return {}
    return {row[0]: (int(row[1]), row[3]) for row in read_tsv(path, ["path", "records", "bytes", "sha256"])}


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_checksums(data_dir: Path, paths: Iterable[Path]) -> dict[str, dict]:
    """sha256 of each file a run read, beside the manifest's, keyed by path relative to the data folder."""
    data_dir = Path(data_dir).resolve()
    manifest = read_manifest(data_dir)
    out: dict[str, dict] = {}
    for path in sorted({Path(p).resolve() for p in paths}):
        try:
            key = path.relative_to(data_dir).as_posix()
        except ValueError:
            key = str(path)
        digest = sha256_file(path)
        expected = manifest.get(key, (None, None))[1]
        out[key] = {"sha256": digest, "matches_manifest": None if expected is None else digest == expected}
    return out
