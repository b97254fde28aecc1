"""Hub copies of the project's public datasets on the tests' Hub server, laid out as the real ones, holding real rows.

`mirror(hub_server, tmp)` takes the first rows of each set from the shared data folder and writes them twice: as a
small data folder in the shared folder's own layout (`Mirror.folder`) and as the Hub repos `psp-hf` reads
(`src/psp_hf/public_data.py`): MTEB's STS and Tatoeba copies on their parquet export branch
(`refs/convert/parquet`, `<config>/<split>/0000.parquet`, columns `sentence1`, `sentence2`, `score`) beside the
JSON lines their `main` holds, and sentence-transformers' sets on `main` with the configs in the card
(`<config>/<split>-00000-of-00001.parquet`; `parallel-sentences-*`: `english`, `non_english`). So the same sentences
score from either place.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

DATA = Path(os.environ.get("PSP_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")).resolve()
EXPORT = "refs/convert/parquet"
ROWS = 12  # per file: seconds, not minutes
STS_YEARS = {"sts12": "STS12", "sts13": "STS13", "sts14": "STS14", "sts15": "STS15", "sts16": "STS16"}
STS17 = {"ar-ar": "ar-ar", "ar-en": "en-ar", "es-es": "es-es", "es-en": "es-en", "en-en": "en-en", "tr-en": "en-tr"}
TATOEBA = ("ara", "deu", "spa", "fra", "rus", "tur", "cmn")


@dataclass
class Mirror:
    folder: Path  # the same rows in the shared folder's layout
    sentences: list[str]  # every sentence, for a tokenizer


def _head_tsv(source: Path, target: Path, rows: int) -> list[list[str]]:
    opener = gzip.open if source.name.endswith(".gz") else open
    with opener(source, "rt", encoding="utf-8") as handle:
        lines = [next(handle) for _ in range(rows + 1)]
    target.parent.mkdir(parents=True, exist_ok=True)
    with (gzip.open if target.name.endswith(".gz") else open)(target, "wt", encoding="utf-8") as sink:
        sink.write("".join(lines))
    return [line.rstrip("\n").split("\t") for line in lines[1:]]


def _parquet(rows: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    return sink.getvalue()


def upload(repo_id: str, files: dict[str, bytes], revision: str = "main", message: str = "Upload dataset") -> str:
    """Commit `files` to a dataset repo (created if missing), on `revision` (created from main if missing)."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi()
    api.create_repo(repo_id, repo_type="dataset", exist_ok=True)
    if revision != "main":
        api.create_branch(repo_id, repo_type="dataset", branch=revision, exist_ok=True)
    operations = [CommitOperationAdd(path, data) for path, data in files.items()]
    info = api.create_commit(repo_id, operations, commit_message=message, repo_type="dataset", revision=revision)
    return info.oid


def card(configs: dict[str, dict[str, str]]) -> bytes:
    """A dataset card whose YAML lists `configs` ({name: {split: path pattern}}), as push_to_hub writes it."""
    lines = ["---", "configs:"]
    for name, splits in configs.items():
        lines += [f"- config_name: {name}", "  data_files:"]
        lines += [f"  - split: {split}\n    path: {path}" for split, path in splits.items()]
    return ("\n".join(lines) + "\n---\n").encode()


