"""The `psp` command line: embed, score, info, and the train/eval/prepare/push/convert-original subcommands."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .errors import PSPInputError

# Subcommands implemented elsewhere: each module has add_arguments(parser) and run(args) -> int, and keeps
# heavy imports inside functions so that `psp --help` stays fast.
DELEGATED = {
    "train": ("psp_hf.training.cli", "train a P-SP model from paraphrase pairs or bitext"),
    "eval": ("psp_hf.evaluation.cli", "evaluate a model on STS, STS17, Tatoeba and SentEval"),
    "prepare": ("psp_hf.data.cli", "prepare paraphrase or bitext training data as a datasets folder"),
    "push": ("psp_hf.hub.cli", "upload a model folder to the Hugging Face Hub"),
    "convert-original": ("psp_hf.hub.convert_original", "convert a checkpoint of the authors' P-SP code"),
    "backtranslate": ("psp_hf.backtranslation.cli", "paraphrase pairs from bitext by back-translation, filtered"),
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


def _cmd_embed(args: argparse.Namespace) -> int:
    import numpy as np

    from . import load
    from .io import atomic_path, open_npy_for_writing, read_sentences

    sentences = read_sentences(args.input, skip_bad_lines=args.skip_bad_lines)
    model = load(args.model)
    n_rows = len(sentences.rows) + len(sentences.skipped)
    with atomic_path(args.output) as tmp:
        out = open_npy_for_writing(tmp, (n_rows, model.dim))
        # Row i stays line i + 1 even when lines are skipped: skipped lines get NaN rows.
        kept = np.asarray(sentences.line_numbers, dtype=np.int64) - 1
        if sentences.skipped:
            out[np.asarray([number - 1 for number, _ in sentences.skipped])] = np.nan
            embeddings = model.encode(
                sentences.rows,
                batch_size=args.batch_size,
                show_progress_bar=_progress_wanted(args),
                normalize_embeddings=args.normalize,
            )
            out[kept] = embeddings
        else:
            model.encode(
                sentences.rows,
                batch_size=args.batch_size,
                show_progress_bar=_progress_wanted(args),
                normalize_embeddings=args.normalize,
                out=out,
            )
        out.flush()
        del out
    if sentences.skipped:
        print(sentences.skipped_summary(args.input) + " (their rows are NaN)", file=sys.stderr)
    if not args.quiet:
        print(f"wrote {args.output}: {n_rows} x {model.dim} float32 (row i = line i + 1)", file=sys.stderr)
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    from . import load
    from .io import atomic_path, read_pairs

    pairs = read_pairs(args.input, columns=args.columns, header=args.header, skip_bad_lines=args.skip_bad_lines)
    model = load(args.model)
    progress = _progress_wanted(args)
    left = model.encode([a for a, _ in pairs.rows], batch_size=args.batch_size, show_progress_bar=progress)
    right = model.encode([b for _, b in pairs.rows], batch_size=args.batch_size, show_progress_bar=progress)
    cosines = model.similarity_pairwise(left, right)
    lines = ["sentence1\tsentence2\tcosine\n"]
    lines += [f"{a}\t{b}\t{cosine:.6f}\n" for (a, b), cosine in zip(pairs.rows, cosines, strict=True)]
    if args.output is None:
        sys.stdout.writelines(lines)
    else:
        with atomic_path(args.output) as tmp:
            tmp.write_text("".join(lines), encoding="utf-8")
        if not args.quiet:
            print(f"wrote {args.output}: {len(pairs.rows)} scored pairs", file=sys.stderr)
    if pairs.skipped:
        print(pairs.skipped_summary(args.input) + " (left out of the output)", file=sys.stderr)
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    import json

    from . import load

    model = load(args.model)
    config = model.model.config
    info = {
        "model": str(args.model),
        "vocab_size": config.vocab_size,
        "tokenizer_pieces": len(model.tokenizer),
        "hidden_size": config.hidden_size,
        "pooling": config.pooling,
        "drop_unknown": config.drop_unknown,
        "use_piece_weights": config.use_piece_weights,
        "parameters": sum(p.numel() for p in model.model.parameters()),
    }
    print(json.dumps(info, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `psp` with every subcommand."""
    parser = argparse.ArgumentParser(prog="psp", description="Fast paraphrastic sentence embeddings (P-SP).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    embed = sub.add_parser("embed", help="embed a file of sentences (one a line) into a .npy array")
    embed.add_argument("input", help="text file, one sentence a line (.gz ok)")
    _add_model_argument(embed)
    embed.add_argument("-o", "--output", required=True, help="output .npy file (written atomically)")
    embed.add_argument("--batch-size", type=int, default=1024)
    embed.add_argument("--normalize", action="store_true", help="L2-normalise the embeddings")
    embed.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    _add_bad_lines_argument(embed)
    embed.set_defaults(func=_cmd_embed)

    score = sub.add_parser("score", help="cosine similarity of tab-separated sentence pairs")
    score.add_argument("input", help="TSV file with two columns: sentence1<TAB>sentence2 (.gz ok)")
    _add_model_argument(score)
    score.add_argument("-o", "--output", help="output TSV (default: stdout)")
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
    try:
        return int(runner(args) or 0)
    except (PSPInputError, FileNotFoundError) as error:
        print(f"psp: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("psp: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
