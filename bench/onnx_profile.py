"""Where the int8 ONNX teacher spends its time, and what the export choices cost: attention traced as SDPA or
eager, the first layer's feed-forward output kept fp32 (the package's choice) or quantised, the batch size.

    PSP_DATA=../shared/data python bench/onnx_profile.py --teacher e5-small --multilingual 100 --out .cache/onnx-profile

One thread, one ONNX Runtime session at a time, so CPU milliseconds per sentence measure the model alone (less
sensitive to a busy machine than wall time). Agreement: mean cosine to the torch teacher on the same text and on
the 32 probe sentences of the labelling check. The op-type table is ONNX Runtime's profiler on the package's
variant (eager, first-layer feed-forward output fp32, batch 16). Exports are kept in OUT and reused.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def _cpu_ms(teacher, sentences: list[str], batch_size: int) -> tuple[float, np.ndarray]:
    teacher.encode(sentences[:64], batch_size=batch_size)
    started = time.process_time()
    labels = teacher.encode(sentences, batch_size=batch_size)
    return 1000 * (time.process_time() - started) / len(sentences), labels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", default="e5-small", help="teacher folder, Hub id or name (default e5-small)")
    parser.add_argument("--multilingual", type=int, default=100, help="sentences of each of the 8 languages")
    parser.add_argument("--out", required=True, help="folder for the exports")
    args = parser.parse_args(argv)

    import onnxruntime
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from teacher import multilingual_sample

    from psp_hf.teachers.labels import load_teacher
    from psp_hf.teachers.onnx import OnnxTeacher, _export, _quantize, _teacher_parts

    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    teacher = load_teacher(args.teacher)
    model, tokenizer, mode, normalize, max_length = _teacher_parts(teacher)
    sentences = sorted(multilingual_sample(args.multilingual), key=lambda s: (len(s), s))
    reference = np.asarray(teacher.encode(sentences, batch_size=64, convert_to_numpy=True), dtype=np.float32)
    variants = {  # name -> (attention traced, products kept fp32: None = the package's choice)
        "sdpa, first FFN output fp32": ("sdpa", None),
        "eager, first FFN output fp32 (package)": ("eager", None),
        "eager, all int8": ("eager", []),
    }
    print(f"{len(sentences)} sentences, teacher {args.teacher}, 1 thread, load {os.getloadavg()[0]:.1f} at start\n")
    print("| export | batch | CPU ms / sentence | cosine to torch (mean / min) | probe agreement |")
    print("|---|---|---|---|---|")
    for name, (attention, keep) in variants.items():
        fp32 = out / f"{attention}.onnx"
        if not fp32.is_file():
            _export(model, tokenizer, fp32, attention=attention)
        int8 = out / f"{attention}-{'package' if keep is None else 'all'}-int8.onnx"
        if not int8.is_file():
            _quantize(fp32, int8, keep_fp32=keep)
        onnx_teacher = OnnxTeacher(int8, tokenizer, mode, normalize, max_length, threads=1)
        probes = onnx_teacher.agreement(teacher)
        for batch_size in (8, 16, 64) if "package" in name else (16,):
            cpu_ms, labels = _cpu_ms(onnx_teacher, sentences, batch_size)
            cosines = (labels * reference).sum(1) / np.linalg.norm(labels, axis=1) / np.linalg.norm(reference, axis=1)
            print(
                f"| {name} | {batch_size} | {cpu_ms:.2f} | {cosines.mean():.4f} / {cosines.min():.4f} | {probes:.4f} |",
                flush=True,
            )
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.enable_profiling = True
    options.profile_file_prefix = str(out / "profile")
    profiled = OnnxTeacher(out / "eager-package-int8.onnx", tokenizer, mode, normalize, max_length, threads=1)
    profiled.session = onnxruntime.InferenceSession(
        str(out / "eager-package-int8.onnx"), options, providers=["CPUExecutionProvider"]
    )
    profiled.encode(sentences, batch_size=16)
    events = json.loads(Path(profiled.session.end_profiling()).read_text())
    per_op: collections.Counter[str] = collections.Counter()
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            per_op[event["args"]["op_name"]] += event["dur"]
    total = sum(per_op.values())
    print(
        f"\nload {os.getloadavg()[0]:.1f} at the end\n\n| op type (package variant, batch 16) | share of kernel time |"
    )
    print("|---|---|")
    for op, duration in per_op.most_common(10):
        print(f"| {op} | {100 * duration / total:.1f} % |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
