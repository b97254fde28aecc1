"""`PSPEncoder`: a P-SP model and its tokenizer behind a small encode/save/load API."""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

from .modeling import PSPConfig, PSPModel
from .piece_cache import WordPieceCache

# What a psp model folder holds; the rest of a Hub repo (cards, plots) is not needed to load it.
MODEL_FILES = [
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "configuration_psp.py",
    "modeling_psp.py",
]


def resolve_model_path(id_or_path: str | os.PathLike, revision: str | None = None, token=None) -> Path:
    """A local folder as it is; anything else is a Hub repo id, downloaded (or found in the HF cache)."""
    path = Path(id_or_path)
    if path.is_dir():
        return path
    if path.exists():
        raise FileNotFoundError(f"{path} is a file; expected a model folder or a Hub repo id")
    if os.path.isabs(os.fspath(id_or_path)) or os.fspath(id_or_path).startswith((".", "~")):
        raise FileNotFoundError(f"{id_or_path}: no such model folder")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        return Path(
            snapshot_download(repo_id=os.fspath(id_or_path), revision=revision, token=token, allow_patterns=MODEL_FILES)
        )
    except (HfHubHTTPError, LocalEntryNotFoundError, ValueError) as error:
        raise FileNotFoundError(
            f"{id_or_path}: not a local model folder, and the Hub could not provide it ({error.__class__.__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''})"
        ) from error


def _portable_tokenizer_class(directory: Path) -> None:
    # transformers 5 writes "TokenizersBackend", which 4.x cannot load; the fast class loads in both.
    path = directory / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    if config.get("tokenizer_class") == "TokenizersBackend":
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
        path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _word_cache_applies(backend) -> bool:
    """The word cache is exact only for P-SP's own pipeline: lowercase + charsmap, whitespace-split Metaspace."""
    config = json.loads(backend.to_str())
    normalizer = config.get("normalizer") or {}
    steps = [step.get("type") for step in normalizer.get("normalizers", [])]
    pre_tokenizer = config.get("pre_tokenizer") or {}
    return (
        steps[:1] == ["Lowercase"]
        and set(steps) <= {"Lowercase", "Precompiled", "Strip", "Replace"}
        and pre_tokenizer.get("type") == "Metaspace"
        and pre_tokenizer.get("split", False)
        and pre_tokenizer.get("prepend_scheme") == "always"
        and (config.get("model") or {}).get("type") == "Unigram"
    )


