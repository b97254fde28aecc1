"""Before the first step: the run's tokenizer (given or trained on the training text) and the initial table."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from .arguments import TrainingArguments


@functools.cache
def initial_model(id_or_path: str):
    """The model --init-from names (psp, model2vec or sentence-transformers static), loaded once per process."""
    from ..static_models import load_static_model

    return load_static_model(id_or_path)


def training_texts(source, pool, limit: int) -> Iterator[str]:
    """Up to `limit` sentences of the training text: the pairs' sentences, then the pool's."""
    texts = source.texts(limit) if source is not None else iter(())
    if pool is not None:
        texts = itertools.chain(texts, pool.sentences)
    return itertools.islice(texts, limit)


def load_or_train_tokenizer(
    args: TrainingArguments,
    folder: Path,
    texts: Callable[[int], Iterator[str]],
    is_main: bool,
    wait_for_everyone: Callable[[], None],
    say: Callable[[str], None],
    resuming: bool,
):
    """The run's tokenizer, kept in `folder`: --tokenizer, or trained on the training text (main process)."""
    from transformers import PreTrainedTokenizerFast

    if args.init_from:
        # The table's width decides the model's; the tokenizer is the one the table was trained with.
        args.dim = initial_model(args.init_from).dim
    if resuming:
        return PreTrainedTokenizerFast.from_pretrained(folder)
    if is_main:
        if args.init_from:
            say(f"continuing from {args.init_from}: its tokenizer and {args.dim}-d table")
            initial_model(args.init_from).tokenizer.save_pretrained(folder)
        elif args.tokenizer:
            PreTrainedTokenizerFast.from_pretrained(args.tokenizer).save_pretrained(folder)
        elif args.units != "piece":
            from .encoder_options import build_run_units

            say(f"building the {args.units} vocabulary (min count {args.min_count}) of the training text")
            build_run_units(args, folder, texts(args.tokenizer_sentences))
        else:
            from ..tokenizer import train_tokenizer

            say(
                f"training a {args.vocab_size}-piece tokenizer on up to {args.tokenizer_sentences} "
                "sentences of the training text"
            )
            train_tokenizer(
                texts(args.tokenizer_sentences),
                vocab_size=args.vocab_size,
                output_dir=folder,
                lowercase=args.lowercase,
                seed=args.seed,
            )
    wait_for_everyone()
    return PreTrainedTokenizerFast.from_pretrained(folder)


def initialise(
    encoder,
    args: TrainingArguments,
    pool_teacher: str | None,
    texts: Callable[[int], Iterator[str]],
    say: Callable[[str], None],
) -> None:
    """--init, --init-from and --piece-weights on a fresh run (every process computes the same values)."""
    if args.init_from:
        from ..initialization import set_table

        table = initial_model(args.init_from)._weights()[0]
        set_table(encoder, table[: encoder.model.config.vocab_size])
    elif args.init == "teacher":
        from ..data.teacher_labels import default_teacher_path, load_teacher
        from ..initialization import set_table, teacher_table

        name = args.teacher_model or pool_teacher
        say(f"initialising the table from teacher {name or default_teacher_path()}")
        set_table(encoder, teacher_table(encoder.tokenizer, load_teacher(name), args.dim, seed=args.seed))
    elif args.init == "word-vectors":
        from ..initialization import set_table, word_vector_table

        found = word_vector_table(encoder.tokenizer, args.init_vectors, args.dim, seed=args.seed)
        say(
            f"initialising the table from {args.init_vectors}: {found.covered} of {found.vocab_size} "
            f"pieces found ({100 * found.coverage:.1f}%)"
        )
        set_table(encoder, found.table)
    if args.piece_weights == "sif":
        from ..piece_weights import piece_counts, sif_weights

        counts = piece_counts(encoder, texts(args.tokenizer_sentences))
        with torch.no_grad():
            encoder.model.piece_weights.copy_(torch.from_numpy(sif_weights(counts)))
        say(f"SIF piece weights from {int(counts.sum())} pieces of the training text")
