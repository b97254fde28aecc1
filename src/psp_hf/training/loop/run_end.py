"""The end of a run: the Hub-format model folder (weights, tokenizer, remote code, card) and the optional push."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import PSPInputError, os_error_of
from ...io.writing import atomic_path, check_inside
from ..arguments.training_arguments import PAIRS_ONLY
from ..reporting.metrics_log import peak_rss_mb
from .checkpoint import EXPORT_PREFIX

logger = logging.getLogger(__name__)


def encoder_with_weights(encoder, weights: Path):
    """A copy of `encoder` with the weights of a safetensors file (the best dev checkpoint)."""
    from safetensors.torch import load_file

    from ...encoder import PSPEncoder
    from ...modeling import PSPModel

    model = PSPModel(encoder.model.config)
    model.load_state_dict(load_file(weights))
    return PSPEncoder(model, encoder.tokenizer)


def save_weights(module, path: Path) -> None:
    """Write a module's weights as safetensors, atomically."""
    from safetensors.torch import save_file

    tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in module.state_dict().items()}
    with atomic_path(path) as temporary:
        save_file(tensors, temporary)


def write_model_folder(
    encoder,
    output_dir: Path,
    language: str,
    training_info: dict[str, Any],
    say: Callable[[str], None],
) -> None:
    """Write the model folder into `output_dir`: staged in `.export-*` beside it, then moved in file by file.

    The card is written after `save_pretrained` (which writes none); a language without a card template leaves
    a usable model without a card.
    """
    from transformers.utils import logging as hf_logging

    from ...hub.card import write_model_card

    staging = Path(tempfile.mkdtemp(prefix=EXPORT_PREFIX, dir=output_dir))
    bar_was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # transformers draws a bar for writing one small file
    try:
        encoder.save_pretrained(staging)
        try:
            write_model_card(staging, encoder, language=language, training_info=training_info)
        except PSPInputError as error:  # no card template for this language: the model is still usable
            say(f"no model card written: {error}")
        umask = os.umask(0)
        os.umask(umask)
        for path in sorted(staging.rglob("*"), key=lambda p: len(p.parts)):
            target = output_dir / path.relative_to(staging)
            check_inside(target, output_dir)  # a folder linked out of the run would take the files elsewhere
            if path.is_dir():
                target.mkdir(exist_ok=True)
                continue
            os.chmod(path, 0o666 & ~umask)  # temp files are private; the model is meant to be shared
            os.replace(path, target)
    except Exception as error:  # a full disk: an OSError, or safetensors' SafetensorError naming the errno
        failure = os_error_of(error)
        if failure is None:
            raise
        raise PSPInputError(
            f"{output_dir}: cannot write the model folder ({failure.strerror or failure}); the trained weights stay "
            "in the last checkpoint under "
            f"{output_dir / 'training'}; free some space and rerun the command with --resume to write the folder"
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if bar_was_enabled:
            hf_logging.enable_progress_bar()


def push_to_hub(folder: Path, repo_id: str, private: bool = False) -> int:
    """Upload the model folder (not its training/ state); on failure keep it and print how to retry."""
    from ...hub.push import PSPPushError, push_folder, retry_command

    try:
        url = push_folder(folder, repo_id, private=private)
    except PSPPushError as error:
        logger.error("psp train: %s", error)
        return 1
    except Exception as error:  # anything else still leaves the folder; say how to retry
        logger.error(
            "psp train: push to %s failed: %s\nThe model is kept in %s. Retry with: %s",
            repo_id,
            error,
            folder,
            retry_command(folder, repo_id, private=private),
        )
        return 1
    logger.info("psp train: pushed %s to %s", folder, url)
    return 0


# Settings that only matter to the margin loss on pairs (left off the card of a distillation-only model): the fields
# whose metadata says pairs_only, and the pair count.
PAIR_ONLY_SETTINGS = (*PAIRS_ONLY, "pairs_seen")


def finish_run(trainer) -> None:
    """After the last checkpoint: export the model folder, log the summary, push if asked (main process)."""
    state, args = trainer.state, trainer.args
    if trainer.is_main:
        # Memory of training itself, before writing the folder (the card and the sentence-transformers files
        # import more libraries).
        training_rss = peak_rss_mb()
        best = trainer.training_dir / "best.safetensors"
        kept_best = args.keep == "best" and best.is_file()
        kept = f"best (step {state.best_step})" if kept_best else f"last (step {state.step})"
        encoder = trainer.cpu_encoder()
        if kept_best:
            encoder = encoder_with_weights(encoder, best)
        if trainer.projection is not None:
            # Not part of the model (it maps into the teacher's space); kept so the teacher-space map can be
            # inspected or folded in later.
            save_weights(trainer.projection, trainer.training_dir / "projection.safetensors")
        language = (args.lang or "en") if trainer.kind == "bitext" else "en"
        write_model_folder(encoder, trainer.output_dir, language, _training_info(trainer, kept), trainer.say)
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
            "kept": kept,
        }
        if trainer.corpus is not None:
            summary.update(
                {
                    "sentences_seen": state.sentences_seen,
                    "teacher_masked": state.teacher_masked,
                    "corpus_sentences": len(trainer.corpus),
                }
            )
        trainer.metrics.append(summary)
        seen = (
            f"{state.sentences_seen} corpus sentences"
            if trainer.distill_only
            else f"{state.pairs_seen} pairs"
            + (f" and {state.sentences_seen} corpus sentences" if trainer.distilling else "")
        )
        best_text = ""
        if state.best_score is not None:
            best_text = f"; dev {args.resolved_dev()} best {state.best_score:.2f} at step {state.best_step}"
        trainer.say(
            f"done: {state.step} steps, {seen} in {state.train_seconds:.1f}s; model in {trainer.output_dir}{best_text}"
        )
    trainer.accelerator.wait_for_everyone()
    if args.push_to_hub and trainer.is_main:
        trainer.push_status = push_to_hub(trainer.output_dir, args.push_to_hub, private=args.private)


def _training_info(trainer, kept: str) -> dict[str, Any]:
    """What the card says about the run."""
    state = trainer.state
    info = {
        **trainer.args.to_dict(),
        "steps": state.step,
        "pairs_seen": state.pairs_seen,
        "train_seconds": round(state.train_seconds, 1),
        "kept": kept,
    }
    if getattr(trainer, "bitext_teacher", None) is not None:
        info.update(trainer.bitext_teacher.text_info())
    if trainer.corpus is not None:
        info.update(trainer.corpus.text_info())
        info["sentences_seen"] = state.sentences_seen
        if trainer.distill_only:
            info["margin_weight"] = 0.0  # what the run used: no pairs in the loss
            for name in PAIR_ONLY_SETTINGS:  # settings of the margin loss say nothing about this model
                info.pop(name, None)
        if not trainer.distilling:
            info["distill_weight"] = 0.0
    from ..data.multilingual import card_settings

    return card_settings(info)
