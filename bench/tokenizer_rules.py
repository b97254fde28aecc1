"""What the Arabic article rules cost the tokenizer: sentences/s of `Tokenizer.encode_batch` with and without them.

    python bench/tokenizer_rules.py --model MODEL --text FILE [--text FILE ...] [--sentences 100000]

The model's `tokenizer.json` is timed as it is and as a copy that has the rules added (or taken out, when the model
has them already), over the first N lines of each text file (`.gz` fine; a short file is repeated up to N). The
tokenizer alone is timed, without psp's word cache, because that is the path a sentence outside plain ASCII takes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path


def _rate(tokenizer, sentences: list[str], passes: int) -> float:
    best = float("inf")
    for _ in range(passes):
        started = time.perf_counter()
        tokenizer.encode_batch(sentences, add_special_tokens=False)
        best = min(best, time.perf_counter() - started)
    return len(sentences) / best


def _variants(path: Path):
    """(without the rules, with them) for the tokenizer.json at `path`."""
    from tokenizers import Tokenizer

    from psp_hf.tokenization.pieces import ARTICLE_SPLITS

    config = json.loads(path.read_text(encoding="utf-8"))
    steps = config["normalizer"]["normalizers"]
    rules = [{"type": "Replace", "pattern": {"Regex": pattern}, "content": text} for pattern, text in ARTICLE_SPLITS]
    without = [step for step in steps if step not in rules]
    marks = next(k for k, step in enumerate(without) if step["type"] == "Replace") + 1  # after the optional marks
    made = {}
    for name, chosen in (("without", without), ("with", without[:marks] + rules + without[marks:])):
        config["normalizer"]["normalizers"] = chosen
        made[name] = Tokenizer.from_str(json.dumps(config))
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a psp model folder (its tokenizer.json)")
    parser.add_argument("--text", action="append", required=True, help="sentences, one a line")
    parser.add_argument("--sentences", type=int, default=100_000)
    parser.add_argument("--passes", type=int, default=3, help="timings of each; the best is reported")
    args = parser.parse_args(argv)

    from psp_hf.io.reading import open_text

    tokenizers = _variants(Path(args.model) / "tokenizer.json")
    print("\n| text | sentences | without the rules, sentences/s | with them | with / without |")
    print("|---|---|---|---|---|")
    for text in args.text:
        with open_text(Path(text)) as handle:
            lines = [line.rstrip("\n").split("\t")[0] for line in itertools.islice(handle, args.sentences)]
        sentences = (lines * (args.sentences // max(len(lines), 1) + 1))[: args.sentences]
        rates = {name: _rate(tokenizer, sentences, args.passes) for name, tokenizer in tokenizers.items()}
        print(
            f"| {Path(text).name} | {len(sentences):,} | {rates['without']:,.0f} | {rates['with']:,.0f} | "
            f"{rates['with'] / rates['without']:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
