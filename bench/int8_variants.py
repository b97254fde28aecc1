"""Which matrix products of the int8 teacher to keep in fp32: agreement with the fp32 export and speed, per variant.

    python bench/int8_variants.py --corpus .cache/distill/pool --sentences 5000 --threads 2 --out .cache/int8-variants

Each variant is `onnxruntime.quantization.quantize_dynamic` with some of the exported teacher's products left out
(`nodes_to_exclude`). Columns: cosine of each label to the fp32 export's label of the same sentence (mean and
minimum), and sentences/s relative to the all-int8 variant; the variants are timed `--passes` times in turn, so a
drift of the machine's speed spreads over all of them. Every variant is also written as OUT/<variant>/onnx/, the
layout `psp prepare label -o OUT/<variant> --backend onnx-int8` picks up, so its labels can be distilled and
scored like any other (results/teachers-english.md's student table).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import numpy as np

# Variant -> which products stay fp32, by the names transformers' BERT-like exports give them; None is the
# package's own choice (`first_feed_forward_output`, what `psp prepare label` quantises with).
VARIANTS = {
    "all-int8": lambda name: False,
    "first-ffn-output": None,
    "first-ffn": lambda name: "/layer.0/" in name and ("/intermediate/" in name or "/layer.0/output/dense/" in name),
    "first-layer": lambda name: "/layer.0/" in name,
    "every-ffn-output": lambda name: "/output/dense/" in name and "/attention/" not in name,
}


def main(argv: list[str] | None = None) -> int:
    from psp_hf.cli import flags

    parser = flags.Parser(description=__doc__.split("\n\n")[0])
    help_text = "a corpus from `psp prepare distill-corpus` (folder, parquet or txt)"
    parser.add_argument("--corpus", required=True, help=help_text)
    parser.add_argument("--sentences", type=int, default=5_000, help="the corpus's first N sentences")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--passes", type=int, default=2, help="timings of each variant, taken in turn")
    parser.add_argument("--out", required=True, help="folder for the fp32 export and the variants")
    args = parser.parse_args(argv)

    import onnx

    from psp_hf.data.distill_corpus import read_corpus
    from psp_hf.teachers.labels import load_teacher, teacher_name
    from psp_hf.teachers.onnx import OnnxTeacher, _quantize, _teacher_parts, first_feed_forward_output

    sentences = sorted(read_corpus(args.corpus)[: args.sentences], key=lambda s: (len(s), s))
    teacher = load_teacher()
    reference_dir = Path(args.out) / "fp32" / "onnx"
    fp32 = OnnxTeacher.from_sentence_transformer(
        teacher, reference_dir, quantize=False, threads=args.threads, name=teacher_name(None)
    )
    exported = onnx.load(str(reference_dir / "model.onnx"))
    products = [node.name for node in exported.graph.node if node.op_type == "MatMul"]
    left_out = {
        variant: first_feed_forward_output(exported) if keep is None else [name for name in products if keep(name)]
        for variant, keep in VARIANTS.items()
    }
    reference = fp32.encode(sentences)
    _, tokenizer, mode, normalize, max_length = _teacher_parts(teacher)
    models = {}
    for variant, names in left_out.items():
        folder = Path(args.out) / variant / "onnx"
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("model.onnx", "teacher.json"):
            shutil.copyfile(reference_dir / name, folder / name)
        if not (folder / "model-int8.onnx").is_file():
            _quantize(reference_dir / "model.onnx", folder / "model-int8.onnx", names)
        models[variant] = OnnxTeacher(
            folder / "model-int8.onnx", tokenizer, mode, normalize, max_length, threads=args.threads
        )
    speeds: dict[str, list[float]] = {variant: [] for variant in models}
    cosines = {}
    for _ in range(args.passes):
        for variant, model in models.items():
            model.encode(sentences[:256])
            started = time.perf_counter()
            labels = model.encode(sentences)
            speeds[variant].append(len(sentences) / (time.perf_counter() - started))
            cosines[variant] = (labels * reference).sum(1)
            print(f"{variant}: {speeds[variant][-1]:.0f} sentences/s", file=sys.stderr, flush=True)
    base = np.mean(speeds["all-int8"])
    print(f"\n{len(sentences):,} corpus sentences, {args.threads} thread(s), {args.passes} pass(es)")
    print("\n| variant | MatMul nodes left out | cosine to fp32 (mean / min) | sentences/s | vs all-int8 |")
    print("|---|---|---|---|---|")
    for variant, names in left_out.items():
        speed = np.mean(speeds[variant])
        print(
            f"| {variant} | {len(names)} | {cosines[variant].mean():.4f} / {cosines[variant].min():.4f} | "
            f"{speed:,.0f} | {speed / base:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
