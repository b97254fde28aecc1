"""The named teachers on the X-English dev sets and Tatoeba: the table of results/everyday.md, "The teachers".

    python bench/teacher_dev_sets.py --langs tr --teachers e5-small [--threads 1] [--work-dir DIR]

Each teacher embeds as labelling runs it (`teachers.labels.labelling_teacher`: e5-small through ONNX Runtime int8,
its vectors as they come, not whitened; use-multilingual in numpy), and `psp eval`'s tasks score it: retrieval
error (%, nearest cosine, mean of both directions) on XNLI's dev split, PUD, and Tatoeba. A sentence shared by
several sets (the English sides) is embedded once. Prints a Markdown table, one row per teacher and language.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

TASKS = ("xnli-dev", "pud-dev", "tatoeba")


class CachedTeacher:
    """A labelling teacher as an `encode` object that embeds each distinct sentence once."""

    def __init__(self, name: str, threads: int, work_dir: Path):
        from psp_hf.teachers.labels import labelling_teacher
        from psp_hf.teachers.named import USE, USE_BACKEND

        backend = USE_BACKEND if name == USE else "onnx-int8"
        self.model = labelling_teacher(name, backend, threads, work_dir)
        self.vectors: dict[str, np.ndarray] = {}

    def encode(self, sentences, batch_size: int = 64, **_) -> np.ndarray:
        missing = list(dict.fromkeys(s for s in sentences if s not in self.vectors))
        if missing:
            rows = np.asarray(self.model.encode(missing, batch_size=batch_size), dtype=np.float32)
            self.vectors.update(zip(missing, rows, strict=True))
        return np.stack([self.vectors[s] for s in sentences])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--langs", default="tr", help="comma-separated languages (default tr)")
    parser.add_argument("--teachers", default="e5-small", help="comma-separated named teachers (default e5-small)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--work-dir", default=".cache/teacher-dev-sets", help="where the ONNX export is kept")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    from psp_hf.data_folder import data_dir
    from psp_hf.evaluation import evaluate_model

    languages = [code.strip() for code in args.langs.split(",") if code.strip()]
    print("| teacher | language | XNLI-dev error % | PUD-dev error % | Tatoeba error % | seconds |")
    print("|---|---|---|---|---|---|")
    for name in (teacher.strip() for teacher in args.teachers.split(",") if teacher.strip()):
        teacher = CachedTeacher(name, args.threads, Path(args.work_dir) / name)
        started = time.perf_counter()
        result = evaluate_model(teacher, list(TASKS), data_dir(args.data_dir), tatoeba_languages=languages)["results"]
        seconds = time.perf_counter() - started
        for code in languages:
            errors = [result[task][code]["error_rate"] for task in TASKS]
            print(f"| {name} | {code} | " + " | ".join(f"{value:.2f}" for value in errors) + f" | {seconds:.0f} |")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
