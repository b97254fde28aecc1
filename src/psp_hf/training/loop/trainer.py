"""The training loop: one Accelerate loop for one CPU process, several CPU processes, or GPUs.

Per mega-batch: gather M mini-batches from the stream, embed them without gradients, mine hardest negatives,
then take one optimizer step per mini-batch (margin loss, plus the distillation loss on a batch of the
distillation corpus when a teacher cache is given). Checkpoints are written at mega-batch boundaries (a mega-batch
is mined with one set of weights; cutting it would change the negatives on resume). Dropout masks come from a
generator seeded by (seed, process, step), so a resumed run draws the same masks without replaying the RNG.

Layout of `-o/--output`:

    config.json, model.safetensors, tokenizer*.json, *.py   the final Hub-format model (and README.md, its card)
    training/checkpoint.json, training/checkpoint-N/        the last checkpoint (for --resume; see checkpoint.py)
    training/best.safetensors                               weights with the best dev score so far
    training/tokenizer/                                     the tokenizer the run uses
    training/args.json, training/metrics.jsonl              settings and one JSON line per log/eval
    training/metrics.png                                    loss, dev score and mega-batch size over steps
    training/runs/                                          TensorBoard events (--report-to tensorboard)
    training/projection.safetensors                         W (distillation with --dim != the teacher's dim)
"""

from __future__ import annotations

import errno
import functools
import json
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ...errors import PSPInputError
from ...io.writing import atomic_path, output_folder
from ..arguments.training_arguments import TrainingArguments
from ..losses.distillation import bitext_distill_loss, distill_loss
from ..losses.margin import margin_loss
from ..losses.matryoshka import nested_distill_loss, nested_loss
from ..reporting.metrics_log import LogWindow, peak_rss_mb
from .checkpoint import TrainState
from .finite import check_run_finite
from .miner import NO_NEGATIVE, MegaBatch, tokenize_megabatch
from .optimizer import clip_grad_norm
from .run_end import finish_run
from .run_setup import RunSetup
from .stopping import TrainingStopped, in_main_thread, stop_on_sigterm

if TYPE_CHECKING:
    from tqdm.auto import tqdm

WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


