"""Training data preparation (`psp prepare`): the papers' ParaNMT and bitext recipes as streamed jobs.

    from psp_hf.data import prepare_paraphrases, prepare_bitext
    prepare_paraphrases(["para-nmt-50m.txt"], "data/paranmt", push_to_hub="my-org/paranmt")

The output folder (or Hub dataset repo) loads with `datasets.load_dataset(folder_or_repo, streaming=True)`;
its sentencepiece vocabulary comes back with `load_prepared_tokenizer(folder_or_repo)`.
"""

from __future__ import annotations

_EXPORTS = {
    "prepare_paraphrases": "prepare",
    "prepare_bitext": "prepare",
    "push_dataset": "dataset_repo",
    "tokenizer_folder": "dataset_repo",
    "load_prepared_tokenizer": "dataset_repo",
    "LanguageIdentifier": "language_id",
}


def __getattr__(name: str):
    # Lazy: `psp prepare --help` and `import psp_hf.cli.prepare` stay free of numpy/pyarrow/langid imports.
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
