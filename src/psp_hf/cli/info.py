"""`psp info`: a model's configuration as JSON."""

from __future__ import annotations

import argparse

from ..logs import write_result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `psp info`."""
    parser.add_argument("model", help="model folder or Hub repo id")


def run(args: argparse.Namespace) -> int:
    """Print the model's settings and size."""
    import json

    from ..encoder import load

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
    write_result(json.dumps(info, indent=2))
    return 0
