"""Training text from the Hub: sentence-transformers' `parallel-sentences-*` bitext, caption pairs, Wikipedia.

`psp languages --sources hub:opensubtitles,hub:talks` (or `hub:OWNER/NAME` for any dataset laid out the same
way: a config `en-xx`, split `train`, columns `english` and `non_english`) streams the language's config of each
named dataset into the run's staging folder as a `xx<TAB>en` file, which the preparation then filters like every
other source (evaluation sentences, PUD dev pairs and duplicates out). Tatoeba's own pairs
(`parallel-sentences-tatoeba`) are refused: the paper keeps them out because their domain is the test's.

`demo_items` are the English parts `make demo` reads (Flickr30k caption pairs and Wikipedia sentences), for
`psp data fetch --for demo`.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ...errors import PSPInputError
from ...public_data import FetchItem, HubSet, read_rows, tsv_field

logger = logging.getLogger(__name__)

HUB_PREFIX = "hub:"
_PAIR_COLUMNS = ("english", "non_english")
# Names -> datasets. Licences as the corpora's own pages give them (the Hub cards name the source corpus).
PARALLEL_SENTENCES: dict[str, HubSet] = {
    name: HubSet(f"sentence-transformers/parallel-sentences-{name}", _PAIR_COLUMNS, licence, feeds, layout="configs")
    for name, licence, feeds in (
        ("opensubtitles", "OpenSubtitles via OPUS: no licence given; research use", "psp languages --sources"),
        ("talks", "TED2020: CC BY-NC-ND 4.0 (TED Talks Usage Policy)", "psp languages --sources"),
        ("europarl", "Europarl: no copyright restrictions (European Parliament)", "psp languages --sources"),
        ("global-voices", "Global Voices via OPUS: CC BY 3.0", "psp languages --sources"),
        ("news-commentary", "News Commentary via OPUS: research use", "psp languages --sources"),
        ("wikimatrix", "WikiMatrix: CC BY-SA 4.0", "psp languages --sources"),
    )
}
# The test's own domain: never training text.
REFUSED = {"tatoeba", "sentence-transformers/parallel-sentences-tatoeba"}

FLICKR_CAPTIONS = HubSet(
    "sentence-transformers/flickr30k-captions",
    ("caption1", "caption2"),
    "Flickr30k captions: research / non-commercial use (Flickr terms of use)",
    "make demo (caption pairs)",
    layout="configs",
)
WIKIPEDIA = HubSet(
    "sentence-transformers/wikipedia-en-sentences",
    ("sentence",),
    "CC BY-SA 3.0 (English Wikipedia)",
    "make demo (distillation corpus)",
    layout="configs",
)
WIKIPEDIA_SENTENCES = 1_000_000  # as many as the data folder's copy holds
# Pairs read per Hub source and language without --limit: OpenSubtitles alone holds tens of millions for some.
HUB_PAIRS = 1_000_000


def split_selection(text: str) -> tuple[str, list[tuple[HubSet, float]]]:
    """`--sources` split into the data folder's names (a string for `bitext_sources`) and the Hub sets named."""
    from .language_sources import parse_selection

    local: list[str] = []
    hub: list[tuple[HubSet, float]] = []
    for item in (text or "").split(","):
        if not item.strip().startswith(HUB_PREFIX):
            if item.strip():
                local.append(item.strip())
            continue
        name, weight = next(iter(parse_selection(item.strip()[len(HUB_PREFIX) :], "--sources").items()))
        hub.append((hub_set(name), weight))
    return ",".join(local) if local else "none", hub


def hub_set(name: str) -> HubSet:
    """The parallel-sentences set called `name` (`opensubtitles`) or a dataset id laid out the same way."""
    if name.lower() in REFUSED:
        raise PSPInputError(
            f"--sources hub:{name}: Tatoeba's pairs are never training text (their domain is the Tatoeba test's)"
        )
    if name in PARALLEL_SENTENCES:
        return PARALLEL_SENTENCES[name]
    if "/" in name:
        return HubSet(name, _PAIR_COLUMNS, "as the dataset's card says", "psp languages --sources", layout="configs")
    raise PSPInputError(
        f"--sources hub:{name}: unknown; give one of {', '.join(sorted(PARALLEL_SENTENCES))} or hub:OWNER/NAME"
    )


