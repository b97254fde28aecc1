"""`psp push MODEL_DIR REPO_ID`: upload a psp model folder to the Hugging Face Hub."""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
from pathlib import Path

from ..errors import PSPInputError
from ..io.reading import read_json
from ..logs import write_result

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `psp push`."""
    parser.add_argument(
        "model_dir", metavar="MODEL_DIR",
        help="psp model folder (as written by save_pretrained), or a prepared dataset folder with --repo-type dataset",
    )  # fmt: skip
    parser.add_argument("repo_id", metavar="REPO_ID", help="Hub repo id, e.g. my-org/p-sp-de (created if missing)")
    parser.add_argument("--private", action="store_true", help="create the repo as private")
    parser.add_argument("--revision", help="branch to push to (created if missing; default: the main branch)")
    parser.add_argument("--commit-message", default=None, help="message of the Hub commit")
    parser.add_argument(
        "--repo-type", default="model", choices=("model", "dataset"),
        help="model (default) or dataset (a folder written by `psp prepare`, uploaded as it is)",
    )  # fmt: skip
    parser.add_argument("--token", default=None, help="Hub token (default: HF_TOKEN or the saved login)")
    smaller = parser.add_argument_group("a smaller table (as `psp export`; MODEL_DIR itself is left as it is)")
    smaller.add_argument(
        "--quantize-to", choices=("float32", "float16", "int8"), default=None,
        help="push the table as float16, or int8 with one scale per row",
    )  # fmt: skip
    smaller.add_argument(
        "--dimensionality", type=int, default=None, metavar="N",
        help="push the table's top N principal components (PCA fitted on the table)",
    )  # fmt: skip
    card = parser.add_argument_group("model card (only when MODEL_DIR has no README.md)")
    card.add_argument("--language", help="render a card from the template for this language (en, ar, de, ...)")
    card.add_argument(
        "--eval-results", type=Path,
        help="the JSON report of `psp eval` for this model, or a JSON object of task -> metric -> value",
    )  # fmt: skip
    card.add_argument(
        "--baseline-results", type=Path,
        help="JSON file of the untrained (random) table's results, shown beside --eval-results",
    )  # fmt: skip
    card.add_argument("--training-info", type=Path, help="JSON file of the training run's settings for the card")


def _optional_json(path: Path | None, option: str) -> dict | None:
    return None if path is None else read_json(path, what=option)


def _card_arguments(args: argparse.Namespace) -> list[str]:
    # Part of the retry command: the card options only matter while the folder has no card of its own.
    found = []
    for option, value in (
        ("--quantize-to", args.quantize_to),
        ("--dimensionality", None if args.dimensionality is None else str(args.dimensionality)),
        ("--language", args.language),
        ("--eval-results", args.eval_results),
        ("--baseline-results", args.baseline_results),
        ("--training-info", args.training_info),
    ):
        if value is not None:
            found += [option, str(Path(value).resolve()) if isinstance(value, Path) else value]
    return found


def _card_results(value: dict | None, folder: Path, option: str) -> dict | None:
    """A plain nested results dict as it is; from a `psp eval` JSON report, the entry of this model."""
    if value is None or not str(value.get("format", "")).startswith("psp-eval/"):
        return value
    models = value.get("models") or []
    if len(models) > 1:
        # A report of several models: the one evaluated from this folder (by path, else by folder name).
        target = folder.resolve()
        chosen = [m for m in models if Path(str(m.get("model", {}).get("model_id", ""))).resolve() == target]
        chosen = chosen or [m for m in models if m.get("model", {}).get("name") == folder.resolve().name]
        if len(chosen) != 1:
            names = ", ".join(str(m.get("model", {}).get("name")) for m in models)
            raise PSPInputError(f"{option}: the report holds several models ({names}); none is clearly {folder}")
        models = chosen
    if not models or "card_results" not in models[0]:
        raise PSPInputError(f"{option}: a psp eval report without results (no models[].card_results)")
    return models[0]["card_results"]


def check_model_folder(folder: Path) -> dict:
    """The folder's config.json, after checking that the folder holds a psp model."""
    if not folder.is_dir():
        raise PSPInputError(f"MODEL_DIR {folder}: no such folder")
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise PSPInputError(f"MODEL_DIR {folder}: no config.json; not a psp model folder")
    config = read_json(config_file)
    if config.get("model_type") != "psp":
        raise PSPInputError(f"{config_file}: model_type is {config.get('model_type')!r}, expected 'psp'")
    missing = [name for name in ("model.safetensors", "tokenizer.json") if not (folder / name).is_file()]
    if missing:
        raise PSPInputError(f"MODEL_DIR {folder}: missing {', '.join(missing)}")
    return config


def _load_encoder(folder: Path):
    from ..encoder import PSPEncoder

    try:
        return PSPEncoder.from_pretrained(folder)
    except PSPInputError:
        raise
    except Exception as error:  # noqa: BLE001 - a damaged folder is bad input: one line, nothing pushed
        reason = (str(error).strip().splitlines() or [""])[0]
        raise PSPInputError(f"MODEL_DIR {folder}: cannot load the model ({type(error).__name__}: {reason})") from None


