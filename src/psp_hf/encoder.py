"""`PSPEncoder`: a P-SP model and its tokenizer behind a small encode/save/load API."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import PSPInputError
from .inference.batch_words import look_up_in_c as word_look_up_in_c
from .inference.batches import check_num_threads, run_batches
from .inference.encode_inputs import (
    FEW_SENTENCES,
    backend_ids,
    check_encode_options,
    checked_output,
    finished_output,
    private_backend,
    sentence_list,
    word_cache_applies,
)
from .inference.piece_cache import WordPieceCache
from .inference.pooling import apply_unknown_rule, pool_bags_fast, prepare_bulk
from .inference.pooling import backend as pooling_backend
from .inference.torch_model import (
    check_model_save,
    embed_with_model,
    folder_needs_model,
    load_model_encoder,
    model_over_table,
    new_model_encoder,
)
from .persistence import PSPSettings, read_settings, read_tokenizer, read_weights, resolve_model_path, word_boundary_id

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerFast

    from .modeling import PSPModel


class PSPEncoder:
    """A P-SP sentence encoder: sentencepiece tokenizer + averaged piece embeddings.

    Mirrors model2vec's `StaticModel` and sentence-transformers' `encode` conventions:

    >>> model = PSPEncoder.from_pretrained("path/or/org/p-sp-en")
    >>> embeddings = model.encode(["A man plays a guitar.", "Someone is playing music."])
    >>> model.similarity(embeddings[:1], embeddings[1:])

    Loading and encoding need numpy, safetensors and tokenizers only. `model` (the transformers `PSPModel`) and
    `tokenizer` (a transformers fast tokenizer) are built on first use, for training and for transformers users;
    once built, the model's weights are the ones `encode` uses.

    Empty or whitespace-only sentences, and sentences made only of out-of-vocabulary characters, follow P-SP's
    unknown rule: they get the unknown piece's embedding, like a sentence made only of unknown pieces.
    """

    def __init__(
        self,
        model: PSPModel | None = None,
        tokenizer: PreTrainedTokenizerFast | None = None,
        folder: Path | None = None,
    ):
        if model is None or tokenizer is None:
            raise TypeError("PSPEncoder(model, tokenizer) needs both; use psp_hf.load(folder) to load a folder")
        backend = private_backend(tokenizer.backend_tokenizer)
        self._setup(PSPSettings.from_config(model.config), backend, tokenizer_size=len(tokenizer), folder=folder)
        self._torch_only = not getattr(model.config, "light_path", True)  # LSTM, GRAN, ...: through the model
        if getattr(model.config, "word_boundary_token_id", None) is None:
            # Older configs lack it; the remote code must apply the same rule as encode().
            model.config.word_boundary_token_id = self.settings.word_boundary_token_id
        if hasattr(model, "dequantize_table"):  # a model loaded from an int8 folder holds integers until scaled
            model.dequantize_table()
        self._model = model.eval()
        self._tokenizer = tokenizer

    def _setup(self, settings: PSPSettings, backend, tokenizer_size: int, folder: Path | None = None) -> None:
        if tokenizer_size > settings.vocab_size:
            where = f"{folder}: " if folder is not None else ""
            raise PSPInputError(
                f"{where}tokenizer has {tokenizer_size} pieces but the model's table only {settings.vocab_size} rows"
            )
        tokenizer_config = json.loads(backend.to_str())
        if settings.word_boundary_token_id is None:  # not set (older folders): the tokenizer's boundary piece
            boundary = word_boundary_id(tokenizer_config, backend)
            settings = PSPSettings(
                **{**settings.__dict__, "word_boundary_token_id": -1 if boundary is None else boundary}
            )
        self.settings = settings
        # As sentence-transformers' `truncate_dim`: encode's default width (None: the model's dimension).
        self.truncate_dim: int | None = None
        self._folder = folder
        self._torch_only = False
        self._model = None
        self._tokenizer = None
        self._table: np.ndarray | None = None
        self._piece_weights: np.ndarray | None = None
        # A private copy: transformers switches padding/truncation on the shared backend during its own calls.
        self._backend = backend
        self._word_cache = WordPieceCache(backend) if word_cache_applies(tokenizer_config) else None

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
        return new_model_encoder(cls, tokenizer, hidden_size, seed, **config_kwargs)

    @classmethod
    def from_pretrained(
        cls,
        id_or_path: str | os.PathLike,
        revision: str | None = None,
        token: str | bool | None = None,
        quantize_to: str | None = None,
        truncate_dim: int | None = None,
    ) -> PSPEncoder:
        """Load from a local folder or a Hub repo id (safetensors weights only; never a pickle).

        model2vec and sentence-transformers `StaticEmbedding` folders load too (see `psp_hf.persistence.static_models`).
        As in model2vec and sentence-transformers: `quantize_to` ("float16", "int8") gives the embeddings of the table
        stored that way (what `save_pretrained(..., quantize_to=...)` and `psp export` write; the table in memory
        stays float32), and `truncate_dim` sets `encode`'s default width to the first dimensions.
        """
        encoder = cls._from_folder(resolve_model_path(id_or_path, revision=revision, token=token))
        if quantize_to is not None:
            from .persistence.smaller_tables import with_stored_table

            encoder = with_stored_table(encoder, quantize_to)
        if truncate_dim is not None:
            from .inference.quantization import check_truncate_dim

            check_truncate_dim(truncate_dim, encoder.dim)
            encoder.truncate_dim = truncate_dim
        return encoder

    @classmethod
    def _from_folder(cls, path: Path) -> PSPEncoder:
        try:
            settings = read_settings(path)
        except (PSPInputError, FileNotFoundError):
            from .persistence.static_models import read_other_format

            parts = read_other_format(path)
            if parts is None:  # not another format either: the psp error says what is wrong
                raise
            return cls.from_parts(parts.table, parts.backend, parts.settings, folder=parts.folder)
        if folder_needs_model(path):
            return load_model_encoder(cls, path)
        backend = read_tokenizer(path)
        table, piece_weights = read_weights(path, settings)
        return cls.from_parts(table, backend, settings, piece_weights, folder=path)

    @classmethod
    def from_parts(
        cls,
        table: np.ndarray,
        backend_tokenizer,
        settings: PSPSettings,
        piece_weights: np.ndarray | None = None,
        folder: Path | None = None,
    ) -> PSPEncoder:
        """An averaging encoder from its parts: the embedding table (rows x dim), a `tokenizers.Tokenizer`, the
        settings (`model_folder.PSPSettings`) and optional per-piece weights; `folder` only names errors."""
        encoder = cls.__new__(cls)
        encoder._setup(settings, backend_tokenizer, backend_tokenizer.get_vocab_size(with_added_tokens=True), folder)
        encoder._table = np.ascontiguousarray(table, dtype=np.float32)
        encoder._piece_weights = piece_weights
        return encoder

    def save_pretrained(
        self,
        directory: str | os.PathLike,
        quantize_to: str | None = None,
        dimensionality: int | None = None,
    ) -> Path:
        """Write a Hub-format folder that loads in psp, transformers (remote code) and sentence-transformers.

        Config (with auto_map), safetensors weights, tokenizer, remote code, the sentence-transformers modules.
        No model card: write one with `psp_hf.hub.card.write_model_card(directory, encoder, language, ...)`.

        Smaller folders (`psp_hf.persistence.smaller_tables`): `dimensionality` keeps that many principal components
        of the table, `quantize_to` ("float16", or "int8" with a scale per row) stores it in fewer bytes; quantised
        folders have no sentence-transformers layout (use `psp export --format model2vec` for one).
        """
        from .persistence.smaller_tables import check_table_options

        check_model_save(self._torch_only, quantize_to, dimensionality)
        check_table_options(quantize_to, dimensionality, self.dim)
        if dimensionality is not None and dimensionality != self.dim:
            from .persistence.smaller_tables import reduce_dimensions

            table, piece_weights = self.weights()
            return self.with_table(reduce_dimensions(table, dimensionality), piece_weights).save_pretrained(
                directory, quantize_to=quantize_to
            )
        from .persistence.folder_writer import write_model_folder

        return write_model_folder(self, Path(directory), quantize_to)

    def with_table(self, table: np.ndarray, piece_weights: np.ndarray | None) -> PSPEncoder:
        """A new encoder with this one's tokenizer and settings and another table (its width may differ)."""
        settings = PSPSettings(**{**self.settings.__dict__, "hidden_size": int(table.shape[1])})
        encoder = PSPEncoder.from_parts(table, private_backend(self._backend), settings, piece_weights, self._folder)
        encoder._tokenizer = self._tokenizer
        return encoder

    def push_to_hub(self, repo_id: str, **kwargs) -> str:
        """Save (weights, tokenizer, remote code, sentence-transformers layout, card) and upload.

        Options are those of `psp_hf.hub.push_encoder`; a refused push keeps the saved folder and the error
        says how to retry.
        """
        from .hub import push_encoder

        return push_encoder(self, repo_id, **kwargs)

    # ----------------------------------------------------------------------------- lazily built parts
    @property
    def model(self) -> PSPModel:
        """The transformers `PSPModel` (built on first use; shares the table with this encoder)."""
        if self._model is None:
            self._model = model_over_table(self.settings, self._table, self._piece_weights)
            self._table = self._piece_weights = None  # the model's tensors are the weights from now on
        return self._model

    @model.setter
    def model(self, model: PSPModel) -> None:
        self._model = model
        self._table = self._piece_weights = None

    @property
    def tokenizer(self) -> PreTrainedTokenizerFast:
        """The transformers fast tokenizer (built on first use)."""
        if self._tokenizer is None:
            from transformers import PreTrainedTokenizerFast

            from .inference.encode_inputs import fast_tokenizer

            if self._folder is not None and (self._folder / "tokenizer_config.json").is_file():
                self._tokenizer = PreTrainedTokenizerFast.from_pretrained(self._folder)
            else:
                self._tokenizer = fast_tokenizer(self._backend, self.settings.unk_token_id, self.settings.pad_token_id)
        return self._tokenizer

    @property
    def backend_tokenizer(self):
        """The `tokenizers.Tokenizer` that splits sentences into pieces (this encoder's own copy)."""
        return self._backend

    @property
    def averages_pieces(self) -> bool:
        """Whether a sentence is an average of table rows (False for LSTM, GRAN, ...: the model embeds it)."""
        return not self._torch_only

    def weights(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The embedding table and the per-piece weights (None: unweighted) that `encode` averages, as float32
        numpy arrays (views of the model's tensors once it exists)."""
        if self._model is None:
            return self._table, self._piece_weights
        import torch

        def to_numpy(tensor: torch.Tensor) -> np.ndarray:
            return tensor.detach().to(device="cpu", dtype=torch.float32).numpy()

        weights = self._model.piece_weights if self.settings.use_piece_weights else None
        return to_numpy(self._model.embeddings.weight), None if weights is None else to_numpy(weights)

    # ----------------------------------------------------------------------------- properties
    @property
    def tokenizer_size(self) -> int:
        """Number of pieces the tokenizer can produce (the table may have more rows)."""
        return self._backend.get_vocab_size(with_added_tokens=True)

    @property
    def dim(self) -> int:
        """Dimension of the embeddings."""
        return self._model.config.sentence_dim if self._torch_only else self.settings.hidden_size

    @property
    def unk_token_id(self) -> int:
        """Id of the unknown piece."""
        return self.settings.unk_token_id

    def __repr__(self) -> str:
        return f"PSPEncoder(vocab_size={self.settings.vocab_size}, dim={self.dim}, pooling={self.settings.pooling!r})"

    # ----------------------------------------------------------------------------- encoding
    def tokenize(self, sentences: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Piece ids of all sentences back to back, and where each sentence starts (torch tensors).

        The unknown-piece rule is applied by the model (`PSPModel.embed`), not here.
        """
        import torch

        flat, offsets = self.tokenize_numpy(sentences)
        return torch.from_numpy(flat), torch.from_numpy(offsets)

    def tokenize_numpy(self, sentences: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """`tokenize` as int64 numpy arrays `(flat_ids, offsets)`."""
        n = len(sentences)
        if self._word_cache is None or n <= FEW_SENTENCES:
            flat, lengths = self._tokenize_with_backend(sentences)
        else:
            flat, lengths = self._word_cache.encode_all(sentences, self._tokenize_with_backend)
        offsets = np.zeros(n, dtype=np.int64)
        np.cumsum(lengths[:-1], out=offsets[1:])
        return flat, offsets

    def _tokenize_with_backend(self, sentences: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return backend_ids(self._backend, sentences, str(self._folder or "the model's tokenizer"))

    def embed_ids(self, flat_ids: np.ndarray, offsets: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Sentence embeddings of `(flat_ids, offsets)` bags: the unknown rule, then (weighted) pooling."""
        return self._pool_bags(self._bags_to_pool(flat_ids, offsets), self._pooling_weights(), out)

    def _bags_to_pool(self, flat_ids: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The bags after the unknown rule (the model's own forward applies it for the other encoder types)."""
        s = self.settings
        if self._torch_only or not s.drop_unknown:
            return flat_ids, offsets
        boundary = s.word_boundary_token_id if s.word_boundary_token_id >= 0 else None
        return apply_unknown_rule(flat_ids, offsets, s.unk_token_id, boundary)

    def _pooling_weights(self) -> tuple[np.ndarray, np.ndarray | None] | None:
        """What `_pool_bags` needs: `_weights()`, or None where the model itself embeds."""
        return None if self._torch_only else self.weights()

    def _pool_bags(
        self,
        bags: tuple[np.ndarray, np.ndarray],
        weights: tuple[np.ndarray, np.ndarray | None] | None,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """(Weighted) pooling of bags that went through `_bags_to_pool`; `weights` from `_pooling_weights`."""
        if self._torch_only:
            return embed_with_model(self._model, *bags, out)
        flat_ids, offsets = bags
        table, piece_weights = weights
        per_piece = None if piece_weights is None else piece_weights[flat_ids]
        return pool_bags_fast(table, flat_ids, offsets, per_piece, self.settings.pooling, out=out)

    def encode(
        self,
        sentences: str | Sequence[str],
        batch_size: int = 1024,
        show_progress_bar: bool | None = None,
        normalize_embeddings: bool = False,
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        out: np.ndarray | None = None,
        precision: str = "float32",
        truncate_dim: int | None = None,
        device: str | torch.device | None = None,
        num_threads: int = 1,
        **ignored: Any,
    ) -> np.ndarray | torch.Tensor:
        """Embed sentences: float32 `(n, dim)` (or `(dim,)` for a single string).

        As in sentence-transformers: `truncate_dim` keeps the first dimensions (before normalising), `precision`
        ("float32", "float16", "int8", "uint8", "binary", "ubinary") quantises the result the way
        `sentence_transformers.quantization.quantize_embeddings` does (int8/uint8 ranges from this call's
        embeddings; binary packs 8 dimensions per byte). `device` places a returned tensor (the lookup itself
        runs on the CPU). Other keywords sentence-transformers or model2vec take (`prompt`, `prompt_name`, ...) mean
        nothing to psp: one given a value (not None) is ignored with a warning, so a misspelt keyword is not lost.
        `out` may be a preallocated float32 array (e.g. a memmap) of shape `(n, dim or truncate_dim)` to write into.
        `num_threads` > 1 shares the batches between that many threads (some tokenize and hand batches to the
        others, which pool them; see `psp_hf.inference.batches.run_batches`); each batch writes its own rows, so the
        result is the same for any count.
        """
        truncate_dim = self.truncate_dim if truncate_dim is None else truncate_dim
        check_encode_options(precision, truncate_dim, self.dim, ignored)
        width = self.dim if truncate_dim is None else truncate_dim
        sentences, single = sentence_list(sentences)
        n = len(sentences)
        out = checked_output(out, batch_size, n, width)
        check_num_threads(num_threads)
        prepare_bulk(n)
        if show_progress_bar is None:
            show_progress_bar = n > 100_000 and sys.stderr.isatty()

        weights = self._pooling_weights()

        def tokenize_batch(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
            return self._bags_to_pool(*self.tokenize_numpy(sentences[start:stop]))

        def pool_batch(start: int, stop: int, bags: tuple[np.ndarray, np.ndarray]) -> None:
            rows = out[start:stop]
            if truncate_dim is None:
                self._pool_bags(bags, weights, out=rows)
            else:
                rows[:] = self._pool_bags(bags, weights)[:, :truncate_dim]
            if normalize_embeddings:
                from .inference.similarity import unit_rows

                rows[:] = unit_rows(rows)

        # A pipeline (one thread tokenizing, the other pooling; see run_batches) pays where tokenizing holds the GIL
        # and pooling does not: numpy's word look-up beside the pooling kernel or torch, or a torch model. With the
        # C look-up both steps release it, and every thread doing both of its batches was faster (1.2-1.4x at two
        # threads); with numpy's pooling both steps hold it, and a pipeline gains nothing.
        pipeline = self._torch_only or (pooling_backend() != "numpy" and not word_look_up_in_c())
        # A torch model's own intra-op threads would inherit a worker's CPU group (see inference/cpu_groups.py).
        run_batches(
            tokenize_batch,
            pool_batch,
            n,
            batch_size,
            num_threads,
            show_progress_bar,
            pipeline=pipeline,
            spread_cpus=not self._torch_only,
        )
        return finished_output(out, precision, single, convert_to_tensor or not convert_to_numpy, device)

    def get_sentence_embedding_dimension(self) -> int:
        """Width of what `encode` returns (the model's dimension, or `truncate_dim` when set)."""
        return self.dim if self.truncate_dim is None else self.truncate_dim

    @staticmethod
    def similarity(a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
        """Cosine similarity matrix between two sets of embeddings: `(len(a), len(b))`, a tensor if given one."""
        from .inference.similarity import cosine_matrix

        return cosine_matrix(a, b)

    def similarity_pairwise(self, a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> np.ndarray:
        """Cosine of row i of `a` with row i of `b` (a tensor if given one)."""
        from .inference.similarity import cosine_pairs

        return cosine_pairs(a, b)


def load(
    id_or_path: str | os.PathLike,
    revision: str | None = None,
    token: str | bool | None = None,
    quantize_to: str | None = None,
    truncate_dim: int | None = None,
) -> PSPEncoder:
    """Load a model from a local folder or a Hub repo id: psp, model2vec or sentence-transformers `StaticEmbedding`
    (see `PSPEncoder.from_pretrained`)."""
    return PSPEncoder.from_pretrained(
        id_or_path, revision=revision, token=token, quantize_to=quantize_to, truncate_dim=truncate_dim
    )
