"""Before the first step: the run's tokenizer (given or trained on the training text) and the initial table."""

from __future__ import annotations

import functools
import itertools
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch

from ...errors import PSPInputError
from ..arguments.training_arguments import TrainingArguments

logger = logging.getLogger(__name__)


@functools.cache
def initial_model(id_or_path: str):
    """The model --init-from names (psp, model2vec or sentence-transformers static), loaded once per process."""
    from ...encoder import load

    return load(id_or_path)


def training_texts(source, corpus, limit: int) -> Iterator[str]:
    """Up to `limit` sentences of the training text: the pairs' sentences, then the distillation corpus's."""
    texts = source.texts(limit) if source is not None else iter(())
    if corpus is not None:
        texts = itertools.chain(texts, corpus.sentences)
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

    if args.init_from or args.init_rows_from:
        # The table's width decides the model's; the tokenizer is the one the table was trained with.
        args.dim = initial_model(args.init_from or args.init_rows_from).dim
    if resuming:
        return PreTrainedTokenizerFast.from_pretrained(folder)
    if is_main:
        if args.init_from:
            say(f"continuing from {args.init_from}: its tokenizer and {args.dim}-d table")
            initial_model(args.init_from).tokenizer.save_pretrained(folder)
        elif args.tokenizer:
            _checked_tokenizer(args.tokenizer).save_pretrained(folder)
        elif args.units != "piece":
            from .architectures import build_run_units

            say(f"building the {args.units} vocabulary (min count {args.min_count}) of the training text")
            build_run_units(args, folder, texts(args.tokenizer_sentences))
        elif (prepared := prepared_tokenizer(args.data)) is not None:
            say(f"using the {len(prepared)}-piece tokenizer that psp prepare trained with {args.data[0]}")
            prepared.save_pretrained(folder)
        else:
            from ...tokenization.pieces import train_tokenizer

            say(
                f"training a {args.vocab_size}-piece tokenizer on up to {args.tokenizer_sentences} "
                "sentences of the training text"
            )
            stream = texts(args.tokenizer_sentences)
            first = next(stream, None)
            if first is None:  # a header-only file, an empty prepared folder: say so, naming --data
                what = " ".join(args.data) if args.data else "(the distillation corpus)"
                raise PSPInputError(f"--data {what}: no sentences to train the tokenizer on (only a header, or empty)")
            trained = train_tokenizer(
                itertools.chain([first], stream),
                vocab_size=args.vocab_size,
                output_dir=folder,
                lowercase=args.lowercase,
                seed=args.seed,
            )
            from ...data.checks import vocabulary_warning

            warning = vocabulary_warning(len(trained), args.vocab_size)
            if warning:  # shown even with --quiet: the run goes on with a smaller model than asked
                logger.warning("psp train: %s", warning)
    wait_for_everyone()
    return PreTrainedTokenizerFast.from_pretrained(folder)


def check_table_fits(vocab_size: int, dim: int, device: torch.device) -> None:
    """Refuse a table that cannot fit in the device's memory before it is allocated: its float32 weights, their
    gradient and Adam's two moments (a `--dim 100000000` would otherwise end in an allocator traceback, or in the
    kernel killing the process)."""
    need = 4 * 4 * vocab_size * dim
    if device.type == "cuda":
        total, where = torch.cuda.get_device_properties(device).total_memory, f"the {device} device"
    elif device.type == "cpu":
        total, where = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "this machine"
    else:  # no portable way to ask (mps shares the machine's memory)
        return
    if need > total:
        raise PSPInputError(
            f"--dim {dim}: the {vocab_size:,} x {dim:,} table needs about {need / 2**30:,.1f} GiB with its gradient "
            f"and Adam state; {where} has {total / 2**30:,.1f} GiB in all. Give a smaller --dim"
        )


def _checked_tokenizer(name: str):
    """--tokenizer as a fast tokenizer; a corrupt or crafted tokenizer.json is one error naming the file."""
    from transformers import PreTrainedTokenizerFast

    from ...io.reading import cannot_be_hub_id
    from ...persistence.model_folder import read_tokenizer

    if Path(name).is_dir():
        read_tokenizer(Path(name))  # psp's checked reader: malformed JSON, a tokenizer that panics on text
    elif not Path(name).exists() and cannot_be_hub_id(name):  # a mistyped local path, not a Hub id to look up
        raise PSPInputError(f"--tokenizer {name}: no such folder")
    try:
        return PreTrainedTokenizerFast.from_pretrained(name)
    except Exception as error:  # noqa: BLE001 - transformers raises many kinds for a missing or damaged tokenizer
        reason = (str(error).splitlines() or [""])[0][:200]
        raise PSPInputError(f"--tokenizer {name}: cannot load a tokenizer ({type(error).__name__}: {reason})") from None