def stage_hub_bitext(
    chosen: list[tuple[HubSet, float]], code: str, folder: Path, limit: int | None = None
) -> tuple[list[Path], dict[str, dict]]:
    """One `<code>\\ten` TSV per Hub set in `folder`, streamed (the first `weight x limit` pairs, `HUB_PAIRS`
    without a limit), and the licences as the report records them (with the revision read)."""
    files, licences = [], {}
    for hub, weight in chosen:
        name = hub.repo_id.rsplit("/", 1)[-1]
        cap = round(weight * (HUB_PAIRS if limit is None else limit))
        sha, rows = read_rows(hub, f"en-{code}", "train", limit=cap)
        staged = folder / f"{name}.tsv"
        count = 0
        with open(staged, "w", encoding="utf-8") as sink:
            sink.write(f"{code}\ten\n")
            for row in rows:
                count += 1
                other, english = tsv_field(row["non_english"]), tsv_field(row["english"])
                if other and english:
                    sink.write(f"{other}\t{english}\n")
        logger.info("%s: %s en-%s: %d pairs read at revision %s", code, hub.repo_id, code, count, sha[:12])
        files.append(staged)
        licences[name] = {"license": hub.license, "kind": "hub", "dataset": hub.repo_id, "revision": sha}
        licences[name]["weight"] = weight
    return files, licences


@contextlib.contextmanager
def staged_inputs(inputs: list[str], code: str, limit: int | None = None) -> Iterator[list[str]]:
    """`psp prepare bitext`'s inputs with each `hub:NAME` streamed into a temporary `xx<TAB>en` file (removed
    after)."""
    named = [item for item in inputs if item.startswith(HUB_PREFIX)]
    if not named:
        yield list(inputs)
        return
    _, chosen = split_selection(",".join(named))
    with tempfile.TemporaryDirectory(prefix="psp-hub-bitext-") as folder:
        files, _ = stage_hub_bitext(chosen, code, Path(folder), limit)
        yield [*(item for item in inputs if not item.startswith(HUB_PREFIX)), *map(str, files)]


def hub_corpus_source(spec: str):
    """`--hub-text OWNER/NAME[:CONFIG[:COLUMN]]` as a source of the distillation corpus (streamed when built; the
    config and split are checked now)."""
    from ...public_data import check_split
    from ..distill_corpus import CorpusSource

    repo_id, _, rest = spec.partition(":")
    config, _, column = rest.partition(":")
    config, column = config or "default", column or "sentence"
    if repo_id.count("/") != 1:
        raise PSPInputError(f"--hub-text {spec!r}: give OWNER/NAME[:CONFIG[:COLUMN]]")
    hub = HubSet(repo_id, (column,), "as the dataset's card says", "psp prepare distill-corpus", layout="configs")
    check_split(hub, config, "train")

    def sentences() -> Iterator[str]:
        _, rows = read_rows(hub, config, "train")
        for row in rows:
            yield row[column]

    return CorpusSource(repo_id, hub.license, f"{repo_id} ({config}, train, column {column}), from the Hub", sentences)


def _caption_rows(rows: Iterator[dict[str, str]], handles: list) -> int:
    (sink,) = handles
    sink.write("image_idx\tsentence1\tsentence2\n")
    count = 0
    for count, row in enumerate(rows, 1):
        sink.write(f"{count - 1}\t{tsv_field(row['caption1'])}\t{tsv_field(row['caption2'])}\n")
    return count


def _sentence_rows(rows: Iterator[dict[str, str]], handles: list) -> int:
    (sink,) = handles
    count = 0
    for row in rows:
        text = tsv_field(row["sentence"])
        if text:
            sink.write(text + "\n")
            count += 1
    return count


def demo_items(wikipedia_sentences: int = WIKIPEDIA_SENTENCES) -> list[FetchItem]:
    """The English training text of `make demo`, in the data folder's layout (gzip: the paths end in .gz)."""
    return [
        FetchItem(
            FLICKR_CAPTIONS, "pair", "train", ("paraphrase/en/flickr30k-captions/train.pairs.tsv.gz",), _caption_rows
        ),
        FetchItem(
            WIKIPEDIA,
            "default",
            "train",
            ("unlabeled/en/wikipedia-2015/sentences.txt.gz",),
            _sentence_rows,
            limit=wikipedia_sentences,
        ),
    ]


def open_for_writing(path: Path, compress: bool):
    """A text handle on `path` (a temporary name of the file being written), gzip-compressed if `compress`."""
    if compress:
        return gzip.open(path, "wt", encoding="utf-8")
    return open(path, "w", encoding="utf-8")
