"""Throughput of `psp backtranslate`: translation (greedy and beam) and the filters, in pairs/s.

By default it uses the test-size models of tests/backtranslation/test_backtranslation.py (a random 1-layer Marian with a
word-level vocabulary, and a 1-layer GPT-2), which measure the pipeline's own overhead (reading, sorting,
generate() calls, the scoring pass, chunk writes) rather than a real model's cost; `--model` (and `--lm`)
time a real translation model instead. The input is the Czech–English Multi30k validation set from the
data folder (or, without it, generated word salad of similar lengths).

    .venv/bin/python bench/backtranslate.py [--limit 1000] [--beams 1 4] [--model M] [--lm LM] [--threads 1]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def bitext(folder: Path, limit: int) -> Path:
    """`limit` lines of cs–en bitext (Multi30k val when the data folder has it)."""
    from psp_hf.data_folder import data_dir
    from psp_hf.io.reading import iter_tsv

    path = folder / "bitext.tsv"
    source = data_dir() / "bitext" / "multi30k" / "cs-en" / "val.tsv.gz"
    lines = []
    if source.is_file():
        for number, fields in iter_tsv(source):
            if number > 1:
                lines.append("\t".join(fields[:2]))
            if len(lines) >= limit:
                break
        print(f"input: {len(lines)} lines of {source}")
    else:
        rng = random.Random(0)
        words = ["pes", "kočka", "dům", "voda", "strom", "slunce", "velký", "malý", "běží", "muž", "žena", "dítě"]
        for _ in range(limit):
            lines.append(" ".join(rng.choices(words, k=rng.randint(5, 20))) + "\tthe english reference")
        print(f"input: {limit} generated lines ({source} not found)")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main() -> None:
    """Build (or take) the models, translate with each beam size, then time the filters."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=1000, help="input lines")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--model", default=None, help="translation model (default: the test-size model)")
    parser.add_argument("--lm", default=None, help="causal LM for the lm measure (default: the test-size GPT-2)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    import torch

    from psp_hf.backtranslation.pipeline import FilterSettings, TranslateSettings, filter_translations, translate_bitext
    from psp_hf.backtranslation.translate import Translator

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model, lm = args.model, args.lm
        if model is None or lm is None:
            sys.path.insert(0, str(REPO / "tests"))
            from toy_translation import build_models

            built = build_models(folder / "models")
            model, lm = model or str(built / "mt"), lm or str(built / "lm")
        path = bitext(folder, args.limit)
        print(f"torch threads: {args.threads}, device: {args.device}, batch size: {args.batch_size}, model: {model}")
        out = None
        for beams in args.beams:
            out = folder / f"out-beam{beams}"
            settings = TranslateSettings(bitext=str(path), src_lang="cs", model=model, beam_size=beams)

            def make(beams=beams):
                return Translator(model, device=args.device, num_beams=beams)

            result = translate_bitext(out, settings, make, batch_size=args.batch_size)
            print(
                f"translate, beam {beams}: {result['pairs']} pairs in {result['seconds']:.2f} s = "
                f"{result['pairs_per_second']:,.1f} pairs/s (translating and writing; the total includes loading)"
            )
        for label, settings in [
            ("filters: length, cost, overlap, bleu", FilterSettings()),
            ("filters: + lm, classifier", FilterSettings(lm=lm, classifier=True, device=args.device)),
        ]:
            started = time.perf_counter()
            report = filter_translations(out, settings)
            seconds = time.perf_counter() - started
            print(f"{label}: {report['pairs_in'] / seconds:,.0f} pairs/s ({seconds:.2f} s)")


if __name__ == "__main__":
    main()
