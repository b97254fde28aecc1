"""The filters of the papers' data recipes, applied a batch of sentence pairs at a time.

A `FilterChain` runs its steps in order on each `PairBatch`; a step sees only the pairs every earlier step
kept, and counts the pairs it removes, so the report adds up: pairs in = sum of removals + pairs out.
Cheap steps come first so the expensive ones (language ID, the paraphrase-score model) see fewer pairs.
A switched-off step still computes the column it would filter on (overlap, score) for the output and the
histograms, but removes nothing; a switched-off language ID does nothing at all.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

# Languages written without spaces between words: their token length is counted in characters.
NO_SPACE_LANGUAGES = frozenset({"zh", "ja", "th", "lo", "km", "my", "bo", "dz", "yue", "wuu"})

# Word tokens for the overlap measure: runs of word characters, and each other non-space character alone
# (close to the NLTK word tokenizer the authors used, without its dependency).
_WORD_TOKEN = re.compile(r"\w+|[^\w\s]")


@dataclass
class PairBatch:
    """A batch of sentence pairs: numpy object arrays of str, and optional float columns."""

    first: np.ndarray
    second: np.ndarray
    score: np.ndarray | None = None
    overlap: np.ndarray | None = None

    @classmethod
    def from_lists(cls, first: Sequence[str], second: Sequence[str], score: Sequence[float] | None = None):
        """Build a batch from parallel lists (score: floats, or None for no score column)."""
        return cls(
            first=_object_array(first),
            second=_object_array(second),
            score=None if score is None else np.asarray(score, dtype=np.float64),
        )

    def __len__(self) -> int:
        return len(self.first)

    def select(self, keep: np.ndarray) -> PairBatch:
        """The pairs where `keep` is true."""
        return PairBatch(
            first=self.first[keep],
            second=self.second[keep],
            score=None if self.score is None else self.score[keep],
            overlap=None if self.overlap is None else self.overlap[keep],
        )


def _object_array(items: Sequence[str]) -> np.ndarray:
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array


# ---------------------------------------------------------------------------------------------- measures
def normalize_whitespace(text: str) -> str:
    """Strip and fold every run of whitespace into one space."""
    return " ".join(text.split())


def token_count(text: str, unit: str = "words") -> int:
    """Tokens of a whitespace-folded sentence: words (spaces + 1), or (`unit="chars"`) non-space characters."""
    if unit == "words":
        # `text` went through normalize_whitespace: single spaces, none at the ends.
        return text.count(" ") + 1 if text else 0
    if unit == "chars":
        return len(text) - text.count(" ")
    raise ValueError(f"unknown token unit {unit!r}; expected 'words' or 'chars'")


def length_unit_for(language: str) -> str:
    """Characters for languages written without spaces (zh, ja, th, ...), words otherwise."""
    return "chars" if language.split("-")[0].lower() in NO_SPACE_LANGUAGES else "words"


def trigram_overlap(first: str, second: str) -> float:
    """ParaNMT's overlap, `ngram_overlap(first, second, 3)` (0.0 for a side under 3 tokens, as in their script)."""
    return ngram_overlap(first, second, 3)


def ngram_overlap(first: str, second: str, n: int) -> float:
    """Shared word n-grams divided by the n-gram count of the side with fewer n-grams.

    Both sides are lowercased and split by `word_tokens` (punctuation marks are tokens of their own). Each
    n-gram of the shorter side counts once per occurrence when the longer side contains it, so the result
    lies in [0, 1] and is symmetric. A side with fewer than `n` tokens has no n-grams: the overlap is 0.0.
    """
    if n < 1:
        raise ValueError(f"n-gram order must be at least 1, got {n}")
    shorter = word_tokens(first.lower())
    longer = word_tokens(second.lower())
    if len(longer) < len(shorter):
        shorter, longer = longer, shorter
    n_grams = len(shorter) - n + 1
    if n_grams <= 0:
        return 0.0
    present = set(zip(*(longer[i:] for i in range(n)), strict=False))
    return sum(gram in present for gram in zip(*(shorter[i:] for i in range(n)), strict=False)) / n_grams


