"""The training loop: one Accelerate loop for one CPU process, several CPU processes, or GPUs.

Per mega-batch: gather M mini-batches from the stream, embed them without gradients, mine hardest negatives,
then take one optimizer step per mini-batch. Checkpoints are written at mega-batch boundaries (a mega-batch is
mined with one set of weights; cutting it would change the negatives on resume), atomically, and hold
everything needed to continue exactly: weights, optimizer states, step, M, epoch, each process's position in
the stream and RNG states. Dropout masks come from a generator seeded by (seed, process, step), so a resumed
run draws the same masks without replaying the RNG.

With `--teacher-cache`, a second stream of (sentence, teacher vector) batches from the cached pool runs beside the
pairs (cycled, reshuffled per pass) and each step adds `distill_weight * mean(1 - cos(W student, teacher))` to
`margin_weight *` the margin loss; without pairs (or with `--margin-weight 0`) the run is distillation only and
an epoch is a pass over the pool. The checkpoint then also holds the pool stream's epoch and position and the
projection W.

Layout of `--output-dir`:

    config.json, model.safetensors, tokenizer*.json, *.py   the final Hub-format model
    training/checkpoint.pt                                  last checkpoint (for --resume)
    training/best.safetensors                               weights with the best dev score so far
    training/tokenizer/                                     the tokenizer the run uses
    training/args.json, training/metrics.jsonl              settings and one JSON line per log/eval
    training/projection.safetensors                         W (distillation with --dim != the teacher's dim)
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import PSPInputError
from .config import DEV_SPLITS, TrainingArguments
from .loss import LazyAdam, TrainingEncoder, clip_grad_norm, distill_loss, margin_loss
from .miner import NO_NEGATIVE, MegaBatch, MegaBatchMiner, tokenize_megabatch

CHECKPOINT_FORMAT = 1
# Settings that cannot change between a run and its resumption (they change the data order or the model).
RESUME_FIXED = (
    "data",
    "data_config",
    "split",
    "columns",
    "kind",
    "lang",
    "shuffle_buffer",
    "tokenizer",
    "vocab_size",
    "tokenizer_sentences",
    "lowercase",
    "dim",
    "batch_size",
    "megabatch_size",
    "megabatch_anneal",
    "negatives",
    "seed",
    "teacher_cache",
    "distill_batch_size",
    "init",
    "init_std",
    "init_vectors",
    "teacher_model",
    "piece_weights",
)

# Settings that only matter to the margin loss on pairs (left off the card of a distillation-only model).
PAIR_ONLY_SETTINGS = (
    "kind",
    "split",
    "columns",
    "data_config",
    "lang",
    "batch_size",
    "megabatch_size",
    "megabatch_anneal",
    "negatives",
    "margin",
    "one_sided",
    "pairs_seen",
    "teacher_negative_threshold",
)


@dataclass
class TrainState:
    """Progress counters saved in checkpoints."""

    step: int = 0
    epoch: int = 0
    megabatch_size: int = 1
    pairs_seen: int = 0
    train_seconds: float = 0.0
    best_score: float | None = None
    best_step: int | None = None
    last_score: float | None = None
    last_eval_step: int | None = None
    finished: bool = False
    positions: list[int] = field(default_factory=list)  # raw rows consumed in `epoch`, per process
    distill_epoch: int = 0  # pass over the teacher pool (equals `epoch` in a distillation-only run)
    distill_position: int = 0  # rows of this pass consumed, per process (equal on every process)
    sentences_seen: int = 0  # pool sentences in the distillation loss, all processes together
    teacher_masked: int = 0  # negatives skipped as teacher paraphrases


@dataclass
class _LogWindow:
    """Sums over the steps since the last metrics line."""

    loss: torch.Tensor
    norm: torch.Tensor
    margin: torch.Tensor
    distill: torch.Tensor
    steps: int = 0
    pairs: int = 0
    sentences: int = 0
    seconds: float = 0.0
    masked: int = 0

    @classmethod
    def new(cls, device: torch.device) -> _LogWindow:
        return cls(*(torch.zeros((), device=device) for _ in range(4)))


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MB."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / 2**20


def _atomic_write_bytes(path: Path, writer) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        writer(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _rng_state() -> dict[str, Any]:
    numpy_state = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "numpy_keys": torch.from_numpy(numpy_state[1].astype(np.int64)),
        "numpy_rest": [int(numpy_state[2]), int(numpy_state[3]), float(numpy_state[4])],
        "python": [random.getstate()[0], list(random.getstate()[1]), random.getstate()[2]],
    }


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    rest = state["numpy_rest"]
    np.random.set_state(("MT19937", state["numpy_keys"].numpy().astype(np.uint32), rest[0], rest[1], rest[2]))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


class Trainer:
    """Trains a P-SP model as `TrainingArguments` say; `train()` returns the final model folder."""

    def __init__(self, args: TrainingArguments):
        args.validate()
        self.args = args
        self.output_dir = Path(args.output_dir)
        self.training_dir = self.output_dir / "training"
        self.checkpoint_path = self.training_dir / "checkpoint.pt"
        self.metrics_path = self.training_dir / "metrics.jsonl"

    # ------------------------------------------------------------------------------------------------ setup
    def _setup(self) -> None:
        from accelerate import Accelerator

        args = self.args
        if args.threads:
            torch.set_num_threads(args.threads)
        # Accelerate only sets up several CPU processes (gloo) when told it runs on CPU; without a GPU it does,
        # whatever --cpu says, so `torchrun --nproc_per_node 2 train.py` works as written.
        self.accelerator = Accelerator(cpu=args.cpu or not torch.cuda.is_available())
        accelerator = self.accelerator
        launched = int(os.environ.get("WORLD_SIZE", "1"))
        if launched != accelerator.num_processes:
            raise PSPInputError(
                f"launched as {launched} processes but Accelerate set up {accelerator.num_processes}; "
                "each process would train alone. Launch with torchrun or `accelerate launch --multi_gpu`"
            )
        self.is_main = accelerator.is_main_process
        self.rank = accelerator.process_index
        self.world_size = accelerator.num_processes
        self.device = accelerator.device

        has_checkpoint = self.checkpoint_path.is_file()
        if args.resume and not has_checkpoint:
            raise PSPInputError(f"--resume: no checkpoint at {self.checkpoint_path}")
        if not args.resume and has_checkpoint:
            raise PSPInputError(
                f"--output-dir {self.output_dir} already holds a training run ({self.checkpoint_path}); "
                "pass --resume to continue it or choose another --output-dir"
            )
        checkpoint = None
        if args.resume:
            checkpoint = torch.load(self.checkpoint_path, map_location="cpu", weights_only=True)
            self._check_resume_args(checkpoint)

        from .data import PairSource, PairStream

        self.kind = args.resolved_kind()
        self.distill_only = args.distill_only()
        self.source = self.stream = None
        if args.data:
            self.source = PairSource(
                args.data,
                columns=args.column_pair() or None,
                lang=args.lang,
                split=args.split,
                data_config=args.data_config,
            )
            self.stream = PairStream(
                self.source,
                batch_size=args.batch_size,
                shuffle_buffer=args.shuffle_buffer,
                seed=args.seed,
                rank=self.rank,
                world_size=self.world_size,
            )
        self.pool = None
        if args.teacher_cache:
            from .distill import TeacherPool

            self.pool = TeacherPool(args.teacher_cache, seed=args.seed, rank=self.rank, world_size=self.world_size)
        self.distilling = self.pool is not None and args.distill_weight > 0
        self.teacher_threshold = args.teacher_negative_threshold if not self.distill_only else None
        self.tokenizer = self._load_or_train_tokenizer(resuming=checkpoint is not None)
        self.backend = self.tokenizer.backend_tokenizer
        self.backend.no_padding()
        self.backend.no_truncation()

        from ..encoder import PSPEncoder

        encoder = PSPEncoder.from_tokenizer(
            self.tokenizer,
            hidden_size=args.dim,
            seed=args.seed,
            use_piece_weights=args.piece_weights != "none",
            initializer_range=args.init_std,
        )
        self.model = encoder.model
        if self.distilling:
            self.pool.tokenize(encoder)
        if checkpoint is None:
            self._initialise(encoder)
        if self.model.piece_weights is not None:
            # SIF weights are frequencies, not parameters: they stay as computed.
            self.model.piece_weights.requires_grad_(False)
        self.projection = None
        if self.distilling and self.pool.dim != args.dim:
            torch.manual_seed(args.seed + 1)
            self.projection = torch.nn.Linear(args.dim, self.pool.dim, bias=False)
        self.sparse = self._use_sparse()
        self.model.embeddings.sparse = self.sparse
        self.encoder_module = accelerator.prepare(
            TrainingEncoder(self.model, dropout=args.dropout, projection=self.projection)
        )
        self.encoder_module.train()
        self.optimizers = self._make_optimizers()
        self.miner = MegaBatchMiner(args.megabatch_size, args.megabatch_anneal, pool=args.resolved_negatives())
        self.state = TrainState(positions=[0] * self.world_size)
        if checkpoint is not None:
            self._restore(checkpoint)
        self.dev_split = DEV_SPLITS.get(args.dev) if self.is_main else None
        if self.dev_split is not None:
            from ..evaluation import sts_dev_score

            sts_dev_score(self._cpu_encoder(), split=self.dev_split, data_dir=args.data_dir)  # fail early if absent

    def _check_resume_args(self, checkpoint: dict) -> None:
        # A checkpoint written before a setting existed ran with that setting's default.
        saved = {**TrainingArguments().to_dict(), **checkpoint["args"]}
        current = self.args.to_dict()
        changed = [name for name in RESUME_FIXED if saved.get(name) != current.get(name)]
        if changed:
            details = "; ".join(
                f"--{name.replace('_', '-')} was {saved.get(name)!r}, now {current.get(name)!r}" for name in changed
            )
            raise PSPInputError(f"--resume: settings differ from the checkpointed run: {details}")
        if checkpoint["world_size"] != self.world_size:
            raise PSPInputError(
                f"--resume: the checkpoint was written by {checkpoint['world_size']} process(es), "
                f"this run has {self.world_size}; resume with the same number of processes"
            )

    def _training_texts(self, limit: int):
        """Up to `limit` sentences of the training text: the pairs' sentences, then the pool's."""
        import itertools

        texts = self.source.texts(limit) if self.source is not None else iter(())
        if self.pool is not None:
            texts = itertools.chain(texts, self.pool.sentences)
        return itertools.islice(texts, limit)

    def _initialise(self, encoder) -> None:
        """--init and --piece-weights on a fresh run (every process computes the same values)."""
        args = self.args
        if args.init == "teacher":
            from ..data.teacher_labels import default_teacher_path, load_teacher
            from ..initialization import set_table, teacher_table

            name = args.teacher_model or (self.pool.teacher if self.pool is not None else None)
            self._say(f"initialising the table from teacher {name or default_teacher_path()}")
            set_table(encoder, teacher_table(self.tokenizer, load_teacher(name), args.dim, seed=args.seed))
        elif args.init == "word-vectors":
            from ..initialization import set_table, word_vector_table

            found = word_vector_table(self.tokenizer, args.init_vectors, args.dim, seed=args.seed)
            self._say(
                f"initialising the table from {args.init_vectors}: {found.covered} of {found.vocab_size} "
                f"pieces found ({100 * found.coverage:.1f}%)"
            )
            set_table(encoder, found.table)
        if args.piece_weights == "sif":
            from ..piece_weights import piece_counts, sif_weights

            counts = piece_counts(encoder, self._training_texts(args.tokenizer_sentences))
            with torch.no_grad():
                self.model.piece_weights.copy_(torch.from_numpy(sif_weights(counts)))
            self._say(f"SIF piece weights from {int(counts.sum())} pieces of the training text")

    def _load_or_train_tokenizer(self, resuming: bool):
        from transformers import PreTrainedTokenizerFast

        args = self.args
        folder = self.training_dir / "tokenizer"
        if resuming:
            return PreTrainedTokenizerFast.from_pretrained(folder)
        if self.is_main:
            if args.tokenizer:
                tokenizer = PreTrainedTokenizerFast.from_pretrained(args.tokenizer)
                tokenizer.save_pretrained(folder)
            else:
                from ..tokenizer import train_tokenizer

                self._say(
                    f"training a {args.vocab_size}-piece tokenizer on up to {args.tokenizer_sentences} "
                    "sentences of the training text"
                )
                train_tokenizer(
                    self._training_texts(args.tokenizer_sentences),
                    vocab_size=args.vocab_size,
                    output_dir=folder,
                    lowercase=args.lowercase,
                    seed=args.seed,
                )
        self.accelerator.wait_for_everyone()
        return PreTrainedTokenizerFast.from_pretrained(folder)

    def _use_sparse(self) -> bool:
        if self.args.sparse != "auto":
            return self.args.sparse == "on"
        # NCCL cannot all-reduce sparse tensors; gloo (CPU processes) can.
        return not (self.world_size > 1 and self.device.type == "cuda")

    def _trainable(self) -> list[torch.nn.Parameter]:
        """The table first, then the other trainable parameters (piece weights if learned, the projection)."""
        table = self.model.embeddings.weight
        others = [p for p in self.model.parameters() if p is not table and p.requires_grad]
        if self.projection is not None:
            others += list(self.projection.parameters())
        return [table, *others]

    def _make_optimizers(self) -> list[torch.optim.Optimizer]:
        table, *others = self._trainable()
        if not self.sparse:
            return [torch.optim.Adam([table, *others], lr=self.args.lr)]
        # Lazy Adam: only the rows of the pieces in the batch are read and written each step.
        optimizers: list[torch.optim.Optimizer] = [LazyAdam([table], lr=self.args.lr)]
        if others:
            optimizers.append(torch.optim.Adam(others, lr=self.args.lr))
        return optimizers

    def _say(self, message: str) -> None:
        if self.is_main and not self.args.quiet:
            print(f"psp train: {message}", file=sys.stderr, flush=True)

    # ------------------------------------------------------------------------------------------ checkpoints
    def _restore(self, checkpoint: dict) -> None:
        self.model.load_state_dict(checkpoint["model"])
        if self.projection is not None:
            self.projection.load_state_dict(checkpoint["projection"])
        for optimizer, saved in zip(self.optimizers, checkpoint["optimizers"], strict=True):
            optimizer.load_state_dict(saved)
        self.state = TrainState(**checkpoint["state"])
        _set_rng_state(checkpoint["rng"])
        self._say(f"resumed at step {self.state.step} (epoch {self.state.epoch + 1}, M={self.state.megabatch_size})")

    def _gather_positions(self, position: int) -> list[int]:
        if self.world_size == 1:
            return [position]
        gathered = self.accelerator.gather(torch.tensor([position], device=self.device))
        return [int(value) for value in gathered.cpu().tolist()]

    def save_checkpoint(self) -> None:
        """Write `training/checkpoint.pt` atomically (main process only; every process must call this)."""
        state = self.state
        state.positions = self._gather_positions(state.positions[self.rank])
        if not self.is_main:
            return
        payload = {
            "format": CHECKPOINT_FORMAT,
            "model": {name: tensor.detach().cpu() for name, tensor in self.model.state_dict().items()},
            "projection": (
                None
                if self.projection is None
                else {name: tensor.detach().cpu() for name, tensor in self.projection.state_dict().items()}
            ),
            "optimizers": [optimizer.state_dict() for optimizer in self.optimizers],
            "state": state.__dict__.copy(),
            "rng": _rng_state(),
            "args": self.args.to_dict(),
            "world_size": self.world_size,
        }
        _atomic_write_bytes(self.checkpoint_path, lambda tmp: torch.save(payload, tmp))

    def _log(self, record: dict[str, Any]) -> None:
        if not self.is_main:
            return
        self.training_dir.mkdir(parents=True, exist_ok=True)
        with open(self.metrics_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    def _trim_metrics(self) -> None:
        # A killed run may have logged past its last checkpoint; those lines will be logged again.
        if not (self.is_main and self.metrics_path.is_file()):
            return
        kept = [
            line
            for line in self.metrics_path.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line).get("step", 0) <= self.state.step
        ]
        _atomic_write_bytes(
            self.metrics_path, lambda tmp: Path(tmp).write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        )

    # ----------------------------------------------------------------------------------------- evaluation
    def _cpu_encoder(self):
        from ..encoder import PSPEncoder
        from ..modeling import PSPModel

        model = self.model
        if next(model.parameters()).device.type != "cpu":
            copy = PSPModel(model.config)
            copy.load_state_dict({name: tensor.cpu() for name, tensor in model.state_dict().items()})
            model = copy
        return PSPEncoder(model, self.tokenizer)

    def evaluate(self) -> float | None:
        """Dev score of the current weights (main process; None elsewhere or without a dev set)."""
        if self.dev_split is None:
            return None
        from ..evaluation import sts_dev_score

        score = sts_dev_score(self._cpu_encoder(), split=self.dev_split, data_dir=self.args.data_dir)
        state = self.state
        state.last_score, state.last_eval_step = score, state.step
        improved = state.step > 0 and (state.best_score is None or score > state.best_score)
        if improved:
            state.best_score, state.best_step = score, state.step
            if self.args.keep == "best":
                self._save_best_weights()
        self._log(
            {
                "event": "eval",
                "step": state.step,
                "epochs_done": state.epoch,
                f"dev_{self.args.dev}_pearson": score,
                "best": state.best_score,
                "best_step": state.best_step,
            }
        )
        return score

    def _save_best_weights(self) -> None:
        from safetensors.torch import save_file

        tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in self.model.state_dict().items()}
        _atomic_write_bytes(self.training_dir / "best.safetensors", lambda tmp: save_file(tensors, tmp))

    # ---------------------------------------------------------------------------------------------- steps
    def _mine(self, megabatch: MegaBatch, teacher: torch.Tensor | None = None) -> torch.Tensor:
        with torch.no_grad():
            embeddings = self.model.embed(megabatch.flat_ids, megabatch.starts)
        return self.miner.mine(
            embeddings,
            megabatch.keys,
            first_side_only=self.args.one_sided,
            teacher=teacher,
            teacher_threshold=self.teacher_threshold,
        )

    def _next_distill_batch(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The pool stream's next batch (moving on to a new pass when one is used up)."""
        pool, state, size = self.pool, self.state, self.args.distill_batch_size
        if state.distill_position >= pool.shard_size:
            state.distill_epoch += 1
            state.distill_position = 0
        rows = pool.rows(state.distill_epoch, state.distill_position, size)
        state.distill_position += len(rows)
        state.sentences_seen += len(rows) * self.world_size
        return tuple(tensor.to(self.device) for tensor in pool.batch(rows))

    def _train_step(
        self,
        megabatch: MegaBatch | None,
        negatives: torch.Tensor | None,
        start: int,
        size: int,
        distill: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple:
        """One optimizer step on mini-batch `[start, start + size)` of `megabatch` and/or a distillation batch.

        Returns detached `(loss, grad norm, margin loss or None, distillation loss or None)`.
        """
        args = self.args
        flat_ids = offsets = None
        if megabatch is not None:
            n = megabatch.n_pairs
            first = torch.arange(start, start + size, device=self.device)
            second = first + n
            first_negative, second_negative = negatives[first], negatives[second]
            first_valid = first_negative != NO_NEGATIVE
            second_valid = second_negative != NO_NEGATIVE
            # A row without a negative gets a stand-in (masked out of the loss) so shapes stay fixed.
            first_negative = torch.where(first_valid, first_negative, second)
            second_negative = torch.where(second_valid, second_negative, first)
            parts = (
                [first, second, first_negative] if args.one_sided else [first, second, first_negative, second_negative]
            )
            flat_ids, offsets = megabatch.bags(torch.cat(parts))
        project_last = 0
        if distill is not None:
            distill_ids, distill_offsets, targets = distill
            project_last = distill_offsets.numel()
            if flat_ids is None:
                flat_ids, offsets = distill_ids, distill_offsets
            else:  # one forward for both (DDP): the pool's bags after the pairs'
                offsets = torch.cat([offsets, distill_offsets + flat_ids.numel()])
                flat_ids = torch.cat([flat_ids, distill_ids])
        module = self.encoder_module
        if args.dropout > 0:
            unwrapped = self.accelerator.unwrap_model(module)
            generator = torch.Generator(device=self.device)
            generator.manual_seed((args.seed * 1_000_003 + self.state.step * 7919 + self.rank) % 2**62)
            unwrapped.generator = generator
        output = module(flat_ids, offsets, project_last)
        embeddings, projected = output if project_last else (output, None)
        loss = margin_part = distill_part = None
        if megabatch is not None:
            embeddings = embeddings[: len(parts) * size].split(size)
            if args.one_sided:
                margin_part = margin_loss(
                    embeddings[0], embeddings[1], embeddings[2], None, args.margin, first_valid.float()
                )
            else:
                margin_part = margin_loss(
                    embeddings[0],
                    embeddings[1],
                    embeddings[2],
                    embeddings[3],
                    args.margin,
                    first_valid.float(),
                    second_valid.float(),
                )
            loss = args.margin_weight * margin_part
        if distill is not None:
            distill_part = distill_loss(projected, targets)
            loss = args.distill_weight * distill_part if loss is None else loss + args.distill_weight * distill_part
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=True)
        self.accelerator.backward(loss)
        norm = clip_grad_norm(self._trainable(), args.grad_clip)
        for optimizer in self.optimizers:
            optimizer.step()
        return (
            loss.detach(),
            norm,
            None if margin_part is None else margin_part.detach(),
            None if distill_part is None else distill_part.detach(),
        )

    def _gather_megabatch(self, batches, size: int) -> list:
        texts = []
        for _ in range(size):
            batch = next(batches, None)
            if batch is None:
                break
            texts.append(batch)
        if self.world_size > 1:
            # Every process must take the same number of steps (DDP all-reduces each backward).
            counts = self.accelerator.gather(torch.tensor([len(texts)], device=self.device))
            texts = texts[: int(counts.min())]
        return texts

    # ------------------------------------------------------------------------------------------------ run
    def train(self) -> Path:
        """Run (or continue) training, write the final model folder, push it if asked; returns the folder."""
        self._setup()
        args, state = self.args, self.state
        if self.is_main:
            self.training_dir.mkdir(parents=True, exist_ok=True)
            (self.training_dir / "args.json").write_text(json.dumps(args.to_dict(), indent=2), encoding="utf-8")
            if args.resume:
                self._trim_metrics()
        optimizer_text = "sparse lazy Adam" if self.sparse else "dense Adam"
        machine = f"{self.world_size} process(es) on {self.device.type}; vocab {len(self.tokenizer)}, dim {args.dim}"
        if self.source is not None and not self.distill_only:
            self._say(
                f"{self.kind} pairs from {self.source.description} (columns {self.source.first_column}, "
                f"{self.source.second_column}); negatives from {args.resolved_negatives()}; {optimizer_text}; "
                f"{machine}"
            )
        if self.pool is not None:
            role = (
                "distillation only"
                if self.distill_only
                else f"distillation weight {args.distill_weight}, margin weight {args.margin_weight}"
                if self.distilling
                else "negative filter only"
            )
            self._say(
                f"teacher {self.pool.teacher} (dim {self.pool.dim}) on {len(self.pool)} pool sentences: {role}"
                + (
                    f"; negatives with teacher cosine >= {self.teacher_threshold} skipped"
                    if self.teacher_threshold is not None
                    else ""
                )
                + (f"; learned projection {args.dim} -> {self.pool.dim}" if self.projection is not None else "")
                + (f"; {optimizer_text}; {machine}" if self.distill_only else "")
            )
        if state.step == 0 and not args.resume:
            score = self.evaluate()
            if score is not None:
                self._say(f"untrained model: dev {args.dev} Pearson {score:.2f}")

        from tqdm.auto import tqdm

        self.progress = tqdm(
            total=args.max_steps or None,
            initial=state.step,
            unit="step",
            dynamic_ncols=True,
            disable=args.quiet or not self.is_main,
            file=sys.stderr,
        )
        self.next_save = (state.step // args.save_every + 1) * args.save_every if args.save_every else None
        self.window = _LogWindow.new(self.device)
        self.tick = time.perf_counter()
        stop = bool(args.max_steps and state.step >= args.max_steps)
        while not stop and state.epoch < args.epochs:
            stop = self._pool_epoch() if self.distill_only else self._pairs_epoch()
            if not stop:
                state.epoch += 1
                state.positions[self.rank] = 0
                if self.distill_only:
                    state.distill_epoch, state.distill_position = state.epoch, 0
        state.train_seconds += time.perf_counter() - self.tick
        self.progress.close()
        state.finished = True
        if state.last_eval_step != state.step:
            self.evaluate()
        self.save_checkpoint()
        self._finish()
        return self.output_dir

    def _pairs_epoch(self) -> bool:
        """The rest of the current pass over the pairs; True when --max-steps stopped it."""
        state = self.state
        batches = iter(self.stream.minibatches(state.epoch, skip=state.positions[self.rank]))
        while True:
            state.megabatch_size = self.miner.size_at(state.step)
            texts = self._gather_megabatch(batches, state.megabatch_size)
            if not texts:
                return False
            first = [text for batch in texts for text in batch.first]
            second = [text for batch in texts for text in batch.second]
            megabatch = tokenize_megabatch(self.backend, first, second, [len(b) for b in texts]).to(self.device)
            teacher = self.pool.lookup([*first, *second]) if self.teacher_threshold is not None else None
            negatives = self._mine(megabatch, teacher)
            state.teacher_masked += self.miner.last_teacher_masked
            self.window.masked += self.miner.last_teacher_masked
            start = 0
            for batch in texts:
                distill = self._next_distill_batch() if self.distilling else None
                result = self._train_step(megabatch, negatives, start, len(batch), distill)
                start += len(batch)
                state.positions[self.rank] = batch.position
                pairs = len(batch) * self.world_size
                state.pairs_seen += pairs
                if self._after_step(result, pairs, 0 if distill is None else len(distill[1]) * self.world_size):
                    return True
            self._maybe_save()

    def _pool_epoch(self) -> bool:
        """The rest of the current pass over the pool (distillation only); True when --max-steps stopped it."""
        # Here the pool's pass is the run's epoch (train() keeps distill_epoch equal to epoch).
        while self.state.distill_position < self.pool.shard_size:
            distill = self._next_distill_batch()
            if self._after_step(self._train_step(None, None, 0, 0, distill), 0, len(distill[1]) * self.world_size):
                return True
            self._maybe_save()
        return False

    def _stop_clock(self) -> None:
        """Add the time since the last tick to the training time and the log window (before non-training work)."""
        now = time.perf_counter()
        self.state.train_seconds += now - self.tick
        self.window.seconds += now - self.tick
        self.tick = now

    def _maybe_save(self) -> None:
        if self.next_save is not None and self.state.step >= self.next_save:
            self._stop_clock()
            self.save_checkpoint()
            self.next_save = (self.state.step // self.args.save_every + 1) * self.args.save_every
            self.tick = time.perf_counter()

    def _after_step(self, result: tuple, pairs: int, sentences: int) -> bool:
        """Count a step, log and evaluate when due; True when --max-steps is reached."""
        args, state, window = self.args, self.state, self.window
        loss, norm, margin_part, distill_part = result
        state.step += 1
        window.loss += loss
        window.norm += norm
        if margin_part is not None:
            window.margin += margin_part
        if distill_part is not None:
            window.distill += distill_part
        window.steps += 1
        window.pairs += pairs
        window.sentences += sentences
        self.progress.update(1)
        at_limit = bool(args.max_steps and state.step >= args.max_steps)
        if state.step % args.log_every == 0 or at_limit:
            self._stop_clock()
            steps = max(window.steps, 1)
            mean_loss = float(window.loss) / steps
            record = {
                "event": "train",
                "step": state.step,
                "epoch": state.epoch + 1,
                "loss": mean_loss,
                "grad_norm": float(window.norm) / steps,
                "megabatch_size": state.megabatch_size,
                "pairs_seen": state.pairs_seen,
                "pairs_per_s": window.pairs / max(window.seconds, 1e-9),
                "peak_rss_mb": peak_rss_mb(),
            }
            if self.pool is not None:
                if not self.distill_only:
                    record["margin_loss"] = float(window.margin) / steps
                if self.distilling:
                    record.update(
                        {
                            "distill_loss": float(window.distill) / steps,
                            "sentences_seen": state.sentences_seen,
                            "distill_epoch": state.distill_epoch + 1,
                            "sentences_per_s": window.sentences / max(window.seconds, 1e-9),
                        }
                    )
                if self.teacher_threshold is not None:
                    record["teacher_masked"] = window.masked
            self._log(record)
            self.progress.set_postfix(loss=f"{mean_loss:.3f}", M=state.megabatch_size, refresh=False)
            self.window = _LogWindow.new(self.device)
        if args.eval_every and state.step % args.eval_every == 0:
            self._stop_clock()
            self.evaluate()
            self.tick = time.perf_counter()
        return at_limit

    def _finish(self) -> None:
        state, args = self.state, self.args
        if self.is_main:
            # Memory of training itself, before writing the folder (the card and the sentence-transformers files
            # import more libraries).
            training_rss = peak_rss_mb()
            self._export()
            summary = {
                "event": "end",
                "step": state.step,
                "epochs_done": state.epoch,
                "pairs_seen": state.pairs_seen,
                "train_seconds": state.train_seconds,
                "pairs_per_s": state.pairs_seen / max(state.train_seconds, 1e-9),
                "peak_rss_mb": training_rss,
                "peak_rss_mb_with_export": peak_rss_mb(),
                "best_score": state.best_score,
                "best_step": state.best_step,
                "last_score": state.last_score,
                "kept": self._kept(),
            }
            if self.pool is not None:
                summary.update(
                    {
                        "sentences_seen": state.sentences_seen,
                        "teacher_masked": state.teacher_masked,
                        "pool_sentences": len(self.pool),
                    }
                )
            self._log(summary)
            seen = (
                f"{state.sentences_seen} pool sentences"
                if self.distill_only
                else f"{state.pairs_seen} pairs"
                + (f" and {state.sentences_seen} pool sentences" if self.distilling else "")
            )
            self._say(
                f"done: {state.step} steps, {seen} in {state.train_seconds:.1f}s; model in {self.output_dir}"
                + (
                    f"; dev {args.dev} best {state.best_score:.2f} at step {state.best_step}"
                    if state.best_score is not None
                    else ""
                )
            )
        self.accelerator.wait_for_everyone()
        if args.push_to_hub and self.is_main:
            self.push_status = push_to_hub(self.output_dir, args.push_to_hub, private=args.private)
        else:
            self.push_status = 0

    def _kept(self) -> str:
        if self.args.keep == "best" and (self.training_dir / "best.safetensors").is_file():
            return f"best (step {self.state.best_step})"
        return f"last (step {self.state.step})"

    def _export(self) -> None:
        """Write the Hub-format model into --output-dir (written beside, then moved in file by file)."""
        from safetensors.torch import load_file
        from transformers.utils import logging as hf_logging

        encoder = self._cpu_encoder()
        best = self.training_dir / "best.safetensors"
        if self.args.keep == "best" and best.is_file():
            from ..encoder import PSPEncoder
            from ..modeling import PSPModel

            model = PSPModel(self.model.config)
            model.load_state_dict(load_file(best))
            encoder = PSPEncoder(model, self.tokenizer)
        state = self.state
        training_info = {
            **self.args.to_dict(),
            "steps": state.step,
            "pairs_seen": state.pairs_seen,
            "train_seconds": round(state.train_seconds, 1),
            "kept": self._kept(),
        }
        if self.pool is not None:
            training_info.update(self.pool.text_info())
            training_info["sentences_seen"] = state.sentences_seen
            if self.distill_only:
                training_info["margin_weight"] = 0.0  # what the run used: no pairs in the loss
                for name in PAIR_ONLY_SETTINGS:  # settings of the margin loss say nothing about this model
                    training_info.pop(name, None)
            if not self.distilling:
                training_info["distill_weight"] = 0.0
        if self.projection is not None:
            from safetensors.torch import save_file

            # Not part of the model (it maps into the teacher's space); kept so the teacher-space map can be
            # inspected or folded in later.
            weight = {"weight": self.projection.weight.detach().cpu().contiguous()}
            _atomic_write_bytes(self.training_dir / "projection.safetensors", lambda tmp: save_file(weight, tmp))
        language = (self.args.lang or "en") if self.kind == "bitext" else "en"
        staging = Path(tempfile.mkdtemp(prefix=".export-", dir=self.output_dir))
        bar_was_enabled = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # transformers draws a bar for writing one small file
        try:
            from ..hub.card import write_model_card

            encoder.save_pretrained(staging)
            try:
                write_model_card(staging, encoder, language=language, training_info=training_info)
            except PSPInputError as error:  # no card template for this language: the model is still usable
                self._say(f"no model card written: {error}")
            umask = os.umask(0)
            os.umask(umask)
            for path in sorted(staging.rglob("*"), key=lambda p: len(p.parts)):
                target = self.output_dir / path.relative_to(staging)
                if path.is_dir():
                    target.mkdir(exist_ok=True)
                    continue
                os.chmod(path, 0o666 & ~umask)  # temp files are private; the model is meant to be shared
                os.replace(path, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            if bar_was_enabled:
                hf_logging.enable_progress_bar()


def push_to_hub(folder: Path, repo_id: str, private: bool = False) -> int:
    """Upload the model folder (not its training/ state); on failure keep it and print how to retry."""
    from ..hub.push import PSPPushError, push_folder, retry_command

    try:
        url = push_folder(folder, repo_id, private=private)
    except PSPPushError as error:
        print(f"psp train: {error}", file=sys.stderr)
        return 1
    except Exception as error:  # anything else still leaves the folder; say how to retry
        print(
            f"psp train: push to {repo_id} failed: {error}\nThe model is kept in {folder}. Retry with: "
            f"{retry_command(folder, repo_id, private=private)}",
            file=sys.stderr,
        )
        return 1
    print(f"psp train: pushed {folder} to {url}", file=sys.stderr)
    return 0


def train(args: TrainingArguments) -> Path:
    """Train as `args` say and return the final model folder."""
    return Trainer(args).train()
