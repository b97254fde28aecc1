"""Evaluate sentence encoders like the papers: `python eval.py --model ID_OR_PATH [--tasks ...]` (= `psp eval`).

`--encoder MODULE:NAME` evaluates any Python encoder (beside or instead of `--model`): a function
`list[str] -> array`, or SentEval's `prepare(params, samples)` / `batcher(params, batch)` (see
`psp_hf.evaluation.callables`).

Prints the papers' tables (STS 2012-2016, STS-B, SICK-R, STS17, Tatoeba, SentEval) with the papers' P-SP rows
beside the measured ones; `--output results.json` also writes the Markdown and the model card's model-index.
"""

import sys

from psp_hf.cli import main

if __name__ == "__main__":
    sys.exit(main(["eval", *sys.argv[1:]]))