def word_tokens(text: str) -> list[str]:
    """Runs of word characters, and every other non-space character on its own (`\\w+|[^\\w\\s]`)."""
    tokens: list[str] = []
    for word in text.split():
        # Most words are all letters/digits; only the rest go through the regex (same result, 2x faster).
        if word.isalnum():
            tokens.append(word)
        else:
            tokens += _WORD_TOKEN.findall(word)
    return tokens


def pair_hashes(first: Sequence[str], second: Sequence[str], ordered: bool) -> np.ndarray:
    """8-byte BLAKE2b hashes of the pairs (uint64). Unordered: (a, b) and (b, a) hash alike."""
    digests = []
    for a, b in zip(first, second, strict=True):
        if not ordered and b < a:
            a, b = b, a
        # The separator cannot occur inside a sentence (inputs are split on tabs).
        digests.append(hashlib.blake2b(f"{a}\t{b}".encode(), digest_size=8).digest())
    return np.frombuffer(b"".join(digests), dtype="<u8").copy()


class SeenHashes:
    """A set of 64-bit hashes in a few sorted numpy runs: 8 bytes per entry (up to 16 while two runs merge).

    New hashes become a run; runs are merged while the older one is not bigger than the newer one, so
    there are at most about log2(n) runs and each hash is re-sorted O(log n) times overall.
    """

    def __init__(self) -> None:
        self._runs: list[np.ndarray] = []

    def __len__(self) -> int:
        return sum(len(run) for run in self._runs)

    @property
    def nbytes(self) -> int:
        """Memory held by the stored hashes."""
        return sum(run.nbytes for run in self._runs)

    def add(self, hashes: np.ndarray) -> np.ndarray:
        """Insert a batch; returns True where the hash is new (first in the batch, and never seen before)."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        unique, first_index, inverse = np.unique(hashes, return_index=True, return_inverse=True)
        fresh = np.ones(len(unique), dtype=bool)
        for run in self._runs:
            position = np.minimum(np.searchsorted(run, unique), len(run) - 1)
            fresh &= run[position] != unique
        first_in_batch = np.zeros(len(hashes), dtype=bool)
        first_in_batch[first_index] = True
        new = unique[fresh]
        if len(new):
            self._runs.append(new)
            while len(self._runs) > 1 and len(self._runs[-2]) <= len(self._runs[-1]):
                newer = self._runs.pop()
                older = self._runs.pop()
                self._runs.append(np.sort(np.concatenate([older, newer]), kind="stable"))
        return first_in_batch & fresh[inverse.reshape(-1)]


class StreamingHistogram:
    """Fixed-bin histogram filled a batch at a time; values outside [low, high] go to the end bins."""

    def __init__(self, low: float, high: float, bins: int = 50):
        self.edges = np.linspace(low, high, bins + 1)
        self.counts = np.zeros(bins, dtype=np.int64)

    def add(self, values: np.ndarray) -> None:
        """Count a batch of values (NaN values are ignored)."""
        values = np.asarray(values, dtype=np.float64)
        values = np.clip(values[~np.isnan(values)], self.edges[0], self.edges[-1])
        self.counts += np.histogram(values, bins=self.edges)[0]

    def to_dict(self) -> dict:
        """Edges and counts as plain lists (for the JSON report)."""
        return {"edges": [round(float(e), 6) for e in self.edges], "counts": self.counts.tolist()}


# ---------------------------------------------------------------------------------------------- steps
class FilterStep:
    """One step of a `FilterChain`: `apply` returns the batch to keep (and may add columns)."""

    name: str = "step"
    enabled: bool = True
    removes: bool = True  # False for steps that change pairs (lowercasing) instead of removing them

    def apply(self, batch: PairBatch) -> tuple[PairBatch, np.ndarray]:
        """Return (batch with any new columns, keep mask)."""
        raise NotImplementedError

    def describe(self) -> str:
        """One line for the report: what the step does with its settings."""
        return self.name


class Normalize(FilterStep):
    """Whitespace folding (always) and lowercasing (switchable); counts the pairs lowercasing changed."""

    name = "lowercase"
    removes = False

    def __init__(self, lowercase: bool = True):
        self.enabled = lowercase
        self.changed = 0

    def apply(self, batch):
        # Inlined normalize_whitespace: this runs on every input pair.
        first = _object_array([" ".join(text.split()) for text in batch.first])
        second = _object_array([" ".join(text.split()) for text in batch.second])
        if self.enabled:
            lower_first = _object_array([text.lower() for text in first])
            lower_second = _object_array([text.lower() for text in second])
            # Element-wise string comparison of object arrays runs in C.
            self.changed += int(np.count_nonzero((first != lower_first) | (second != lower_second)))
            first, second = lower_first, lower_second
        return replace(batch, first=first, second=second), np.ones(len(batch), dtype=bool)

    def describe(self):
        return "lowercase both sides" if self.enabled else "keep case"


class DropEmpty(FilterStep):
    """Remove pairs with an empty side (after whitespace folding). Always on."""

    name = "empty"

    def apply(self, batch):
        keep = np.fromiter(
            (bool(a) and bool(b) for a, b in zip(batch.first, batch.second, strict=True)), dtype=bool, count=len(batch)
        )
        return batch, keep

    def describe(self):
        return "remove pairs with an empty side"


class LengthRange(FilterStep):
    """Keep pairs whose two sides both have between `low` and `high` tokens (inclusive)."""

    name = "length"

    def __init__(self, low: int, high: int, units: tuple[str, str] = ("words", "words"), enabled: bool = True):
        if low > high:
            raise ValueError(f"token length range is empty: {low} > {high}")
        self.low, self.high, self.units, self.enabled = low, high, units, enabled

    def apply(self, batch):
        if not self.enabled:
            return batch, np.ones(len(batch), dtype=bool)
        low, high = self.low, self.high
        keep = np.fromiter(
            (
                low <= token_count(a, self.units[0]) <= high and low <= token_count(b, self.units[1]) <= high
                for a, b in zip(batch.first, batch.second, strict=True)
            ),
            dtype=bool,
            count=len(batch),
        )
        return batch, keep

    def describe(self):
        units = self.units[0] if self.units[0] == self.units[1] else f"{self.units[0]} / {self.units[1]}"
        return f"both sides {self.low}–{self.high} tokens ({units})"


class OverlapMaximum(FilterStep):
    """Compute the trigram overlap of each pair; keep pairs with overlap <= `maximum`."""

    name = "overlap"

    def __init__(self, maximum: float = 0.5, enabled: bool = True):
        self.maximum, self.enabled = maximum, enabled
        self.histogram = StreamingHistogram(0.0, 1.0, bins=50)

    def apply(self, batch):
        overlap = np.fromiter(
            (trigram_overlap(a, b) for a, b in zip(batch.first, batch.second, strict=True)),
            dtype=np.float64,
            count=len(batch),
        )
        self.histogram.add(overlap)
        batch = replace(batch, overlap=overlap)
        if not self.enabled:
            return batch, np.ones(len(batch), dtype=bool)
        return batch, overlap <= self.maximum

    def describe(self):
        return f"trigram overlap <= {self.maximum}"


class DropDuplicates(FilterStep):
    """Remove exact duplicates of an earlier pair (after normalisation), with 8-byte hashes."""

    name = "duplicate"

    def __init__(self, ordered: bool, enabled: bool = True):
        self.ordered, self.enabled = ordered, enabled
        self.seen = SeenHashes()

    def apply(self, batch):
        if not self.enabled:
            return batch, np.ones(len(batch), dtype=bool)
        return batch, self.seen.add(pair_hashes(batch.first, batch.second, ordered=self.ordered))

    def describe(self):
        order = "" if self.ordered else " ((a, b) and (b, a) count as the same pair)"
        return f"remove exact duplicates{order}"


class LanguageMatch(FilterStep):
    """Keep pairs whose sides langid identifies as `languages[0]` and `languages[1]`."""

    name = "language"

    def __init__(
        self,
        languages: tuple[str, str],
        enabled: bool = True,
        candidates: Sequence[str] | None = None,
        identifier=None,
    ):
        self.languages, self.enabled, self.candidates = languages, enabled, candidates
        self._identifier = identifier

    @property
    def identifier(self):
        """The batched langid model, built on first use (langid's model takes ~3 s to unpack)."""
        if self._identifier is None:
            from .language_id import shared_identifier

            candidates = None
            if self.candidates is not None:
                # The wanted languages are always candidates: a pair is kept only if they win.
                candidates = tuple(sorted({*self.candidates, *self.languages}))
            self._identifier = shared_identifier(candidates)
        return self._identifier

    def check(self) -> None:
        """Raise ValueError now if langid does not know one of the languages."""
        if self.enabled:
            for language in self.languages:
                self.identifier.index(language)

    def apply(self, batch):
        if not self.enabled or len(batch) == 0:
            return batch, np.ones(len(batch), dtype=bool)
        identifier = self.identifier
        predicted = identifier.predict(np.concatenate([batch.first, batch.second]).tolist())
        n = len(batch)
        keep = (predicted[:n] == identifier.index(self.languages[0])) & (
            predicted[n:] == identifier.index(self.languages[1])
        )
        return batch, keep

    def describe(self):
        among = "" if self.candidates is None else f" (among {', '.join(sorted({*self.candidates, *self.languages}))})"
        return f"langid says the sides are {self.languages[0]} and {self.languages[1]}{among}"


class ScoreRange(FilterStep):
    """Keep pairs whose paraphrase score is in [low, high].

    The score is the input's score column, or (when `scorer` is given) `scorer(first, second)`, e.g. the
    cosine of a psp model's embeddings.
    """

    name = "score"

    def __init__(
        self,
        low: float = 0.7,
        high: float = 1.0,
        scorer: Callable[[Sequence[str], Sequence[str]], np.ndarray] | None = None,
        enabled: bool = True,
    ):
        if low > high:
            raise ValueError(f"paraphrase-score range is empty: {low} > {high}")
        self.low, self.high, self.scorer, self.enabled = low, high, scorer, enabled
        self.histogram = StreamingHistogram(-1.0, 1.0, bins=80)

    def apply(self, batch):
        if self.scorer is not None and len(batch):
            batch = replace(
                batch, score=np.asarray(self.scorer(batch.first.tolist(), batch.second.tolist()), dtype=np.float64)
            )
        if batch.score is None:
            if self.enabled:
                raise ValueError("the paraphrase-score filter needs a score column or a scoring model")
            return batch, np.ones(len(batch), dtype=bool)
        self.histogram.add(batch.score)
        if not self.enabled:
            return batch, np.ones(len(batch), dtype=bool)
        return batch, (batch.score >= self.low) & (batch.score <= self.high)

    def describe(self):
        source = "psp model cosine" if self.scorer is not None else "score column"
        return f"paraphrase score in [{self.low}, {self.high}] ({source})"


@dataclass
class StepStats:
    """What one step did over a whole run."""

    name: str
    enabled: bool
    description: str
    removed: int = 0
    seconds: float = 0.0


class FilterChain:
    """Runs steps in order over batches and keeps per-step counts and timings."""

    def __init__(self, steps: Sequence[FilterStep]):
        self.steps = list(steps)
        self.stats = [StepStats(step.name, step.enabled, step.describe()) for step in self.steps]
        self.pairs_in = 0
        self.pairs_out = 0

    def apply(self, batch: PairBatch) -> PairBatch:
        """Filter one batch; returns the pairs that passed every step."""
        self.pairs_in += len(batch)
        for step, stats in zip(self.steps, self.stats, strict=True):
            if len(batch) == 0:
                break
            started = time.perf_counter()
            batch, keep = step.apply(batch)
            removed = int(len(keep) - np.count_nonzero(keep))
            if removed:
                batch = batch.select(keep)
            stats.removed += removed
            stats.seconds += time.perf_counter() - started
        self.pairs_out += len(batch)
        return batch

    def step(self, name: str) -> FilterStep | None:
        """The step called `name`, if the chain has one."""
        return next((step for step in self.steps if step.name == name), None)
