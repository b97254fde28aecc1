"""`psp backtranslate`: paraphrase pairs from bitext by translating its source side into English.

psp backtranslate cs-en.tsv.gz --src-lang cs -m Helsinki-NLP/opus-mt-cs-en -o data/bt-cs
psp backtranslate cs-en.tsv.gz --src-lang cs -m M -o data/bt-cs --max-cost 1.5 --min-length 5 \\
    --max-overlap 0.5 --lm gpt2 --max-lm 6 --classifier --max-machine 0.9 --score-model psp-en --min-score 0.5
psp prepare paraphrases data/bt-cs/pairs.tsv -o data/bt-cs-prepared   # then psp train as usual

Rerunning the same command after an interruption continues the translation where it stopped; rerunning a
finished one with other bounds only refilters. Every bound is inclusive.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
from pathlib import Path

from ..errors import PSPInputError
from . import flags
from .flags import positive_int

logger = logging.getLogger(__name__)

# Measure name -> (flag stem, help text of the measure).
_BOUNDED = {
    "length": ("length", "tokens of the translation"),
    "cost": ("cost", "translation cost: negative log-probability per token under the translation model"),
    "overlap": ("overlap", "n-gram overlap of reference and translation (shared ÷ n-grams of the shorter side)"),
    "bleu": ("bleu", "smoothed sentence BLEU of the translation against the reference (0-100)"),
    "lm": ("lm", "negative log-probability per token under --lm"),
    "machine": ("machine", "probability that the translation is machine-made, from the classifier"),
    "score": ("score", "paraphrase score: cosine under --score-model"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `psp backtranslate`."""
    parser.description = (
        "Translate the source side of bitext into English with a transformers seq2seq model, keep each "
        "translation's cost, and write (reference, translation, score) pairs; then measure and filter them "
        "with the back-translation paper's filters into pairs.tsv for `psp prepare paraphrases`."
    )
    parser.add_argument("bitext", metavar="BITEXT", help="TSV (.tsv, .tsv.gz): source sentence, English reference")
    parser.add_argument("--src-lang", required=True, help="language code of the source side (e.g. cs)")
    flags.add_model(parser, help="seq2seq translation model: folder or Hub id")
    flags.add_output(parser, help="output folder (resumed when it holds an interrupted run)")
    parser.add_argument("--push-to-hub", metavar="REPO", help="upload the folder as a Hub dataset repo")
    parser.add_argument("--private", action="store_true", help="create the Hub repo as private")
    parser.add_argument("--overwrite", action="store_true", help="start over in a folder holding another run")
    parser.add_argument(
        "--columns", type=flags.columns, default=None, help="source and English columns: numbers (1,2) or header names"
    )
    parser.add_argument("--header", choices=["auto", "yes", "no"], default="auto", help="is line 1 a header?")
    group = parser.add_argument_group("translation")
    group.add_argument("--beam-size", type=positive_int, default=4, help="beam size (1 = greedy; default 4)")
    group.add_argument("--batch-size", type=positive_int, default=32, help="sentences per generate() call")
    group.add_argument("--chunk-size", type=positive_int, default=1024, help="sentences per resumable output chunk")
    group.add_argument("--max-new-tokens", type=positive_int, default=256, help="longest translation in tokens")
    group.add_argument("--max-source-tokens", type=positive_int, default=512, help="longer sources are truncated")
    group.add_argument("--device", default=None, help="torch device (default: cuda when available, else cpu)")
    group.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default=None, help="model weights")
    flags.add_threads(group, "torch CPU threads")
    group.add_argument(
        "--target-token",
        default=None,
        help="token that starts every translation, for many-to-many models (e.g. eng_Latn for NLLB, __en__ for M2M100)",
    )
    group.add_argument(
        "--tokenizer-src-lang", default=None, help="the tokenizer's source language code (e.g. ces_Latn for NLLB)"
    )
    group = parser.add_argument_group("filters (bounds are inclusive; none is set by default)")
    group.add_argument("--overlap-order", type=positive_int, default=3, help="n of the n-gram overlap (default 3)")
    group.add_argument("--lm", default=None, help="causal language model (folder or Hub id) for the lm measure")
    group.add_argument("--classifier", action="store_true", help="compute the reference-vs-translation classifier")
    group.add_argument("--score-model", default=None, help="psp model (folder or Hub id) for the paraphrase score")
    group.add_argument("--seed", type=int, default=0, help="seed of the classifier's folds")
    for stem, text in _BOUNDED.values():
        group.add_argument(f"--min-{stem}", type=float, default=None, help=f"lowest {text}")
        group.add_argument(f"--max-{stem}", type=float, default=None, help=f"highest {text}")
    parser.add_argument("--progress", action="store_true", help="progress bar even when stderr is not a terminal")


def _bounds(args: argparse.Namespace) -> list:
    from ..backtranslation.filters import Bound

    bounds = []
    for measure, (stem, _) in _BOUNDED.items():
        low, high = getattr(args, f"min_{stem}"), getattr(args, f"max_{stem}")
        if low is None and high is None:
            continue
        try:
            bounds.append(Bound(measure, low, high))
        except ValueError as error:
            raise PSPInputError(f"--min-{stem}/--max-{stem}: {error}") from None
    return bounds


