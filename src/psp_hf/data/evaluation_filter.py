"""Evaluation sentences out of bitext: a `psp prepare bitext` filter step.

A pair goes when either side equals (by `distill_corpus.normalize_key`: NFKC, lowercased, Chinese folded, letters
and digits only) a sentence of an evaluation set of the data folder: STS 2012–2017 (every STS17 side), STS-B, SICK,
SentEval, MRPC, and both sides of every Tatoeba language. The same rule and the same sets as the English
distillation corpus's, plus Tatoeba's non-English sides, since a bitext model is scored on those, and both sides of
the PUD pairs (`bitext/ud-pud/`) and of XNLI's dev split (`bitext/everyday/xnli/dev/`), the dev sets that choose a
language model's checkpoints and recipe: never training text.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..io.reading import iter_tsv
from .filters import FilterStep

# The bitext dev sets, by the name the filter's report counts them under: their folders of `<xx>-en.tsv.gz`.
DEV_SET_FOLDERS = {"PUD": "bitext/ud-pud", "XNLI-dev": "bitext/everyday/xnli/dev"}


def evaluation_keys(root: str | os.PathLike | None = None) -> dict[str, set[str]]:
    """Normalised keys of every evaluation sentence, by set name (Tatoeba's other sides as 'Tatoeba-xx')."""
    from ..data_folder import data_dir
    from .distill_corpus import evaluation_sentences, normalize_key

    sets = {name: {normalize_key(s) for s in sentences} for name, sentences in evaluation_sentences(root).items()}
    other: set[str] = set()
    for path in sorted((data_dir(root) / "tatoeba" / "v1").glob("tatoeba.*-eng.*")):
        if not path.name.endswith(".eng"):
            other.update(normalize_key(line) for line in path.read_text(encoding="utf-8").splitlines())
    sets["Tatoeba-xx"] = other
    for name, folder in DEV_SET_FOLDERS.items():
        keys: set[str] = set()
        for path in sorted((data_dir(root) / folder).glob("*-en.tsv.gz")):
            keys.update(normalize_key(cell) for _, row in iter_tsv(path, header=True) for cell in row)
        sets[name] = keys
    for keys in sets.values():
        keys.discard("")  # a sentence of only punctuation must not match every punctuation-only side
    return sets


def all_evaluation_keys(root: str | os.PathLike | None = None) -> set[str]:
    """The keys of every evaluation sentence, of all sets together (what training text must not contain)."""
    return set().union(*evaluation_keys(root).values())


class DropEvaluationSentences(FilterStep):
    """Remove pairs with a side that is an evaluation sentence; off (and said so) without the data folder."""

    name = "evaluation"

    def __init__(self, enabled: bool = True, root: str | os.PathLike | None = None):
        from ..data_folder import data_dir

        self.folder = Path(data_dir(root))
        self.found = self.folder.is_dir()
        self.enabled = enabled and self.found
        self.keys: set[str] = set()
        self.matched: dict[str, int] = {}
        self._by_set: dict[str, set[str]] = {}
        if self.enabled:
            self._by_set = evaluation_keys(root)
            self.keys = set().union(*self._by_set.values())

    def apply(self, batch):
        if not self.enabled or len(batch) == 0:
            return batch, np.ones(len(batch), dtype=bool)
        from .distill_corpus import normalize_key

        first = [normalize_key(text) for text in batch.first]
        second = [normalize_key(text) for text in batch.second]
        keep = np.fromiter(
            (a not in self.keys and b not in self.keys for a, b in zip(first, second, strict=True)),
            dtype=bool,
            count=len(batch),
        )
        for index in np.flatnonzero(~keep):
            for name, keys in self._by_set.items():
                if first[index] in keys or second[index] in keys:
                    self.matched[name] = self.matched.get(name, 0) + 1
        return batch, keep

    def describe(self):
        if not self.found:
            return f"evaluation sentences NOT checked: no data folder at {self.folder}"
        if not self.enabled:
            return "evaluation sentences kept (--keep-evaluation-sentences)"
        matched = ", ".join(f"{name} {count}" for name, count in sorted(self.matched.items()))
        return "remove pairs with a side equal to an evaluation sentence (STS, STS17, SICK, SentEval, MRPC, " + (
            f"Tatoeba, PUD, XNLI-dev; normalised exact match){': ' + matched if matched else ''}"
        )
