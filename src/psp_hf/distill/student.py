"""A minimal distillation loop: fit a P-SP table so each sentence's average matches its teacher embedding.

Loss: ``1 - cos(student(s) W, teacher(s))`` where ``W`` is a learned linear map when the student's dimension
differs from the teacher's (the identity otherwise). The table is trained with SparseAdam (only the rows of
a batch's pieces move), ``W`` with Adam. This is the phase-1 experiment loop; the shared training loop
(`psp_hf.training`) will take the loss over.

Run: ``python -m psp_hf.distill.student --cache /work/cache/distill/teacher-minilm --out /work/cache/distill/m384``
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..datasets_local import data_dir, iter_tsv


# ----------------------------------------------------------------------------------------------- quick STS
def quick_sts(encoder, root: str | Path | None = None) -> dict[str, float]:
    """Pearson x100 of cosine: STS 2012–2016 (mean of each year's datasets, then of the years), STS-B test,
    SICK-R test. A small stand-in for `psp_hf.evaluation` that needs only `encode`."""
    from scipy.stats import pearsonr

    base = data_dir(root)

    def score(rows: list[tuple[str, str, float]]) -> float:
        left = encoder.encode([r[0] for r in rows])
        right = encoder.encode([r[1] for r in rows])
        left = left / np.maximum(np.linalg.norm(left, axis=1, keepdims=True), 1e-12)
        right = right / np.maximum(np.linalg.norm(right, axis=1, keepdims=True), 1e-12)
        return 100 * float(pearsonr((left * right).sum(1), [r[2] for r in rows])[0])

    results: dict[str, float] = {}
    for year in ("STS12", "STS13", "STS14", "STS15", "STS16"):
        per_file = [
            score([(r[1], r[2], float(r[0])) for r in iter_tsv(p)])
            for p in sorted((base / "sts" / "en" / year).glob("*.tsv"))
        ]
        results[year] = float(np.mean(per_file))
    results["STS12-16"] = float(np.mean([results[y] for y in ("STS12", "STS13", "STS14", "STS15", "STS16")]))
    results["STS-B test"] = score([(r[5], r[6], float(r[4])) for r in iter_tsv(base / "sts/stsbenchmark/test.tsv")])
    results["SICK-R test"] = score([(r[1], r[2], float(r[3])) for r in iter_tsv(base / "sts/sick/test.tsv")])
    return results


# ----------------------------------------------------------------------------------------------- data
@dataclass
class TokenizedPool:
    """All pool sentences tokenized once: piece ids back to back, with each sentence's start and length."""

    flat: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    @classmethod
    def build(cls, encoder, sentences: list[str], batch_size: int = 65536) -> TokenizedPool:
        """Tokenize `sentences` with `encoder` (a `PSPEncoder`)."""
        flats, lengths = [], []
        for start in range(0, len(sentences), batch_size):
            ids, offsets = encoder.tokenize(sentences[start : start + batch_size])
            ids, offsets = ids.numpy(), offsets.numpy()
            flats.append(ids)
            lengths.append(np.diff(offsets, append=len(ids)))
        flat = np.concatenate(flats)
        length = np.concatenate(lengths)
        starts = np.zeros(len(length), dtype=np.int64)
        np.cumsum(length[:-1], out=starts[1:])
        return cls(flat, starts, length)

    def batch(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """`(flat_ids, offsets)` of the sentences `rows`, in that order (vectorised gather)."""
        lengths = self.lengths[rows]
        offsets = np.zeros(len(rows), dtype=np.int64)
        np.cumsum(lengths[:-1], out=offsets[1:])
        positions = np.repeat(self.starts[rows] - offsets, lengths) + np.arange(int(lengths.sum()))
        return torch.from_numpy(self.flat[positions]), torch.from_numpy(offsets)


# ----------------------------------------------------------------------------------------------- training
@dataclass
class DistillSettings:
    """Knobs of `distill_table`."""

    batch_size: int = 512
    lr: float = 0.01
    projection_lr: float = 0.001
    minutes: float = 3.0
    max_epochs: float = 100.0
    seed: int = 0
    log_every: int = 200


def distill_table(
    encoder, pool: TokenizedPool, targets: np.ndarray, settings: DistillSettings, log=print
) -> torch.nn.Linear | None:
    """Train `encoder`'s table in place on `1 - cos`; returns the learned projection (None when dims match)."""
    model = encoder.model.train()
    model.embeddings.sparse = True
    teacher_dim = targets.shape[1]
    projection = None
    dense_params = []
    if model.config.hidden_size != teacher_dim:
        torch.manual_seed(settings.seed)
        projection = torch.nn.Linear(model.config.hidden_size, teacher_dim, bias=False)
        dense_params = list(projection.parameters())
    if model.piece_weights is not None:
        dense_params.append(model.piece_weights)
    sparse_opt = torch.optim.SparseAdam([model.embeddings.weight], lr=settings.lr)
    dense_opt = torch.optim.Adam(dense_params, lr=settings.projection_lr) if dense_params else None
    targets_t = torch.from_numpy(np.ascontiguousarray(targets, dtype=np.float32))
    rng = np.random.default_rng(settings.seed)
    n = len(targets)
    steps_per_epoch = math.ceil(n / settings.batch_size)
    deadline = time.perf_counter() + 60 * settings.minutes
    step, running = 0, 0.0
    started = time.perf_counter()
    while step < settings.max_epochs * steps_per_epoch and time.perf_counter() < deadline:
        order = rng.permutation(n)
        for start in range(0, n, settings.batch_size):
            rows = order[start : start + settings.batch_size]
            ids, offsets = pool.batch(rows)
            student = model.embed(ids, offsets)
            if projection is not None:
                student = projection(student)
            loss = 1 - torch.nn.functional.cosine_similarity(student, targets_t[rows], dim=1).mean()
            sparse_opt.zero_grad()
            if dense_opt is not None:
                dense_opt.zero_grad()
            loss.backward()
            sparse_opt.step()
            if dense_opt is not None:
                dense_opt.step()
            step += 1
            running += float(loss.detach())
            if step % settings.log_every == 0:
                log(
                    f"step {step} epoch {step / steps_per_epoch:.2f} loss {running / settings.log_every:.4f} "
                    f"{time.perf_counter() - started:.0f} s"
                )
                running = 0.0
            if time.perf_counter() >= deadline or step >= settings.max_epochs * steps_per_epoch:
                break
    model.embeddings.sparse = False
    model.eval()
    log(f"trained {step} steps ({step / steps_per_epoch:.2f} epochs) in {time.perf_counter() - started:.0f} s")
    return projection


def fold_projection(encoder, projection: torch.nn.Linear):
    """A new `PSPEncoder` whose table is `table @ W.T` (the student in the teacher's space)."""
    from ..encoder import PSPEncoder
    from ..modeling import PSPConfig, PSPModel

    weight = projection.weight.detach()
    config = PSPConfig.from_dict({**encoder.model.config.to_dict(), "hidden_size": weight.shape[0]})
    model = PSPModel(config)
    with torch.no_grad():
        model.embeddings.weight.copy_(encoder.model.embeddings.weight.detach() @ weight.T)
        if model.piece_weights is not None:
            model.piece_weights.copy_(encoder.model.piece_weights.detach())
    return PSPEncoder(model.eval(), encoder.tokenizer)


def main(argv: list[str] | None = None) -> int:
    """Train and evaluate one distilled table; writes the model and a results JSON into --out."""
    parser = argparse.ArgumentParser(prog="python -m psp_hf.distill.student", description=__doc__.splitlines()[0])
    parser.add_argument("--cache", required=True, help="teacher cache folder")
    parser.add_argument("--out", required=True)
    parser.add_argument("--tokenizer", default=None, help="existing tokenizer folder (default: train one)")
    parser.add_argument("--vocab-size", type=int, default=30000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--init", choices=("random", "teacher"), default="random")
    parser.add_argument("--init-std", type=float, default=0.1, help="std of the random init")
    parser.add_argument("--sif", type=float, default=0.0, help="SIF constant a (0: no piece weights)")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--epochs", type=float, default=100.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0, help="use only the first N cached sentences (0: all)")
    parser.add_argument("--exclude-source", nargs="*", default=[], help="drop pool sentences of these sources")
    parser.add_argument("--corpus", default=None, help="pool folder (needed with --exclude-source)")
    args = parser.parse_args(argv)

    from ..encoder import PSPEncoder
    from ..tokenizer import train_tokenizer
    from .teacher import TeacherCache

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    sentences, targets = TeacherCache(args.cache).load()
    if args.exclude_source:
        import pyarrow.parquet as pq

        table = pq.read_table(Path(args.corpus) / "sentences.parquet")
        dropped = {
            s
            for s, src in zip(table["sentence"].to_pylist(), table["source"].to_pylist(), strict=True)
            if src in args.exclude_source
        }
        keep = np.fromiter((s not in dropped for s in sentences), dtype=bool, count=len(sentences))
        sentences = [s for s, k in zip(sentences, keep, strict=True) if k]
        targets = targets[keep]
    if args.limit:
        sentences, targets = sentences[: args.limit], targets[: args.limit]
    timings["load_labels_s"] = time.perf_counter() - t0
    print(f"{len(sentences)} labelled sentences, teacher dim {targets.shape[1]}")

    t0 = time.perf_counter()
    if args.tokenizer:
        from transformers import PreTrainedTokenizerFast

        tokenizer = PreTrainedTokenizerFast.from_pretrained(args.tokenizer)
    else:
        tokenizer = train_tokenizer(sentences, vocab_size=args.vocab_size, output_dir=out / "tokenizer")
    timings["tokenizer_s"] = time.perf_counter() - t0
    encoder = PSPEncoder.from_tokenizer(tokenizer, hidden_size=args.dim, seed=0, initializer_range=args.init_std)
    t0 = time.perf_counter()
    if args.init == "teacher":
        from .init import set_table, teacher_table
        from .teacher import load_teacher

        set_table(encoder, teacher_table(tokenizer, load_teacher(), args.dim))
    timings["init_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    pool = TokenizedPool.build(encoder, sentences)
    timings["tokenize_pool_s"] = time.perf_counter() - t0
    if args.sif > 0:
        from .piece_weights import sif_weights, with_piece_weights

        counts = np.bincount(pool.flat, minlength=encoder.model.config.vocab_size)
        encoder = with_piece_weights(encoder, sif_weights(counts, a=args.sif))
    untrained = quick_sts(encoder) if args.init != "random" else None
    settings = DistillSettings(batch_size=args.batch_size, lr=args.lr, minutes=args.minutes, max_epochs=args.epochs)
    t0 = time.perf_counter()
    projection = distill_table(encoder, pool, targets, settings)
    timings["train_s"] = time.perf_counter() - t0
    results = {"settings": vars(args), "timings": timings, "untrained_init": untrained, "student": quick_sts(encoder)}
    encoder.save_pretrained(out / "model")
    if projection is not None:
        folded = fold_projection(encoder, projection)
        results["student_projected"] = quick_sts(folded)
        folded.save_pretrained(out / "model-projected")
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