def _check_arguments(args: argparse.Namespace, bounds: list) -> None:
    if not args.output and not args.push_to_hub:
        raise PSPInputError("give --output DIR, --push-to-hub REPO, or both")
    if not Path(args.bitext).is_file():
        raise PSPInputError(f"{args.bitext}: no such file")
    if args.push_to_hub:
        from huggingface_hub.utils import HFValidationError, validate_repo_id

        try:
            validate_repo_id(args.push_to_hub)
        except HFValidationError as error:
            raise PSPInputError(f"--push-to-hub {args.push_to_hub!r}: {error}") from None
    measures = {bound.measure for bound in bounds}
    if "lm" in measures and not args.lm:
        raise PSPInputError("--min-lm/--max-lm need --lm MODEL")
    if "score" in measures and not args.score_model:
        raise PSPInputError("--min-score/--max-score need --score-model MODEL")


def _work_folder(args: argparse.Namespace) -> Path:
    """--output, or (push only) a cache folder named after the run, so a rerun resumes there too."""
    if args.output:
        return Path(args.output)
    key = "\n".join([str(Path(args.bitext).resolve()), args.model, args.push_to_hub])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "psp-hf" / "backtranslate" / hashlib.sha1(key.encode()).hexdigest()[:16]


def run(args: argparse.Namespace) -> int:
    """Translate (resuming), filter, write the report and card, and push when asked."""
    from ..io.writing import output_folder

    with output_folder(_work_folder(args)):  # a folder linked out of it (parts/) is refused, not written through
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from ..backtranslation.card import write_card
    from ..backtranslation.pipeline import FilterSettings, TranslateSettings, filter_translations, translate_bitext

    bounds = _bounds(args)
    _check_arguments(args, bounds)
    from ..devices import check_device

    check_device(args.device)  # before run.json is written: a bad device must not lock the folder
    from ..io.reading import cannot_be_hub_id
    from ..io.writing import atomic_path

    for flag in ("model", "lm", "score_model"):
        value = getattr(args, flag, None)
        # A mistyped local model is found now, not after hours of translating (--lm, --score-model come last).
        if isinstance(value, str) and value and not Path(value).exists() and cannot_be_hub_id(value):
            raise PSPInputError(f"--{flag.replace('_', '-')} {value}: no such model folder")
    out = _work_folder(args)
    stat = Path(args.bitext).stat()
    settings = TranslateSettings(
        bitext=str(Path(args.bitext).resolve()),
        src_lang=args.src_lang,
        model=args.model,
        beam_size=args.beam_size,
        max_new_tokens=args.max_new_tokens,
        max_source_tokens=args.max_source_tokens,
        chunk_size=args.chunk_size,
        columns=args.columns,
        header=args.header,
        target_token=args.target_token,
        tokenizer_src_lang=args.tokenizer_src_lang,
        input_size=stat.st_size,
        input_mtime_ns=stat.st_mtime_ns,
    )
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    def make_translator():
        from ..backtranslation.translate import Translator

        return Translator(
            args.model,
            device=args.device,
            num_beams=args.beam_size,
            max_new_tokens=args.max_new_tokens,
            max_source_tokens=args.max_source_tokens,
            dtype=args.dtype,
            target_token=args.target_token,
            tokenizer_src_lang=args.tokenizer_src_lang,
        )

    progress = args.progress or (not args.quiet and sys.stderr.isatty())
    translation = translate_bitext(
        out, settings, make_translator, batch_size=args.batch_size, overwrite=args.overwrite, progress=progress
    )
    filter_settings = FilterSettings(
        bounds=bounds,
        overlap_order=args.overlap_order,
        lm=args.lm,
        classifier=args.classifier or any(b.measure == "machine" for b in bounds),
        paraphrase_model=args.score_model,
        batch_size=args.batch_size,
        device=args.device,
        seed=args.seed,
    )
    try:
        filtering = filter_translations(out, filter_settings)
    except PSPInputError:
        raise
    except (OSError, ValueError) as error:
        # A --lm or --score-model that cannot be loaded, or a classifier with too few pairs: one error line.
        raise PSPInputError(f"filtering {out}: {error}") from None
    report = {
        "command": " ".join(["psp", *sys.argv[1:]]) if sys.argv[1:2] == ["backtranslate"] else None,
        "translation_settings": {k: v for k, v in vars(settings).items() if not k.startswith("input_")},
        "translation": translation,
        "filtering": filtering,
    }
    with atomic_path(out / "report.json") as tmp:  # a link planted at the name is replaced, never written through
        tmp.write_text(json.dumps(report, indent=1) + "\n")
    write_card(out, report, args.src_lang, repo_id=args.push_to_hub)
    logger.info(_summary(out, translation, filtering))
    if args.push_to_hub:
        from ..data.dataset_repo import push_dataset

        url = push_dataset(out, args.push_to_hub, private=args.private, commit_message="psp backtranslate")
        logger.info("pushed to %s", url)
    return 0


def _summary(out: Path, translation: dict, filtering: dict) -> str:
    lines = [f"{out}: {translation['pairs']:,} pairs translated"]
    if translation.get("pairs_per_second"):
        lines[0] += f" ({translation['pairs_per_second']:,.1f} pairs/s)"
    for item in filtering["filters"]:
        lines.append(f"  {item['rule']}: {item['outside']:,} outside, {item['removed']:,} removed")
    lines.append(f"  {filtering['pairs_out']:,} of {filtering['pairs_in']:,} pairs kept in pairs.tsv")
    return "\n".join(lines)
