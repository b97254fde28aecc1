"""Teacher labelling speed and agreement: the sentence-transformers teacher (torch, fp32) against its ONNX Runtime
exports (fp32 and int8 weights), on the same corpus sentences, on this machine's threads.

    python bench/teacher.py --corpus .cache/distill/pool --sentences 10000 --threads 2
    python bench/teacher.py --multilingual 250 --teacher e5-small --threads 2      # 250 a language, 8 languages
    python bench/teacher.py --multilingual 250 --teacher use-multilingual --backends numpy

`--multilingual N` takes the first N sentences of each language's unlabeled text in $PSP_DATA (en ar de es fr ru
tr zh) instead of a distillation corpus. The named teachers are docs/teachers.md's; `use-multilingual` has one
backend, numpy.

Columns: sentences/s (wall clock, the teacher already loaded and warmed up; the ONNX rows include neither the
export nor the quantisation, which happen once per cache), CPU seconds per 1,000 sentences (all threads summed:
less sensitive to other jobs on the machine than wall time), and the cosine between each backend's label and the
torch teacher's label of the same sentence (mean and minimum). `torch` is what `psp prepare label` ran before
the backends existed (batch 64); the ONNX rows use `psp prepare label`'s default batches (by token count, at most
256 padded tokens). `bench/labelling_speed.py` compares every CPU route for e5.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _timed(teacher, sentences: list[str], batch_size: int) -> tuple[np.ndarray, float, float]:
    teacher.encode(sentences[:256], batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    wall, cpu = time.perf_counter(), time.process_time()
    labels = teacher.encode(sentences, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    return np.asarray(labels, dtype=np.float32), time.perf_counter() - wall, time.process_time() - cpu


LANGUAGES = ("en", "ar", "de", "es", "fr", "ru", "tr", "zh")


def multilingual_sample(per_language: int) -> list[str]:
    """The first `per_language` distinct lines of each language's unlabeled sentences (all its sources in turn)."""
    import gzip

    data = Path(os.environ.get("PSP_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data"))
    sentences: list[str] = []
    for lang in LANGUAGES:
        taken: dict[str, None] = {}  # insertion-ordered set
        for path in sorted((data / "unlabeled" / lang).glob("*/sentences.txt.gz")):
            with gzip.open(path, "rt", encoding="utf-8") as lines:
                for line in lines:
                    if len(taken) == per_language:
                        break
                    if line.strip():
                        taken[line.strip()] = None
        if len(taken) < per_language:
            raise SystemExit(f"{data / 'unlabeled' / lang}: fewer than {per_language} sentences")
        sentences += list(taken)
    return sentences


def main(argv: list[str] | None = None) -> int:
    from psp_hf.cli import flags

    parser = flags.Parser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", help="a corpus from `psp prepare distill-corpus` (folder, parquet or txt)")
    source.add_argument(
        "--multilingual", type=int, metavar="N", help="N sentences of each of 8 languages from $PSP_DATA/unlabeled"
    )
    parser.add_argument("--sentences", type=int, default=10_000, help="the corpus's first N sentences")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--teacher", default=None, help="sentence-transformers folder or Hub id (default MiniLM)")
    parser.add_argument("--backends", default="torch,onnx,onnx-int8")
    parser.add_argument("--json", default=None, help="also write the rows here")
    args = parser.parse_args(argv)

    from psp_hf.data.distill_corpus import read_corpus
    from psp_hf.errors import PSPInputError
    from psp_hf.teachers.labels import default_batch_size, labelling_teacher, load_teacher, teacher_name
    from psp_hf.teachers.onnx import OnnxTeacher

    sentences = read_corpus(args.corpus)[: args.sentences] if args.corpus else multilingual_sample(args.multilingual)
    # Each sentence's language, for the per-language agreement of --multilingual (the sample is in LANGUAGES order).
    language_of = {} if args.corpus else {s: LANGUAGES[i // args.multilingual] for i, s in enumerate(sentences)}
    # What labelling does: chunks sorted by length (the cache sorts before it calls the teacher).
    sentences.sort(key=lambda s: (len(s), s))
    backends = args.backends.split(",")
    rows, reference = [], None
    with tempfile.TemporaryDirectory() as work:
        for backend in backends:
            refused = False
            try:
                if backend == "numpy":
                    from psp_hf.teachers.named import UseTeacher

                    teacher = UseTeacher(args.threads)
                else:
                    teacher = labelling_teacher(args.teacher, backend, args.threads, Path(work) / "onnx")
            except PSPInputError as error:
                if backend != "onnx-int8":
                    raise
                # Labelling refuses this teacher's int8 model; measure it anyway, to show why.
                print(f"onnx-int8: {error}", file=sys.stderr)
                refused = True
                teacher = OnnxTeacher.from_sentence_transformer(
                    load_teacher(args.teacher),
                    Path(work) / "onnx",
                    threads=args.threads,
                    name=teacher_name(args.teacher),
                    min_agreement=None,
                )
            batch_size = default_batch_size(backend)
            labels, wall, cpu = _timed(teacher, sentences, batch_size)
            if reference is None:
                reference = labels
            cosines = (labels * reference).sum(1) / (np.linalg.norm(labels, axis=1) * np.linalg.norm(reference, axis=1))
            rows.append(
                {
                    "backend": backend + (" (refused for labelling)" if refused else ""),
                    "batch_size": batch_size,
                    "sentences_per_s": len(sentences) / wall,
                    "cpu_s_per_1000": 1000 * cpu / len(sentences),
                    "mean_cosine": float(cosines.mean()),
                    "min_cosine": float(cosines.min()),
                    "mean_cosine_by_language": {
                        lang: float(cosines[[language_of.get(s) == lang for s in sentences]].mean())
                        for lang in LANGUAGES
                        if language_of
                    },
                }
            )
            print(f"{backend}: {rows[-1]['sentences_per_s']:.0f} sentences/s", file=sys.stderr, flush=True)
    base = rows[0]
    load = os.getloadavg()[0]
    what = "corpus" if args.corpus else f"multilingual ({args.multilingual} each of {', '.join(LANGUAGES)})"
    print(f"\n{len(sentences):,} {what} sentences, {args.threads} thread(s), load average at the end: {load:.1f}")
    print(
        f"\n| backend | sentences/s | vs {base['backend']} | CPU s / 1,000 | cosine to {base['backend']} (mean / min) |"
    )
    print("|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['backend']} (batch {row['batch_size']}) | {row['sentences_per_s']:,.0f} | "
            f"{row['sentences_per_s'] / base['sentences_per_s']:.2f}x | {row['cpu_s_per_1000']:.1f} | "
            f"{row['mean_cosine']:.4f} / {row['min_cosine']:.4f} |"
        )
    if language_of and len(rows) > 1:
        print(f"\n| backend | mean cosine to {base['backend']}: " + " | ".join(LANGUAGES) + " |")
        print("|---" * (len(LANGUAGES) + 1) + "|")
        for row in rows[1:]:
            cells = " | ".join(f"{row['mean_cosine_by_language'][lang]:.4f}" for lang in LANGUAGES)
            print(f"| {row['backend']} | {cells} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
