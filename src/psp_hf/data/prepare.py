"""The papers' two data recipes: ParaNMT-style paraphrase pairs and X–English bitext.

Each public function checks its recipe's own settings and describes the recipe (where the pair is in the
input, which filters in which order, what the output columns are called) as a `runner.Recipe`;
`runner.run_recipe` does the rest the same way for both: streamed reading, filtering, parquet shards, the
sentencepiece vocabulary, the report, the dataset card, and the atomic move into place or the Hub upload.
`datasets.load_dataset(folder, streaming=True)` reads the result (and the same call on a Hub repo after
`push_dataset`).

Output columns: paraphrases `sentence1`, `sentence2`, `overlap` (+ `score` when the input has one or a
score model is given); bitext `<lang>` (e.g. `de`) and `en`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from ..errors import PSPInputError
from .dataset_repo import load_prepared_tokenizer, push_dataset, tokenizer_folder
from .evaluation_filter import DropEvaluationSentences
from .filters import (
    DropDuplicates,
    DropEmpty,
    LanguageMatch,
    LengthRange,
    Normalize,
    OverlapMaximum,
    ScoreRange,
    length_unit_for,
)
from .readers import Column, bitext_layout, paraphrase_layout
from .runner import Recipe, RunSettings, run_recipe

__all__ = [
    "ModelScorer",
    "load_prepared_tokenizer",
    "prepare_bitext",
    "prepare_paraphrases",
    "push_dataset",
    "tokenizer_folder",
]


class ModelScorer:
    """Paraphrase score of a pair = cosine of a psp model's embeddings of its two sides."""

    def __init__(self, model: str | os.PathLike, batch_size: int = 1024):
        from ..encoder import load

        self.model_name = str(model)
        self.model = load(model)
        self.batch_size = batch_size

    def __call__(self, first: Sequence[str], second: Sequence[str]) -> np.ndarray:
        a = self.model.encode(list(first), batch_size=self.batch_size, normalize_embeddings=True)
        b = self.model.encode(list(second), batch_size=self.batch_size, normalize_embeddings=True)
        return np.einsum("ij,ij->i", a, b).astype(np.float64)


def _check_range(name: str, low: float, high: float) -> None:
    if low > high:
        raise PSPInputError(f"{name}: minimum {low} is above maximum {high}")


def _language_step(languages: tuple[str, str], enabled: bool, candidates: Sequence[str] | None) -> LanguageMatch:
    step = LanguageMatch(languages, enabled=enabled, candidates=candidates)
    try:
        step.check()
    except ValueError as error:
        raise PSPInputError(f"--lang: {error}") from None
    return step


def prepare_paraphrases(
    inputs: Sequence[str | os.PathLike],
    out: str | os.PathLike | None = None,
    *,
    columns: Sequence[Column] | None = None,
    score_column: Column | None = None,
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
    exclude_evaluation: bool = True,
    **run,
) -> dict:
    """Filter ParaNMT-format paraphrase pairs into a datasets folder (and/or a Hub dataset repo).

    Steps, in order, each counted in the report: lowercasing (and whitespace folding), empty side, token
    length of both sides in [min_tokens, max_tokens], trigram overlap <= max_overlap, exact duplicates,
    evaluation sentences (`exclude_evaluation`: a side equal to a sentence of the data folder's evaluation sets,
    normalised), langid of both sides == `language`, paraphrase score in [min_score, max_score] (the input's score
    column, or the cosine of `score_model`). `langid_candidates` restricts the languages langid chooses from
    (default: all 97 it knows). `run` takes the fields of `runner.RunSettings` (push_to_hub, overwrite, header,
    skip_bad_lines, shuffle, seed, num_shards, vocab_size, train_tokenizer, batch_size, limit, ...).
    Returns the report (also written to `report/report.json`).
    """
    _check_range("--min-score/--max-score", min_score, max_score)
    _check_range("--min-tokens/--max-tokens", min_tokens, max_tokens)
    if not 0.0 <= max_overlap <= 1.0:
        raise PSPInputError(f"--max-overlap must be between 0 and 1, got {max_overlap}")
    unit = length_unit_for(language) if length_unit == "auto" else length_unit

    def steps() -> list:
        return [
            Normalize(lowercase),
            DropEmpty(),
            LengthRange(min_tokens, max_tokens, (unit, unit), enabled=length_filter),
            OverlapMaximum(max_overlap, enabled=overlap_filter),
            DropDuplicates(ordered=False, enabled=dedupe),
            DropEvaluationSentences(enabled=exclude_evaluation),
            _language_step((language, language), langid, langid_candidates),
            ScoreRange(
                min_score,
                max_score,
                scorer=ModelScorer(score_model) if score_model is not None else None,
                enabled=score_filter,
            ),
        ]

    recipe = Recipe(
        kind="paraphrases",
        layout=paraphrase_layout(columns, score_column),
        steps=steps,
        sides=("sentence1", "sentence2"),
        languages=[language],
        options={
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
            "exclude_evaluation": exclude_evaluation,
        },
        needs_score=score_filter and score_model is None,
        computes_score=score_model is not None,
        keeps_overlap=True,
    )
    return run_recipe(recipe, inputs, RunSettings(out=out, lowercase=lowercase, **run))