def prepared_tokenizer(data: list[str]):
    """The tokenizer `psp prepare` saved with a prepared dataset (`--data FOLDER` or a Hub dataset id), or None."""
    if len(data) != 1:
        return None
    from ...data.dataset_repo import load_prepared_tokenizer

    entry = data[0]
    if Path(entry).is_dir():
        return load_prepared_tokenizer(entry)
    if Path(entry).exists() or entry.startswith((".", "/", "~")) or entry.count("/") != 1:
        return None
    try:  # a Hub dataset id: its tokenizer/ folder if it has one
        return load_prepared_tokenizer(entry)
    except Exception:  # offline, private, or not a dataset repo: train one as for any other data
        return None


def initialise(
    encoder,
    args: TrainingArguments,
    cache_teacher: str | None,
    texts: Callable[[int], Iterator[str]],
    say: Callable[[str], None],
) -> np.ndarray | None:
    """--init, --init-from, --init-rows-from and --piece-weights on a fresh run (every process computes the same
    values); returns the rows that --init-rows-from copied (None without it)."""
    if args.init_from:
        from .initial_tables import set_table

        table = initial_model(args.init_from).weights()[0]
        set_table(encoder, table[: encoder.model.config.vocab_size])
    elif args.init == "teacher":
        from ...teachers.labels import default_teacher_path, load_teacher
        from .initial_tables import set_table, teacher_table

        name = args.teacher_model or cache_teacher
        say(f"initialising the table from teacher {name or default_teacher_path()}")
        set_table(encoder, teacher_table(encoder.tokenizer, load_teacher(name), args.dim, seed=args.seed))
    elif args.init == "word-vectors":
        from .initial_tables import set_table, word_vector_table

        found = word_vector_table(encoder.tokenizer, args.init_vectors, args.dim, seed=args.seed)
        say(
            f"initialising the table from {args.init_vectors}: {found.covered} of {found.vocab_size} "
            f"pieces found ({100 * found.coverage:.1f}%)"
        )
        set_table(encoder, found.table)
    copied = None
    if args.init_rows_from:
        copied = copy_shared_rows(encoder, initial_model(args.init_rows_from))
        say(f"copied the rows of {len(copied):,} of {len(encoder.tokenizer):,} pieces from {args.init_rows_from}")
    if args.piece_weights == "sif":
        from ...inference.piece_weights import piece_counts, sif_weights

        counts = piece_counts(encoder, texts(args.tokenizer_sentences))
        with torch.no_grad():
            encoder.model.piece_weights.copy_(torch.from_numpy(sif_weights(counts)))
        say(f"SIF piece weights from {int(counts.sum())} pieces of the training text")
    return copied


def shared_rows(encoder, source) -> tuple[np.ndarray, np.ndarray]:
    """`(rows, source_rows)`: for every piece both vocabularies hold (matched by text), its row in `encoder`'s
    table and in `source`'s."""
    source_vocab = source.tokenizer.get_vocab()
    pairs = [
        (row, source_vocab[piece]) for piece, row in encoder.tokenizer.get_vocab().items() if piece in source_vocab
    ]
    if not pairs:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    target_rows, source_rows = (np.asarray(part, dtype=np.int64) for part in zip(*pairs, strict=True))
    return target_rows, source_rows


def copy_shared_rows(encoder, source) -> np.ndarray:
    """Copy into `encoder`'s table the row of every piece `source`'s vocabulary also has; returns those rows.

    The pieces are matched by their text, so an English model lends its rows to the English pieces of a
    vocabulary shared with another language; the other rows keep their initial values.
    """
    target_rows, source_rows = shared_rows(encoder, source)
    if not len(target_rows):
        return target_rows
    table = source.weights()[0]
    with torch.no_grad():
        weight = encoder.model.embeddings.weight
        weight[torch.from_numpy(target_rows)] = torch.from_numpy(np.asarray(table[source_rows], dtype=np.float32))
    return target_rows
