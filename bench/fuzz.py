"""The fuzz generators of tests/fuzz_inputs.py run for longer: inputs tried per reader, how they ended, failures.

Each reader (a pair file for `psp score` / `psp train`, a model folder's config.json, tokenizer.json,
model.safetensors, modules.json, a training run's checkpoint files) gets `--examples` drawn inputs (hypothesis,
random seeds, no shrinking) or `--minutes` of them. Every input must end in a correct result (`ok`) or one
`psp: error:` line (`error`); anything else is a failure, printed with the input that caused it.

    .venv/bin/python bench/fuzz.py [--examples 200] [--minutes M] [--readers NAME,...] [--seed 0]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the generators live beside the test that bounds them


def _explorer(reader, context, counts: Counter, failures: list, limit: int, seed_value: int):
    """A hypothesis-driven loop over `reader`'s inputs, counting outcomes (no assertion, no shrinking)."""
    from fuzz_inputs import run_one
    from hypothesis import HealthCheck, Phase, given, seed, settings
    from hypothesis import strategies as st

    @seed(seed_value)
    @settings(
        max_examples=limit,
        deadline=None,
        database=None,
        phases=[Phase.generate],  # no shrinking: a failure is printed with the input as drawn
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def explore(data):
        value = data.draw(reader.strategy(context))
        outcome, detail = run_one(reader, context, value)
        counts[outcome] += 1
        if outcome == "failure":
            failures.append(f"{detail}\n    input: {value!r:.600}")

    return explore


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200, help="inputs per reader (default 200)")
    parser.add_argument("--minutes", type=float, default=None, help="time per reader instead of a count")
    parser.add_argument("--readers", default=None, help="comma-separated reader names (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=3, help="failures printed per reader (default 3)")
    args = parser.parse_args()
    # Hub look-ups never leave the machine; HF libraries quiet.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    logging.disable(logging.CRITICAL)

    from fuzz_inputs import READERS, Context

    readers = READERS
    if args.readers:
        wanted = {name.strip() for name in args.readers.split(",")}
        readers = [reader for reader in READERS if any(name in reader.name for name in wanted)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="psp-fuzz-bench-") as root:
        context = Context.build(Path(root), with_run=any(reader.slow for reader in readers))
        for reader in readers:
            counts: Counter = Counter()
            failures: list[str] = []
            started = time.perf_counter()
            if args.minutes is None:
                _explorer(reader, context, counts, failures, args.examples, args.seed)()
            else:  # batches of 10 with fresh seeds until the time is up (hypothesis has no time limit of its own)
                batch = 0
                while time.perf_counter() - started < 60 * args.minutes:
                    _explorer(reader, context, counts, failures, 10, args.seed * 100_003 + batch)()
                    batch += 1
            seconds = time.perf_counter() - started
            rows.append((reader.name, counts, seconds))
            for text in failures[: args.show]:
                print(f"FAILURE in {reader.name}: {text}\n", file=sys.stderr)
    print("| reader | inputs tried | ok | one error line | failures | seconds |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, counts, seconds in rows:
        total = sum(counts.values())
        print(f"| {name} | {total} | {counts['ok']} | {counts['error']} | {counts['failure']} | {seconds:.0f} |")
    return 1 if any(counts["failure"] for _, counts, _ in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
