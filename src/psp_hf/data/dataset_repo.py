"""A prepared dataset on the Hub: pushing the folder, and finding the sentencepiece vocabulary saved with it."""

from __future__ import annotations

import os
import re
from pathlib import Path

from .report import TOKENIZER_DIR


def push_dataset(
    folder: str | os.PathLike,
    repo_id: str,
    private: bool = False,
    token: str | None = None,
    commit_message: str | None = None,
) -> str:
    """Upload a prepared folder as a Hub dataset repo (created if missing) in one commit; returns the repo URL.

    The uploaded card's `load_dataset(...)` example names `repo_id`; the local folder is not modified.
    Raises `psp_hf.hub.PSPPushError` (with a `psp push ... --repo-type dataset` retry command) on Hub errors.
    """
    from ..hub import push_folder

    folder = Path(folder)
    extra = {}
    card = folder / "README.md"
    if card.is_file():
        from huggingface_hub import DatasetCard

        # The metadata stays as it is; only the example in the text names the repo instead of the folder.
        uploaded = DatasetCard.load(card)
        uploaded.text = re.sub(r'load_dataset\("[^"]*"', f'load_dataset("{repo_id}"', uploaded.text, count=1)
        extra["README.md"] = str(uploaded).encode()
    return push_folder(
        folder,
        repo_id,
        private=private,
        token=token,
        repo_type="dataset",
        commit_message=commit_message or "psp prepare",
        extra_files=extra,
    )


def tokenizer_folder(dataset: str | os.PathLike, revision: str | None = None, token: str | None = None) -> Path | None:
    """The `tokenizer/` folder saved with a prepared dataset (local folder or Hub dataset repo), or None."""
    path = Path(dataset)
    if path.is_dir():
        folder = path / TOKENIZER_DIR
        return folder if (folder / "tokenizer.json").is_file() else None
    from huggingface_hub import snapshot_download

    local = Path(
        snapshot_download(
            repo_id=str(dataset),
            repo_type="dataset",
            revision=revision,
            token=token,
            allow_patterns=[f"{TOKENIZER_DIR}/*"],
        )
    )
    folder = local / TOKENIZER_DIR
    return folder if (folder / "tokenizer.json").is_file() else None


def load_prepared_tokenizer(dataset: str | os.PathLike, revision: str | None = None, token: str | None = None):
    """The fast tokenizer trained by `psp prepare` for a dataset folder or Hub dataset repo (None if absent)."""
    folder = tokenizer_folder(dataset, revision=revision, token=token)
    if folder is None:
        return None
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(folder))