def _describe_smaller(args: argparse.Namespace) -> str:
    parts = [f"a {args.quantize_to} table"] if args.quantize_to else []
    parts += [f"{args.dimensionality} dimensions (PCA)"] if args.dimensionality is not None else []
    return " and ".join(parts)


def _smaller_copy(folder: Path, args: argparse.Namespace, target: Path):
    """The model saved smaller into `target` (the folder's card copied beside it); returns (encoder, target)."""
    from ..hub.card import CARD_FILENAME
    from ..persistence.smaller_tables import check_table_options

    encoder = _load_encoder(folder)
    try:
        check_table_options(args.quantize_to, args.dimensionality, encoder.dim)
    except ValueError as error:
        raise PSPInputError(f"--{str(error).replace('_', '-')}") from None
    encoder.save_pretrained(target, quantize_to=args.quantize_to, dimensionality=args.dimensionality)
    if (folder / CARD_FILENAME).is_file():
        shutil.copy2(folder / CARD_FILENAME, target / CARD_FILENAME)
    return _load_encoder(target), target


def _push_dataset(folder: Path, args: argparse.Namespace) -> int:
    from ..hub.push import DEFAULT_COMMIT_MESSAGE, PSPPushError, push_folder

    if not folder.is_dir():
        raise PSPInputError(f"MODEL_DIR {folder}: no such folder")
    if args.language or args.eval_results or args.baseline_results or args.training_info:
        raise PSPInputError("--language, --eval-results, --baseline-results and --training-info are for models")
    if args.quantize_to or args.dimensionality:
        raise PSPInputError("--quantize-to and --dimensionality are for models")
    try:
        url = push_folder(
            folder, args.repo_id, private=args.private, revision=args.revision,
            commit_message=args.commit_message or DEFAULT_COMMIT_MESSAGE, token=args.token, repo_type="dataset",
        )  # fmt: skip
    except PSPPushError as error:
        logger.error("psp: error: %s", error)
        return 1
    write_result(url)
    return 0


def run(args: argparse.Namespace) -> int:
    """Run `psp push`."""
    from ..hub.card import CARD_FILENAME, LANGUAGES, render_model_card
    from ..hub.push import DEFAULT_COMMIT_MESSAGE, PSPPushError, push_folder
    from ..persistence.sentence_transformers_layout import write_sentence_transformers_files

    folder = Path(args.model_dir)
    if args.repo_type == "dataset":
        return _push_dataset(folder, args)
    check_model_folder(folder)
    if args.language is not None and args.language not in LANGUAGES:
        raise PSPInputError(f"--language {args.language!r}: no card template (known: {', '.join(LANGUAGES)})")
    eval_results = _card_results(_optional_json(args.eval_results, "--eval-results"), folder, "--eval-results")
    training_info = _optional_json(args.training_info, "--training-info")
    baseline_results = _card_results(
        _optional_json(args.baseline_results, "--baseline-results"), folder, "--baseline-results"
    )

    say = logger.info

    extra: dict[str, bytes | Path] = {}
    encoder = None
    source = folder
    with tempfile.TemporaryDirectory(prefix="psp-push-extra-") as staging:
        if args.quantize_to is not None or args.dimensionality is not None:
            encoder, folder = _smaller_copy(folder, args, Path(staging) / "smaller")
            say(f"pushing a copy with {_describe_smaller(args)}")
        # What the folder lacks is staged elsewhere and uploaded beside it: MODEL_DIR itself is never written.
        # Results or run details given on the command line are news: they replace a card the folder already has.
        card_news = any(v is not None for v in (args.eval_results, args.baseline_results, args.training_info))
        render_card = bool(args.language) and (card_news or not (folder / CARD_FILENAME).is_file())
        if not (folder / "modules.json").is_file() or render_card:
            encoder = _load_encoder(folder)
        if not (folder / "modules.json").is_file():
            layout = Path(staging) / "layout"
            for path in write_sentence_transformers_files(layout, encoder):
                extra[path.relative_to(layout).as_posix()] = path
            say("adding the sentence-transformers layout (the folder had no modules.json)")
        if render_card or not (folder / CARD_FILENAME).is_file():
            if render_card:
                card = render_model_card(
                    encoder, args.language, eval_results=eval_results, training_info=training_info,
                    baseline_results=baseline_results, repo_id=args.repo_id,
                )  # fmt: skip
                extra[CARD_FILENAME] = card.encode("utf-8")
                say(f"adding a model card rendered from hub_cards/{args.language}.md")
            else:
                say("note: the folder has no README.md; pass --language to upload a model card with it")
        try:
            url = push_folder(
                folder,
                args.repo_id,
                private=args.private,
                revision=args.revision,
                commit_message=args.commit_message or DEFAULT_COMMIT_MESSAGE,
                token=args.token,
                repo_type=args.repo_type,
                extra_files=extra,
                retry_args=_card_arguments(args),
                source=source,  # a --quantize-to copy is temporary: the retry names MODEL_DIR
            )
        except PSPPushError as error:
            logger.error("psp: error: %s", error)
            return 1
    say(f"pushed {source} to {url}")
    write_result(url)
    return 0