def _jsonl_gz(rows: list[dict]) -> bytes:
    return gzip.compress("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode())


def mteb_sts(repo_id: str, splits: dict[str, list[dict]], config: str = "default") -> None:
    """An MTEB STS repo: JSON lines on main, the parquet export on refs/convert/parquet."""
    upload(repo_id, {f"{split}.jsonl.gz": _jsonl_gz(rows) for split, rows in splits.items()})
    export = {f"{config}/{split}/0000.parquet": _parquet(rows) for split, rows in splits.items()}
    upload(repo_id, export, EXPORT, "Update parquet files")


def mirror(hub_server, tmp: Path) -> Mirror:
    """Build (once per server state) the Hub copies and the matching small folder under `tmp`."""
    from psp_hf.public_data import forget_revisions

    forget_revisions()  # the revisions of a previous server state must not be reused
    folder = tmp / "folder"
    shutil.rmtree(folder, ignore_errors=True)
    sentences: list[str] = []

    def sts_row(row: list[str], score: int, first: int, second: int) -> dict:
        sentences.extend((row[first], row[second]))
        return {"sentence1": row[first], "sentence2": row[second], "score": float(row[score])}

    for task, year in STS_YEARS.items():
        test = []
        for source in sorted((DATA / "sts" / "en" / year).glob("*.tsv")):
            rows = _head_tsv(source, folder / "sts" / "en" / year / source.name, ROWS)
            test += [sts_row(row, 0, 1, 2) for row in rows]
        splits = {"test": test}
        if task == "sts12":
            train = DATA / "sts" / "en" / "STS12-train" / "MSRpar.tsv"
            splits["train"] = [sts_row(row, 0, 1, 2) for row in _head_tsv(train, tmp / "unused.tsv", ROWS)]
        mteb_sts(f"mteb/{task}-sts", splits)
    stsb = {}
    for split, hub_split in (("train", "train"), ("dev", "validation"), ("test", "test")):
        name = f"sts/stsbenchmark/{split}.tsv"
        rows = _head_tsv(DATA / name, folder / name, ROWS * 2)
        stsb[hub_split] = [sts_row(row, 4, 5, 6) for row in rows]
    mteb_sts("mteb/stsbenchmark-sts", stsb)
    sick = _head_tsv(DATA / "sts" / "sick" / "test.tsv", folder / "sts" / "sick" / "test.tsv", ROWS * 2)
    mteb_sts("mteb/sickr-sts", {"test": [sts_row(row, 3, 1, 2) for row in sick]})
    export = {}
    for pair, config in STS17.items():
        rows = _head_tsv(DATA / "sts" / "sts17" / f"{pair}.tsv", folder / "sts" / "sts17" / f"{pair}.tsv", ROWS)
        export[f"{config}/test/0000.parquet"] = _parquet([sts_row(row, 0, 1, 2) for row in rows])
    upload("mteb/sts17-crosslingual-sts", {"README.md": b"---\nlicense: other\n---\n"})
    upload("mteb/sts17-crosslingual-sts", export, EXPORT, "Update parquet files")
    export = {}
    for code in TATOEBA:
        pair = []
        for side in (code, "eng"):
            source = DATA / "tatoeba" / "v1" / f"tatoeba.{code}-eng.{side}"
            lines = source.read_text(encoding="utf-8").splitlines()[: ROWS * 2]
            target = folder / "tatoeba" / "v1" / source.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            pair.append(lines)
            sentences.extend(lines)
        rows = [{"sentence1": a, "sentence2": b} for a, b in zip(*pair, strict=True)]
        export[f"{code}-eng/test/0000.parquet"] = _parquet(rows)
    upload("mteb/tatoeba-bitext-mining", {"README.md": b"---\nlicense: cc-by-2.0\n---\n"})
    upload("mteb/tatoeba-bitext-mining", export, EXPORT, "Update parquet files")
    # sentence-transformers' sets: parquet on main, configs in the card.
    pairs = _head_tsv(DATA / "bitext" / "wmt-news" / "de-en.tsv.gz", tmp / "unused.tsv", 400)
    upload(
        "sentence-transformers/parallel-sentences-opensubtitles",
        {
            "README.md": card({"en-de": {"train": "en-de/train-*"}}),
            "en-de/train-00000-of-00001.parquet": _parquet([{"english": r[2], "non_english": r[1]} for r in pairs]),
        },
    )
    captions = _head_tsv(
        DATA / "paraphrase" / "en" / "flickr30k-captions" / "train.pairs.tsv.gz",
        folder / "paraphrase" / "en" / "flickr30k-captions" / "train.pairs.tsv.gz",
        400,
    )
    upload(
        "sentence-transformers/flickr30k-captions",
        {
            "README.md": card({"pair": {"train": "pair/train-*"}}),
            "pair/train-00000-of-00001.parquet": _parquet([{"caption1": r[1], "caption2": r[2]} for r in captions]),
        },
    )
    with gzip.open(DATA / "unlabeled" / "en" / "wikipedia-2015" / "sentences.txt.gz", "rt", encoding="utf-8") as f:
        wiki = [next(f).rstrip("\n") for _ in range(200)]
    upload(
        "sentence-transformers/wikipedia-en-sentences",
        {
            "README.md": card({"default": {"train": "data/train-*"}}),
            "data/train-00000-of-00001.parquet": _parquet([{"sentence": s} for s in wiki]),
        },
    )
    return Mirror(folder=folder, sentences=sentences)
