"""The training loop: one Accelerate loop for one CPU process, several CPU processes, or GPUs.

Per mega-batch: gather M mini-batches from the stream, embed them without gradients, mine hardest negatives,
then take one optimizer step per mini-batch. Checkpoints are written at mega-batch boundaries (a mega-batch is
mined with one set of weights; cutting it would change the negatives on resume), atomically, and hold
everything needed to continue exactly: weights, optimizer states, step, M, epoch, each process's position in
the stream and RNG states. Dropout masks come from a generator seeded by (seed, process, step), so a resumed
run draws the same masks without replaying the RNG.

Layout of `--output-dir`:

    config.json, model.safetensors, tokenizer*.json, *.py   the final Hub-format model
    training/checkpoint.pt                                  last checkpoint (for --resume)
    training/best.safetensors                               weights with the best dev score so far
    training/tokenizer/                                     the tokenizer the run uses
    training/args.json, training/metrics.jsonl              settings and one JSON line per log/eval
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
from .loss import LazyAdam, TrainingEncoder, clip_grad_norm, margin_loss
from .miner import NO_NEGATIVE, MegaBatch, MegaBatchMiner, tokenize_megabatch

CHECKPOINT_FORMAT = 1
# Settings that cannot change between a run and its resumption (they change the data order or the model).
RESUME_FIXED = (
    "data", "data_config", "split", "columns", "kind", "lang", "shuffle_buffer", "tokenizer", "vocab_size",
    "tokenizer_sentences", "lowercase", "dim", "batch_size", "megabatch_size", "megabatch_anneal", "negatives",
    "seed",
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
        self.source = PairSource(
            args.data, columns=args.column_pair() or None, lang=args.lang, split=args.split,
            data_config=args.data_config,
        )
        self.stream = PairStream(
            self.source, batch_size=args.batch_size, shuffle_buffer=args.shuffle_buffer, seed=args.seed,
            rank=self.rank, world_size=self.world_size,
        )
        self.tokenizer = self._load_or_train_tokenizer(resuming=checkpoint is not None)
        self.backend = self.tokenizer.backend_tokenizer
        self.backend.no_padding()
        self.backend.no_truncation()

        from ..encoder import PSPEncoder

        self.model = PSPEncoder.from_tokenizer(self.tokenizer, hidden_size=args.dim, seed=args.seed).model
        self.sparse = self._use_sparse()
        self.model.embeddings.sparse = self.sparse
        self.encoder_module = accelerator.prepare(TrainingEncoder(self.model, dropout=args.dropout))
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
        saved = checkpoint["args"]
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

                self._say(f"training a {args.vocab_size}-piece tokenizer on up to {args.tokenizer_sentences} "
                          "sentences of the data")
                train_tokenizer(
                    self.source.texts(args.tokenizer_sentences), vocab_size=args.vocab_size, output_dir=folder,
                    lowercase=args.lowercase, seed=args.seed,
                )
        self.accelerator.wait_for_everyone()
        return PreTrainedTokenizerFast.from_pretrained(folder)

    def _use_sparse(self) -> bool:
        if self.args.sparse != "auto":
            return self.args.sparse == "on"
        # NCCL cannot all-reduce sparse tensors; gloo (CPU processes) can.
        return not (self.world_size > 1 and self.device.type == "cuda")

    def _make_optimizers(self) -> list[torch.optim.Optimizer]:
        table = self.model.embeddings.weight
        others = [p for p in self.model.parameters() if p is not table and p.requires_grad]
        if not self.sparse:
            return [torch.optim.Adam(self.model.parameters(), lr=self.args.lr)]
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
            line for line in self.metrics_path.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line).get("step", 0) <= self.state.step
        ]
        _atomic_write_bytes(self.metrics_path, lambda tmp: Path(tmp).write_text(
            "".join(line + "\n" for line in kept), encoding="utf-8"))

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
        self._log({
            "event": "eval", "step": state.step, "epochs_done": state.epoch, f"dev_{self.args.dev}_pearson": score,
            "best": state.best_score, "best_step": state.best_step,
        })
        return score

    def _save_best_weights(self) -> None:
        from safetensors.torch import save_file

        tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in self.model.state_dict().items()}
        _atomic_write_bytes(self.training_dir / "best.safetensors", lambda tmp: save_file(tensors, tmp))

    # ---------------------------------------------------------------------------------------------- steps
    def _mine(self, megabatch: MegaBatch) -> torch.Tensor:
        with torch.no_grad():
            embeddings = self.model.embed(megabatch.flat_ids, megabatch.starts)
        return self.miner.mine(embeddings, megabatch.keys, first_side_only=self.args.one_sided)

    def _train_step(self, megabatch: MegaBatch, negatives: torch.Tensor, start: int, size: int) -> tuple:
        n = megabatch.n_pairs
        first = torch.arange(start, start + size, device=self.device)
        second = first + n
        first_negative, second_negative = negatives[first], negatives[second]
        first_valid = first_negative != NO_NEGATIVE
        second_valid = second_negative != NO_NEGATIVE
        # A row without a negative gets a stand-in (masked out of the loss) so shapes stay fixed.
        first_negative = torch.where(first_valid, first_negative, second)
        second_negative = torch.where(second_valid, second_negative, first)
        parts = [first, second, first_negative] if self.args.one_sided else [
            first, second, first_negative, second_negative]
        flat_ids, offsets = megabatch.bags(torch.cat(parts))
        module = self.encoder_module
        if self.args.dropout > 0:
            unwrapped = self.accelerator.unwrap_model(module)
            generator = torch.Generator(device=self.device)
            generator.manual_seed((self.args.seed * 1_000_003 + self.state.step * 7919 + self.rank) % 2**62)
            unwrapped.generator = generator
        embeddings = module(flat_ids, offsets).split(size)
        if self.args.one_sided:
            loss = margin_loss(embeddings[0], embeddings[1], embeddings[2], None, self.args.margin,
                               first_valid.float())
        else:
            loss = margin_loss(embeddings[0], embeddings[1], embeddings[2], embeddings[3], self.args.margin,
                               first_valid.float(), second_valid.float())
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=True)
        self.accelerator.backward(loss)
        norm = clip_grad_norm(self.model.parameters(), self.args.grad_clip)
        for optimizer in self.optimizers:
            optimizer.step()
        return loss.detach(), norm

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
        self._say(
            f"{self.kind} pairs from {self.source.description} (columns {self.source.first_column}, "
            f"{self.source.second_column}); negatives from {args.resolved_negatives()}; "
            f"{'sparse lazy Adam' if self.sparse else 'dense Adam'}; {self.world_size} process(es) on "
            f"{self.device.type}; vocab {len(self.tokenizer)}, dim {args.dim}"
        )
        if state.step == 0 and not args.resume:
            score = self.evaluate()
            if score is not None:
                self._say(f"untrained model: dev {args.dev} Pearson {score:.2f}")

        from tqdm.auto import tqdm

        progress = tqdm(
            total=args.max_steps or None, initial=state.step, unit="step", dynamic_ncols=True,
            disable=args.quiet or not self.is_main, file=sys.stderr,
        )
        next_save = (state.step // args.save_every + 1) * args.save_every if args.save_every else None
        log_loss = torch.zeros((), device=self.device)
        log_norm = torch.zeros((), device=self.device)
        log_steps, log_pairs, log_seconds = 0, 0, 0.0
        tick = time.perf_counter()
        stop = bool(args.max_steps and state.step >= args.max_steps)
        while not stop and state.epoch < args.epochs:
            batches = iter(self.stream.minibatches(state.epoch, skip=state.positions[self.rank]))
            while not stop:
                state.megabatch_size = self.miner.size_at(state.step)
                texts = self._gather_megabatch(batches, state.megabatch_size)
                if not texts:
                    break
                first = [text for batch in texts for text in batch.first]
                second = [text for batch in texts for text in batch.second]
                megabatch = tokenize_megabatch(self.backend, first, second, [len(b) for b in texts]).to(self.device)
                negatives = self._mine(megabatch)
                start = 0
                for batch in texts:
                    loss, norm = self._train_step(megabatch, negatives, start, len(batch))
                    start += len(batch)
                    state.step += 1
                    state.positions[self.rank] = batch.position
                    pairs = len(batch) * self.world_size
                    state.pairs_seen += pairs
                    log_loss += loss
                    log_norm += norm
                    log_steps += 1
                    log_pairs += pairs
                    progress.update(1)
                    if state.step % args.log_every == 0 or (args.max_steps and state.step >= args.max_steps):
                        now = time.perf_counter()
                        log_seconds += now - tick
                        state.train_seconds += now - tick
                        tick = now
                        mean_loss = float(log_loss) / max(log_steps, 1)
                        self._log({
                            "event": "train", "step": state.step, "epoch": state.epoch + 1, "loss": mean_loss,
                            "grad_norm": float(log_norm) / max(log_steps, 1),
                            "megabatch_size": state.megabatch_size, "pairs_seen": state.pairs_seen,
                            "pairs_per_s": log_pairs / max(log_seconds, 1e-9), "peak_rss_mb": peak_rss_mb(),
                        })
                        progress.set_postfix(loss=f"{mean_loss:.3f}", M=state.megabatch_size, refresh=False)
                        log_loss.zero_()
                        log_norm.zero_()
                        log_steps, log_pairs, log_seconds = 0, 0, 0.0
                    if args.eval_every and state.step % args.eval_every == 0:
                        state.train_seconds += time.perf_counter() - tick
                        log_seconds += time.perf_counter() - tick
                        self.evaluate()
                        tick = time.perf_counter()
                    if args.max_steps and state.step >= args.max_steps:
                        stop = True
                        break
                if next_save is not None and state.step >= next_save and not stop:
                    elapsed = time.perf_counter() - tick
                    state.train_seconds += elapsed
                    log_seconds += elapsed
                    self.save_checkpoint()
                    next_save = (state.step // args.save_every + 1) * args.save_every
                    tick = time.perf_counter()
            if not stop:
                state.epoch += 1
                state.positions[self.rank] = 0
        state.train_seconds += time.perf_counter() - tick
        progress.close()
        state.finished = True
        if state.last_eval_step != state.step:
            self.evaluate()
        self.save_checkpoint()
        self._finish()
        return self.output_dir

    def _finish(self) -> None:
        state, args = self.state, self.args
        if self.is_main:
            # Memory of training itself, before writing the folder (the card and the sentence-transformers files
            # import more libraries).
            training_rss = peak_rss_mb()
            self._export()
            summary = {
                "event": "end", "step": state.step, "epochs_done": state.epoch, "pairs_seen": state.pairs_seen,
                "train_seconds": state.train_seconds,
                "pairs_per_s": state.pairs_seen / max(state.train_seconds, 1e-9),
                "peak_rss_mb": training_rss, "peak_rss_mb_with_export": peak_rss_mb(),
                "best_score": state.best_score, "best_step": state.best_step,
                "last_score": state.last_score, "kept": self._kept(),
            }
            self._log(summary)
            self._say(
                f"done: {state.step} steps, {state.pairs_seen} pairs in {state.train_seconds:.1f}s "
                f"({summary['pairs_per_s']:.0f} pairs/s); model in {self.output_dir}"
                + (f"; dev {args.dev} best {state.best_score:.2f} at step {state.best_step}"
                   if state.best_score is not None else "")
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
            **self.args.to_dict(), "steps": state.step, "pairs_seen": state.pairs_seen,
            "train_seconds": round(state.train_seconds, 1), "kept": self._kept(),
        }
        language = (self.args.lang or "en") if self.kind == "bitext" else "en"
        staging = Path(tempfile.mkdtemp(prefix=".export-", dir=self.output_dir))
        bar_was_enabled = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # transformers draws a bar for writing one small file
        try:
            try:
                encoder.save_pretrained(staging, language=language, training_info=training_info)
            except PSPInputError as error:  # no card template for this language: the model is still usable
                self._say(f"no model card written: {error}")
                encoder.save_pretrained(staging)
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
        print(f"psp train: push to {repo_id} failed: {error}\nThe model is kept in {folder}. Retry with: "
              f"{retry_command(folder, repo_id, private=private)}", file=sys.stderr)
        return 1
    print(f"psp train: pushed {folder} to {url}", file=sys.stderr)
    return 0


def train(args: TrainingArguments) -> Path:
    """Train as `args` say and return the final model folder."""
    return Trainer(args).train()