class PSPEncoder:
    """A P-SP sentence encoder: sentencepiece tokenizer + averaged piece embeddings.

    Mirrors model2vec's `StaticModel` and sentence-transformers' `encode` conventions:

    >>> model = PSPEncoder.from_pretrained("path/or/org/p-sp-en")
    >>> embeddings = model.encode(["A man plays a guitar.", "Someone is playing music."])
    >>> model.similarity(embeddings[:1], embeddings[1:])

    Empty or whitespace-only sentences follow P-SP's unknown rule: they get the unknown piece's embedding,
    like a sentence made only of unknown pieces.
    """

    def __init__(self, model: PSPModel, tokenizer: PreTrainedTokenizerFast):
        if len(tokenizer) > model.config.vocab_size:
            raise ValueError(
                f"tokenizer has {len(tokenizer)} pieces but the model's table only {model.config.vocab_size} rows"
            )
        self.model = model.eval()
        self.tokenizer = tokenizer
        # A private copy: transformers switches padding/truncation on the shared backend during its own calls.
        self._backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
        self._backend.no_padding()
        self._backend.no_truncation()
        self._word_cache = WordPieceCache(self._backend) if _word_cache_applies(self._backend) else None

    # ----------------------------------------------------------------------------- construction, I/O
    @classmethod
    def from_tokenizer(
        cls,
        tokenizer: PreTrainedTokenizerFast,
        hidden_size: int = 1024,
        seed: int = 0,
        **config_kwargs,
    ) -> PSPEncoder:
        """A new model with a randomly initialised table sized for `tokenizer`."""
        config = PSPConfig(
            vocab_size=len(tokenizer),
            hidden_size=hidden_size,
            pad_token_id=tokenizer.pad_token_id,
            unk_token_id=tokenizer.unk_token_id,
            **config_kwargs,
        )
        torch.manual_seed(seed)
        return cls(PSPModel(config), tokenizer)

    @classmethod
    def from_pretrained(
        cls, id_or_path: str | os.PathLike, revision: str | None = None, token: str | bool | None = None
    ) -> PSPEncoder:
        """Load from a local folder or a Hub repo id."""
        path = resolve_model_path(id_or_path, revision=revision, token=token)
        config_file = path / "config.json"
        if not config_file.is_file():
            raise FileNotFoundError(f"{path}: no config.json; not a psp model folder")
        from transformers.utils import logging as hf_logging

        # transformers draws a "Loading weights" bar even for one small file; psp shows its own progress.
        bar_was_enabled = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            model = PSPModel.from_pretrained(path)
        finally:
            if bar_was_enabled:
                hf_logging.enable_progress_bar()
        if getattr(model.config, "model_type", None) != "psp":
            raise ValueError(f"{path}: model_type is {model.config.model_type!r}, expected 'psp'")
        tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
        return cls(model, tokenizer)

    def save_pretrained(
        self,
        directory: str | os.PathLike,
        language: str | None = None,
        eval_results: dict | None = None,
        training_info: dict | None = None,
    ) -> Path:
        """Write a Hub-format folder that loads in psp, transformers (remote code) and sentence-transformers.

        Config (with auto_map), safetensors weights, tokenizer, remote code, the sentence-transformers modules;
        with `language`, also a model card rendered from `eval_results` and `training_info`.
        """
        from .hub.card import write_model_card
        from .sentence_transformers_layout import write_sentence_transformers_files

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        PSPConfig.register_for_auto_class()
        PSPModel.register_for_auto_class("AutoModel")
        self.model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        _portable_tokenizer_class(directory)
        write_sentence_transformers_files(directory, self)
        if language is not None:
            write_model_card(directory, self, language=language, eval_results=eval_results, training_info=training_info)
        return directory

    def push_to_hub(self, repo_id: str, **kwargs) -> str:
        """Save (weights, tokenizer, remote code, sentence-transformers layout, card) and upload.

        Options are those of `psp_hf.hub.push_encoder`; a refused push keeps the saved folder and the error
        says how to retry.
        """
        from .hub import push_encoder

        return push_encoder(self, repo_id, **kwargs)

    # ----------------------------------------------------------------------------- properties
    @property
    def dim(self) -> int:
        """Dimension of the embeddings."""
        return self.model.config.hidden_size

    @property
    def unk_token_id(self) -> int:
        return self.model.config.unk_token_id

    def __repr__(self) -> str:
        config = self.model.config
        return f"PSPEncoder(vocab_size={config.vocab_size}, dim={config.hidden_size}, pooling={config.pooling!r})"

    # ----------------------------------------------------------------------------- encoding
    def tokenize(self, sentences: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Piece ids of all sentences back to back, and where each sentence starts.

        The unknown-piece rule is applied by the model (`PSPModel.embed`), not here.
        """
        n = len(sentences)
        if self._word_cache is None:
            flat, lengths = self._tokenize_with_backend(sentences)
        else:
            plain = np.fromiter((s.isascii() and s.isprintable() for s in sentences), dtype=bool, count=n)
            if plain.all():
                flat, lengths = self._word_cache.encode(sentences)
            else:
                flat, lengths = self._tokenize_mixed(sentences, plain)
        offsets = np.zeros(n, dtype=np.int64)
        np.cumsum(lengths[:-1], out=offsets[1:])
        return torch.from_numpy(flat), torch.from_numpy(offsets)

    def _tokenize_with_backend(self, sentences: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        encodings = self._backend.encode_batch_fast(list(sentences), add_special_tokens=False)
        ids_per_sentence = [encoding.ids for encoding in encodings]
        lengths = np.fromiter(map(len, ids_per_sentence), dtype=np.int64, count=len(ids_per_sentence))
        flat = np.fromiter(itertools.chain.from_iterable(ids_per_sentence), dtype=np.int64, count=int(lengths.sum()))
        return flat, lengths

    def _tokenize_mixed(self, sentences: Sequence[str], plain: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Plain-ASCII sentences through the word cache, the others through the tokenizer, merged in order."""
        groups = [np.flatnonzero(plain), np.flatnonzero(~plain)]
        encoded = [
            self._word_cache.encode([sentences[i] for i in groups[0]]),
            self._tokenize_with_backend([sentences[i] for i in groups[1]]),
        ]
        lengths = np.zeros(len(sentences), dtype=np.int64)
        for rows, (_, group_lengths) in zip(groups, encoded, strict=True):
            lengths[rows] = group_lengths
        starts = np.zeros(len(sentences), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        flat = np.empty(int(lengths.sum()), dtype=np.int64)
        for rows, (group_flat, group_lengths) in zip(groups, encoded, strict=True):
            group_starts = np.cumsum(group_lengths) - group_lengths
            flat[np.repeat(starts[rows] - group_starts, group_lengths) + np.arange(len(group_flat))] = group_flat
        return flat, lengths

    def encode(
        self,
        sentences: str | Sequence[str],
        batch_size: int = 1024,
        show_progress_bar: bool | None = None,
        normalize_embeddings: bool = False,
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        out: np.ndarray | None = None,
    ) -> np.ndarray | torch.Tensor:
        """Embed sentences: float32 `(n, dim)` (or `(dim,)` for a single string).

        `out` may be a preallocated float32 array (e.g. a memmap) of shape `(n, dim)` to write into.
        """
        single = isinstance(sentences, str)
        if single:
            sentences = [sentences]
        elif not isinstance(sentences, Sequence):
            sentences = list(sentences)
        for index, sentence in enumerate(sentences):
            if not isinstance(sentence, str):
                raise TypeError(f"sentences[{index}] is {type(sentence).__name__}, expected str")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        n = len(sentences)
        if out is None:
            out = np.empty((n, self.dim), dtype=np.float32)
        elif out.shape != (n, self.dim) or out.dtype != np.float32:
            raise ValueError(f"out must be float32 of shape {(n, self.dim)}, got {out.dtype} {out.shape}")
        if show_progress_bar is None:
            show_progress_bar = n > 100_000 and sys.stderr.isatty()
        starts = range(0, n, batch_size)
        if show_progress_bar:
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc="Encoding", unit="batch", total=len(starts), file=sys.stderr)
        with torch.inference_mode():
            for start in starts:
                batch = sentences[start : start + batch_size]
                ids, offsets = self.tokenize(batch)
                embeddings = self.model.embed(ids, offsets)
                if normalize_embeddings:
                    embeddings = torch.nn.functional.normalize(embeddings, dim=1)
                out[start : start + len(batch)] = embeddings.numpy()
        result = out[0] if single else out
        if convert_to_tensor or not convert_to_numpy:
            return torch.from_numpy(np.ascontiguousarray(result))
        return result

    @staticmethod
    def similarity(a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> np.ndarray:
        """Cosine similarity matrix between two sets of embeddings: `(len(a), len(b))`."""
        from .similarity import cosine_matrix

        return cosine_matrix(a, b)

    def similarity_pairwise(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Cosine of row i of `a` with row i of `b`."""
        from .similarity import cosine_pairs

        return cosine_pairs(a, b)


def load(id_or_path: str | os.PathLike, revision: str | None = None, token: str | bool | None = None) -> PSPEncoder:
    """Load a psp model from a local folder or a Hub repo id."""
    return PSPEncoder.from_pretrained(id_or_path, revision=revision, token=token)