class Trainer(RunSetup):
    """Trains a P-SP model as `TrainingArguments` say; `train()` returns the final model folder.

    `Trainer(args, data=...)` takes the pairs as a `datasets` object or a list of pairs instead of `args.data`.
    What the run holds is declared in `RunSetup.__init__`; the loop's own bookkeeping here.
    """

    def __init__(self, args: TrainingArguments, data=None):
        super().__init__(args, data=data)
        self.progress: tqdm | None = None  # the progress bar
        self.next_save: int | None = None  # the step of the next checkpoint (--save-every)
        self.window: LogWindow | None = None  # the sums since the last log line
        self.tick = 0.0  # when training time last started counting (time.perf_counter)

    def train(self) -> Path:
        """Run (or continue) training, write the final model folder, push it if asked; returns the folder."""
        handler = functools.partial(stop_on_sigterm, checkpoints=self.checkpoints)
        previous = signal.signal(signal.SIGTERM, handler) if in_main_thread() else None
        try:
            with output_folder(self.output_dir):  # every output of the run stays inside it
                return self._train()
        except OSError as error:
            if error.errno not in WRITE_ERRORS:
                raise
            # A full disk or a folder made read-only mid-run: what was written before stays as it was.
            where = error.filename or self.output_dir
            raise PSPInputError(f"cannot write {where}: {error.strerror}") from None
        finally:
            sink = getattr(self.metrics, "sink", None)
            if sink is not None:
                sink.close()
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    def _train(self) -> Path:
        self._setup()
        args, state = self.args, self.state
        if self.is_main:
            self.training_dir.mkdir(parents=True, exist_ok=True)
            # Atomically: a symlink planted at args.json is replaced, never followed to overwrite its target.
            with atomic_path(self.training_dir / "args.json") as temporary:
                temporary.write_text(json.dumps(args.to_dict(), indent=2), encoding="utf-8")
        self._describe()
        if state.step == 0 and not args.resume:
            score = self.evaluate()
            if score is not None:
                self.say(f"untrained model: {self.dev_metric} {score:.2f}")

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
        self.window = LogWindow.new(self.device)
        self.tick = time.perf_counter()
        stop = bool(args.max_steps and state.step >= args.max_steps)
        while not stop and state.epoch < args.epochs:
            stop = self._corpus_epoch() if self.distill_only else self._pairs_epoch()
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
        finish_run(self)
        if self.is_main:
            from ..reporting.plot import plot_metrics

            plot_metrics(self.metrics.path, self.training_dir / "metrics.png", self.say)
        return self.output_dir

    # ------------------------------------------------------------------------------------------ epochs
    def _pairs_epoch(self) -> bool:
        """The rest of the current pass over the pairs; True when --max-steps stopped it."""
        state = self.state
        batches = iter(self.stream.minibatches(state.epoch, skip=state.positions[self.rank]))
        while True:
            state.megabatch_size = self.miner.size_at(state.step)
            texts = self._gather_megabatch(batches, state.megabatch_size)
            if not texts:
                self._report_bad_lines()
                return False
            first = [text for batch in texts for text in batch.first]
            second = [text for batch in texts for text in batch.second]
            megabatch = tokenize_megabatch(self.backend, first, second, [len(b) for b in texts]).to(self.device)
            teacher = self.corpus.lookup([*first, *second]) if self.teacher_threshold is not None else None
            negatives = self._mine(megabatch, teacher)
            state.teacher_masked += self.miner.last_teacher_masked
            self.window.masked += self.miner.last_teacher_masked
            start = 0
            for batch in texts:
                distill = self._next_distill_batch() if self.distilling else None
                mono = None
                if self.bitext_teacher is not None:  # multilingual distillation: the pair's teacher vectors
                    targets = self.bitext_teacher.targets(batch.first, batch.second, self.bitext_targets)
                    mono, distill = distill, (None, None, targets.to(self.device))  # the corpus is --mono-data's
                result = self._train_step(megabatch, negatives, start, len(batch), distill, mono)
                start += len(batch)
                state.positions[self.rank] = batch.position
                pairs = len(batch) * self.world_size
                state.pairs_seen += pairs
                pooled = mono if mono is not None else distill
                if self._after_step(
                    result, pairs, 0 if pooled is None or pooled[1] is None else len(pooled[1]) * self.world_size
                ):
                    return True
            self._maybe_save()

    def _corpus_epoch(self) -> bool:
        """The rest of the current pass over the corpus (distillation only); True when --max-steps stopped it."""
        # Here the corpus's pass is the run's epoch (train() keeps distill_epoch equal to epoch).
        while self.state.distill_position < self.corpus.shard_size:
            distill = self._next_distill_batch()
            if self._after_step(self._train_step(None, None, 0, 0, distill), 0, len(distill[1]) * self.world_size):
                return True
            self._maybe_save()
        return False

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

    def _report_bad_lines(self) -> None:
        if self.stream.bad_lines and self.is_main:
            self.say(f"skipped {self.stream.bad_lines} bad line(s) of --data in this pass (--skip-bad-lines)")
            self.metrics.append({"event": "bad_lines", "step": self.state.step, "count": self.stream.bad_lines})
        self.stream.bad_lines = 0

    # -------------------------------------------------------------------------------------------- steps
    def _mine(self, megabatch: MegaBatch, teacher: torch.Tensor | None = None) -> torch.Tensor:
        with torch.no_grad():
            embeddings = self.model.embed(megabatch.flat_ids, megabatch.starts)
        self.miner.reseed(self.args.seed, self.state.step)
        return self.miner.mine(
            embeddings,
            megabatch.keys,
            first_side_only=self.args.one_sided,
            teacher=teacher,
            teacher_threshold=self.teacher_threshold,
        )

    def _next_distill_batch(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The corpus stream's next batch (moving on to a new pass when one is used up)."""
        corpus, state = self.corpus, self.state
        size = self.args.mono_batch_size if self.mono_sentences else self.args.distill_batch_size
        if state.distill_position >= corpus.shard_size:
            state.distill_epoch += 1
            state.distill_position = 0
        rows = corpus.rows(state.distill_epoch, state.distill_position, size)
        state.distill_position += len(rows)
        state.sentences_seen += len(rows) * self.world_size
        return tuple(tensor.to(self.device) for tensor in corpus.batch(rows))

    def _train_step(
        self,
        megabatch: MegaBatch | None,
        negatives: torch.Tensor | None,
        start: int,
        size: int,
        distill: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
        mono: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple:
        """One optimizer step on mini-batch `[start, start + size)` of `megabatch` and/or a distillation batch
        (`mono`: a batch of --mono-data beside the pairs of multilingual distillation).

        Returns detached `(loss, grad norm, margin loss or None, distillation loss or None, mono loss or None)`.
        """
        args = self.args
        flat_ids = offsets = None
        if megabatch is not None:
            first = torch.arange(start, start + size, device=self.device)
            second = first + megabatch.n_pairs
            first_negative, second_negative = negatives[first], negatives[second]
            first_valid = first_negative != NO_NEGATIVE
            second_valid = second_negative != NO_NEGATIVE
            # A row without a negative gets a stand-in (masked out of the loss) so shapes stay fixed.
            first_negative = torch.where(first_valid, first_negative, second)
            second_negative = torch.where(second_valid, second_negative, first)
            parts = [first, second, first_negative] + ([] if args.one_sided else [second_negative])
            if self.bitext_teacher is not None:  # the pair's two sides last: they are mapped into the teacher's space
                parts = parts[2:] + parts[:2]
            flat_ids, offsets = megabatch.bags(torch.cat(parts))
        project_last = 0
        if distill is not None and distill[0] is None:
            project_last, targets = 2 * size, distill[2]
            if mono is not None:  # its bags after the pair's two sides: all of them are mapped into the teacher's space
                offsets = torch.cat([offsets, mono[1] + flat_ids.numel()])
                flat_ids = torch.cat([flat_ids, mono[0]])
                project_last += mono[1].numel()
        elif distill is not None:
            distill_ids, distill_offsets, targets = distill
            project_last = distill_offsets.numel()
            if flat_ids is None:
                flat_ids, offsets = distill_ids, distill_offsets
            else:  # one forward for both (DDP): the corpus's bags after the pairs'
                offsets = torch.cat([offsets, distill_offsets + flat_ids.numel()])
                flat_ids = torch.cat([flat_ids, distill_ids])
        if args.dropout > 0 or args.scramble_rate > 0:
            generator = torch.Generator(device=self.device)
            generator.manual_seed((args.seed * 1_000_003 + self.state.step * 7919 + self.rank) % 2**62)
            self.accelerator.unwrap_model(self.encoder_module).generator = generator
        output = self.encoder_module(flat_ids, offsets, project_last)
        embeddings, projected = output if project_last else (output, None)
        loss = margin_part = distill_part = mono_part = None
        if megabatch is not None:
            sides = list(embeddings[: len(parts) * size].split(size))
            if self.bitext_teacher is not None:
                sides = sides[-2:] + sides[:-2]
            margin_part = nested_loss(
                margin_loss,
                sides if not args.one_sided else [*sides, None],
                self.nested,
                args.margin,
                first_valid.float(),
                None if args.one_sided else second_valid.float(),
            )
            loss = args.margin_weight * margin_part
        if distill is not None:
            paired = distill[0] is None
            objective = bitext_distill_loss if paired else distill_loss
            rows = slice(0, 2 * size) if paired else slice(None)
            distill_part = self._distill_part(objective, projected, targets, rows)
            loss = args.distill_weight * distill_part if loss is None else loss + args.distill_weight * distill_part
            if mono is not None:
                mono_part = self._distill_part(distill_loss, projected, mono[2], slice(2 * size, None))
                loss = loss + args.mono_weight * mono_part
        if args.init_l2 > 0:  # lambda_w (encoder_options.py)
            loss = loss + args.init_l2 * self.accelerator.unwrap_model(self.encoder_module).l2_penalty
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=True)
        self.accelerator.backward(loss)
        norm = clip_grad_norm(self.trainable(), args.grad_clip)
        for optimizer in self.optimizers:
            optimizer.step()
        return (
            loss.detach(),
            norm,
            None if margin_part is None else margin_part.detach(),
            None if distill_part is None else distill_part.detach(),
            None if mono_part is None else mono_part.detach(),
        )

    def _distill_part(self, objective, projected, targets: torch.Tensor, rows: slice) -> torch.Tensor:
        """`objective` on the mapped rows `rows` (Matryoshka: one mapped tensor per prefix length, weighted)."""
        if isinstance(projected, list):
            return nested_distill_loss(objective, [part[rows] for part in projected], targets, self.nested)
        return objective(projected[rows], targets)

    def _after_step(self, result: tuple, pairs: int, sentences: int) -> bool:
        """Count a step, log and evaluate when due; True when --max-steps is reached."""
        args, state, window = self.args, self.state, self.window
        loss, norm, margin_part, distill_part, mono_part = result
        state.step += 1
        window.loss += loss
        window.norm += norm
        if margin_part is not None:
            window.margin += margin_part
        if distill_part is not None:
            window.distill += distill_part
        if mono_part is not None:
            window.mono += mono_part
        window.steps += 1
        window.pairs += pairs
        window.sentences += sentences
        self.progress.update(1)
        at_limit = bool(args.max_steps and state.step >= args.max_steps)
        if args.max_minutes and state.train_seconds + time.perf_counter() - self.tick >= 60 * args.max_minutes:
            at_limit = True  # the time budget (not reproducible step for step, unlike --max-steps)
        if state.step % args.log_every == 0 or at_limit:
            self._stop_clock()
            self._log_window()
        if args.eval_every and state.step % args.eval_every == 0:
            self._stop_clock()
            self.evaluate()
            self.tick = time.perf_counter()
        return at_limit

    def _log_window(self) -> None:
        state, window = self.state, self.window
        steps = max(window.steps, 1)
        mean_loss = float(window.loss) / steps
        check_run_finite(self, mean_loss, float(window.norm))
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
        if self.bitext_teacher is not None:
            record.update(margin_loss=float(window.margin) / steps, distill_loss=float(window.distill) / steps)
            if self.distilling:  # the --mono-data stream
                record.update(mono_loss=float(window.mono) / steps, sentences_seen=state.sentences_seen)
        if self.corpus is not None and self.bitext_teacher is None:
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
        self.metrics.append(record)
        self.progress.set_postfix(loss=f"{mean_loss:.3f}", M=state.megabatch_size, refresh=False)
        self.window = LogWindow.new(self.device)

    def _stop_clock(self) -> None:
        """Add the time since the last tick to the training time and the log window (before non-training work)."""
        now = time.perf_counter()
        self.state.train_seconds += now - self.tick
        self.window.seconds += now - self.tick
        self.tick = now

    # ------------------------------------------------------------------------------ evaluate and save
    def evaluate(self) -> float | None:
        """Dev score of the current weights (main process; None elsewhere or without a dev set)."""
        score = self._dev_score()
        if score is None:
            return None
        from .run_end import save_weights

        state = self.state
        state.last_score, state.last_eval_step = score, state.step
        if state.step > 0 and (state.best_score is None or score > state.best_score):
            state.best_score, state.best_step = score, state.step
            if self.args.keep == "best":
                save_weights(self.model, self.training_dir / "best.safetensors")
        self.metrics.append(
            {
                "event": "eval",
                "step": state.step,
                "epochs_done": state.epoch,
                self.dev_metric: score,
                "best": state.best_score,
                "best_step": state.best_step,
                # Each --dev-bitext file's accuracy, in their order, when the score is the mean of several.
                **({"dev_bitext_scores": self.dev_scores} if len(self.dev_scores) > 1 else {}),
            }
        )
        return score

    def _maybe_save(self) -> None:
        if self.next_save is not None and self.state.step >= self.next_save:
            self._stop_clock()
            self.save_checkpoint()
            self.next_save = (self.state.step // self.args.save_every + 1) * self.args.save_every
            self.tick = time.perf_counter()

    def save_checkpoint(self) -> None:
        """Save the run's state (every process must call this; each writes its RNG state)."""
        check_run_finite(self)  # a diverged run keeps its last good checkpoint
        state = self.state
        state.positions = self._gather_positions(state.positions[self.rank])
        run_info = {"args": self.args.to_dict(), "world_size": self.world_size}
        self.checkpoints.save(self.accelerator, self.is_main, run_info, state, state.step, state.finished)

    def _gather_positions(self, position: int) -> list[int]:
        if self.world_size == 1:
            return [position]
        gathered = self.accelerator.gather(torch.tensor([position], device=self.device))
        return [int(value) for value in gathered.cpu().tolist()]


def train(args: TrainingArguments, data=None) -> Path:
    """Train as `args` say and return the final model folder.

    `data` may hold the training pairs instead of `args.data`: a `datasets.Dataset`, `IterableDataset` or
    `DatasetDict` (its `args.split`), or a list of `(sentence, paraphrase)` pairs. It is streamed like files are.
    """
    return Trainer(args, data=data).train()


__all__ = ["TrainState", "Trainer", "TrainingArguments", "TrainingStopped", "train"]