def prepare_bitext(
    inputs: Sequence[str | os.PathLike],
    lang: str,
    out: str | os.PathLike | None = None,
    *,
    columns: Sequence[Column] | None = None,
    length_filter: bool = True,
    min_tokens: int = 3,
    max_tokens: int = 100,
    length_unit: str = "auto",
    langid: bool = False,
    langid_candidates: Sequence[str] | None = None,
    lowercase: bool = True,
    dedupe: bool = True,
    exclude_evaluation: bool = True,
    **run,
) -> dict:
    """Filter `lang`–English bitext into a datasets folder with columns `<lang>` and `en`.

    Steps: lowercasing, empty side, token length of both sides in [min_tokens, max_tokens] (the `lang` side
    in characters for languages written without spaces, e.g. zh/ja/th, unless `length_unit` says otherwise),
    exact duplicates of the ordered pair, evaluation sentences (`exclude_evaluation`: a side equal to a sentence
    of STS, STS17, Tatoeba, ... by normalised exact match; see `evaluation_filter`), optionally langid (`lang`
    side is `lang`, English side is `en`), then a random order. The sentencepiece vocabulary is trained on both
    sides together. `run` takes the fields of `runner.RunSettings`, as for `prepare_paraphrases`.
    """
    if not lang or lang == "en":
        raise PSPInputError(f"--lang must name the non-English language (e.g. de), got {lang!r}")
    _check_range("--min-tokens/--max-tokens", min_tokens, max_tokens)
    unit = length_unit_for(lang) if length_unit == "auto" else length_unit

    def steps() -> list:
        return [
            Normalize(lowercase),
            DropEmpty(),
            LengthRange(min_tokens, max_tokens, (unit, "words"), enabled=length_filter),
            DropDuplicates(ordered=True, enabled=dedupe),
            DropEvaluationSentences(enabled=exclude_evaluation),
            _language_step((lang, "en"), langid, langid_candidates),
        ]

    recipe = Recipe(
        kind="bitext",
        layout=bitext_layout(lang, columns),
        steps=steps,
        sides=(lang, "en"),
        languages=[lang, "en"],
        declared_languages=None if langid else (lang, "en"),
        options={
            "lang": lang,
            "langid": langid,
            "langid_candidates": langid_candidates,
            "length_filter": length_filter,
            "min_tokens": min_tokens,
            "max_tokens": max_tokens,
            "length_unit": unit,
            "lowercase": lowercase,
            "dedupe": dedupe,
            "exclude_evaluation": exclude_evaluation,
        },
    )
    return run_recipe(recipe, inputs, RunSettings(out=out, lowercase=lowercase, **run))
