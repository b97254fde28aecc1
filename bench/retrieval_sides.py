"""Which side of a language model limits its Tatoeba score: its X side or its English side?

The teacher's vectors are mapped into the model's space by least squares (an affine map from the teacher's unit
vectors to the model's, fitted on --fit-sentences sentences of the language's monolingual text and as many English
Wikipedia sentences), then put in place of one side at a time. Tatoeba error is `psp eval`'s: nearest cosine among
the 1,000 pairs, the mean of both directions.

    PSP_DATA=../shared/data python bench/retrieval_sides.py --model ar=OUT/ar/model --model zh=OUT/zh/model

Columns: the model alone; the teacher's X side (mapped) against the model's English side; the model's X side
against the teacher's English side (mapped); the mapped teacher on both sides; the teacher itself. The fit text is
the `mono/sentences.txt.gz` that `psp languages` prepared beside the model folder (`OUT/<xx>/mono`).
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import numpy as np

from psp_hf.inference.similarity import unit_rows

ENGLISH_TEXT = "unlabeled/en/wikipedia-2015/sentences.txt.gz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", required=True, metavar="XX=FOLDER", help="repeatable")
    parser.add_argument("--teacher", default="e5-small", help="a teacher name or sentence-transformers folder")
    parser.add_argument("--fit-sentences", type=int, default=10_000, help="per side (default 10,000)")
    parser.add_argument("--data", default=None, help="the data folder (default $PSP_DATA or ../shared/data)")
    args = parser.parse_args()
    if any("=" not in entry for entry in args.model):
        parser.error("--model takes XX=FOLDER, e.g. ar=OUT/ar/model")

    import psp_hf
    from psp_hf.data_folder import existing_data_dir
    from psp_hf.evaluation.data import read_tatoeba
    from psp_hf.teachers.labels import load_teacher

    data = Path(existing_data_dir(args.data))
    teacher = load_teacher(args.teacher)
    english = sample_lines(data / ENGLISH_TEXT, args.fit_sentences, seed=1)
    teacher_english = teacher.encode(english)  # the same English fit text for every language: embedded once
    print("| language | model | teacher's X side | teacher's English side | mapped teacher | teacher |")
    print("|---|---|---|---|---|---|")
    for code, folder in (entry.split("=", 1) for entry in args.model):
        mono = Path(folder).parent / "mono" / "sentences.txt.gz"
        if not mono.is_file():
            raise SystemExit(f"--model {code}={folder}: no {mono} (the fit text psp languages prepares)")
        model = psp_hf.load(folder)
        own = sample_lines(mono, args.fit_sentences, seed=0)
        fit_teacher = unit_rows(np.concatenate([teacher.encode(own), teacher_english]))
        mapping = least_squares_map(fit_teacher, unit_rows(model.encode(own + english)))
        tatoeba = read_tatoeba(data, code)
        student_x, student_en = model.encode(tatoeba.other), model.encode(tatoeba.english)
        teacher_x, teacher_en = unit_rows(teacher.encode(tatoeba.other)), unit_rows(teacher.encode(tatoeba.english))
        mapped_x, mapped_en = apply_map(mapping, teacher_x), apply_map(mapping, teacher_en)
        errors = [
            tatoeba_error(student_x, student_en),
            tatoeba_error(mapped_x, student_en),
            tatoeba_error(student_x, mapped_en),
            tatoeba_error(mapped_x, mapped_en),
            tatoeba_error(teacher_x, teacher_en),
        ]
        print(f"| {code} | " + " | ".join(f"{error:.2f}" for error in errors) + " |", flush=True)


def sample_lines(path: Path, count: int, seed: int) -> list[str]:
    """`count` non-empty lines of a text file (gzip when it ends in .gz), drawn evenly at random (seeded)."""
    from psp_hf.io.reading import open_text

    with open_text(path) as handle:
        lines = [line.strip() for line in handle if line.strip()]
    random.Random(seed).shuffle(lines)
    return lines[:count]


def least_squares_map(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The affine map (the last row is the bias) that takes `source`'s rows closest to `target`'s."""
    solution, *_ = np.linalg.lstsq(np.c_[source, np.ones(len(source))], target, rcond=None)
    return solution


def apply_map(mapping: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return np.c_[rows, np.ones(len(rows))] @ mapping


def tatoeba_error(other: np.ndarray, english: np.ndarray) -> float:
    """Percent of pairs whose partner is not the nearest by cosine, the mean of both directions (`psp eval`'s)."""
    from psp_hf.evaluation.metrics.bitext_mining import nearest_neighbour_errors

    return 100 * sum(nearest_neighbour_errors(other, english)) / 2


if __name__ == "__main__":
    main()
