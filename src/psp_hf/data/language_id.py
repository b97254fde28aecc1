"""Batched language identification with the model that ships inside the `langid` wheel.

`langid.classify` handles one sentence at a time: it walks a byte-level automaton in Python and then
multiplies a 7,480-feature count vector with the full (features x 97 languages) naive-Bayes table,
converting that float32 table to float64 on every call. That runs at about 150 sentences/s here, far
too slow for tens of thousands of pairs a second.

`LanguageIdentifier` computes the same decision for a whole batch at once:

* every automaton state emits a fixed set of features, so the table is folded once into one row of
  class log-probabilities per state (`state_scores`, 9,118 x 97 float64, about 7 MB);
* the automaton is stepped for all sentences of a batch together with numpy (sentences sorted by byte
  length, so the still-running ones are a prefix of the state vector);
* the visited states form a sparse (sentences x states) count matrix, built directly in CSR order; one
  sparse-dense product with `state_scores` gives each sentence's class scores, plus the class priors.

The arithmetic is langid's (float64 sums of the same terms, only in a different order), so the
predicted language is langid's except for exact near-ties.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence

import numpy as np


@functools.lru_cache(maxsize=1)
def _langid_reference():
    # Unpacking langid's model (base64 + bz2 + pickle) takes ~3 s: do it once per process.
    from langid.langid import LanguageIdentifier as _LangidIdentifier
    from langid.langid import model as _model_string

    return _LangidIdentifier.from_modelstring(_model_string, norm_probs=False)


class LanguageIdentifier:
    """langid.py's language identifier, evaluated a batch at a time.

    `languages` restricts the candidate set like `langid.set_languages` (default: all 97).
    """

    def __init__(self, languages: Sequence[str] | None = None):
        reference = _langid_reference()
        classes = list(reference.nb_classes)
        columns = np.arange(len(classes))
        if languages is not None:
            unknown = sorted(set(languages) - set(classes))
            if unknown:
                raise ValueError(f"langid does not know the language code(s) {unknown}; known: {sorted(classes)}")
            columns = np.asarray([i for i, code in enumerate(classes) if code in set(languages)])
        self.languages: list[str] = [classes[i] for i in columns]
        feature_scores = np.asarray(reference.nb_ptc, dtype=np.float64)[:, columns]
        self._priors = np.asarray(reference.nb_pc, dtype=np.float64)[columns]
        self._next_state = np.asarray(reference.tk_nextmove, dtype=np.int64)
        n_states = len(self._next_state) // 256
        self.state_scores = np.zeros((n_states, len(columns)), dtype=np.float64)
        for state, features in reference.tk_output.items():
            self.state_scores[state] = feature_scores[list(features)].sum(axis=0)

    def index(self, language: str) -> int:
        """Column of `language` in the scores (and the value `predict` returns for it)."""
        try:
            return self.languages.index(language)
        except ValueError:
            raise ValueError(f"language {language!r} is not among the identifier's languages") from None

    def scores(self, sentences: Sequence[str]) -> np.ndarray:
        """Unnormalised log-probability of each language: float64 `(len(sentences), len(self.languages))`."""
        import scipy.sparse

        encoded = [sentence.encode("utf-8") for sentence in sentences]
        n = len(encoded)
        if n == 0:
            return np.zeros((0, len(self.languages)), dtype=np.float64)
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=n)
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8).astype(np.int64)
        starts = np.zeros(n, dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        # Longest first: at byte position t the sentences still running are the first `active[t]` ones.
        order = np.argsort(-lengths, kind="stable")
        sorted_lengths, sorted_starts = lengths[order], starts[order]
        longest = int(sorted_lengths[0])
        active = np.searchsorted(-sorted_lengths, -np.arange(longest), side="left")
        # Visited states are stored sentence after sentence (CSR order): byte t of sorted sentence j lands at
        # row_starts[j] + t, so the count matrix needs no sorting (repeated states are summed by the product).
        row_starts = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sorted_lengths, out=row_starts[1:])
        visited = np.empty(int(row_starts[-1]), dtype=np.int64)
        state = np.zeros(n, dtype=np.int64)
        for t in range(longest):
            k = int(active[t])
            step = self._next_state[(state[:k] << 8) + data[sorted_starts[:k] + t]]
            state[:k] = step
            visited[row_starts[:k] + t] = step
        counts = scipy.sparse.csr_matrix(
            (np.ones(len(visited)), visited, row_starts), shape=(n, self.state_scores.shape[0])
        )
        sorted_scores = counts @ self.state_scores + self._priors
        result = np.empty_like(sorted_scores)
        result[order] = sorted_scores
        return result

    def predict(self, sentences: Sequence[str]) -> np.ndarray:
        """Index (into `self.languages`) of the most likely language of each sentence."""
        return self.scores(sentences).argmax(axis=1)

    def classify(self, sentences: Sequence[str]) -> list[str]:
        """Language code of each sentence."""
        return [self.languages[i] for i in self.predict(sentences)]


@functools.lru_cache(maxsize=8)
def shared_identifier(languages: tuple[str, ...] | None = None) -> LanguageIdentifier:
    """A `LanguageIdentifier` per candidate set, built once per process."""
    return LanguageIdentifier(languages)


# Below this share of a sample in the declared language, with another language holding the majority, the sample is
# taken to be in that other language (short or noisy sentences leave some rows misidentified, never most of them).
MIN_DECLARED_SHARE = 0.3


def language_mismatch(texts: Sequence[str], language: str) -> str | None:
    """What language ID finds instead of `language` in `texts` ("finds de for 95% and fr for 0%"), or None when they
    look like `language` (or language ID does not know it)."""
    identifier = shared_identifier()
    if not texts or language not in identifier.languages:
        return None
    found = Counter(identifier.classify(list(texts)))
    top, top_count = found.most_common(1)[0]
    share = found[language] / len(texts)
    if top == language or share >= MIN_DECLARED_SHARE or top_count / len(texts) <= 0.5:
        return None
    return (
        f"language ID on {len(texts)} sentences finds {top} for {100 * top_count / len(texts):.0f}% and {language} "
        f"for {100 * share:.0f}%"
    )
