"""P-SP: paraphrastic sentence embeddings as the average of sentencepiece-piece embeddings.

This file is the Hub remote code: it imports only torch, transformers and its sibling configuration file.
"""

from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.utils import ModelOutput

from .configuration_psp import PSPConfig
from .encoders_psp import AVERAGING, SentenceHead, codes_to_rows, unit_codes


def apply_unknown_rule(
    flat_ids: torch.Tensor, offsets: torch.Tensor, unk_token_id: int, boundary_token_id: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop unknown pieces from each bag unless it has nothing else; a bag without content becomes one unknown.

    `flat_ids` holds the pieces of all sentences back to back and `offsets[i]` is where sentence i starts.
    Content is any piece but the unknown one and, when given, the bare word-boundary piece that the tokenizer
    puts before a word it cannot segment: a sentence of only out-of-vocabulary characters is then the unknown
    piece, not the boundary piece. Returns new `(flat_ids, offsets)` in the same layout.
    """
    n = offsets.numel()
    lengths = torch.diff(offsets, append=offsets.new_tensor([flat_ids.numel()]))
    bag = torch.repeat_interleave(torch.arange(n, device=flat_ids.device), lengths)
    unknown = flat_ids == unk_token_id
    content = ~unknown
    if boundary_token_id is not None:
        content &= flat_ids != boundary_token_id
    content_per_bag = torch.bincount(bag[content], minlength=n)
    if not bool(unknown.any()) and bool((content_per_bag > 0).all()):
        return flat_ids, offsets
    empty = content_per_bag == 0
    keep = ~unknown & ~empty[bag]
    new_lengths = torch.bincount(bag[keep], minlength=n)
    new_lengths[empty] = 1
    new_offsets = torch.zeros_like(offsets)
    new_offsets[1:] = torch.cumsum(new_lengths, 0)[:-1]
    ids = torch.full((int(new_lengths.sum()),), unk_token_id, dtype=flat_ids.dtype, device=flat_ids.device)
    kept_positions = torch.ones(ids.numel(), dtype=torch.bool, device=ids.device)
    kept_positions[new_offsets[empty]] = False
    ids[kept_positions] = flat_ids[keep]
    return ids, new_offsets


def pool_bags(
    table: torch.Tensor,
    flat_ids: torch.Tensor,
    offsets: torch.Tensor,
    piece_weights: torch.Tensor | None = None,
    mode: str = "mean",
) -> torch.Tensor:
    """Pool the rows `table[flat_ids]` per bag: `mode` ("mean", "max", "sum"), or with `piece_weights` (one weight
    per entry of `flat_ids`) their weighted mean. Differentiable in `table` and `piece_weights`.
    """
    if piece_weights is None:
        return nn.functional.embedding_bag(flat_ids, table, offsets=offsets, mode=mode)
    summed = nn.functional.embedding_bag(flat_ids, table, offsets=offsets, mode="sum", per_sample_weights=piece_weights)
    lengths = torch.diff(offsets, append=offsets.new_tensor([flat_ids.numel()]))
    bag = torch.repeat_interleave(torch.arange(offsets.numel(), device=flat_ids.device), lengths)
    total = torch.zeros(offsets.numel(), dtype=piece_weights.dtype, device=piece_weights.device)
    total = total.index_add(0, bag, piece_weights)
    return summed / total.clamp_min(1e-12).unsqueeze(1)


@dataclass
class PSPModelOutput(ModelOutput):
    """Output of [`PSPModel`].

    Args:
        last_hidden_state (`torch.FloatTensor` of shape `(batch_size, seq_len, hidden_size)`, *optional*):
            Each piece's row of the table, zeros where `attention_mask` is 0. Only for padded `input_ids` (what a
            tokenizer returns), so that generic code (mean pooling over tokens, the feature-extraction pipeline)
            finds per-token vectors; `None` on the flat `offsets` path, with `output_token_embeddings=False` and
            for the encoders other than a plain mean or max of the tokenizer's ids' rows.
        sentence_embedding (`torch.FloatTensor` of shape `(batch_size, hidden_size)`):
            One embedding per sentence (not normalised).
        pooler_output (`torch.FloatTensor` of shape `(batch_size, hidden_size)`):
            The same tensor, under the name that generic sentence-embedding code looks for.
    """

    last_hidden_state: torch.FloatTensor | None = None
    sentence_embedding: torch.FloatTensor | None = None
    pooler_output: torch.FloatTensor | None = None


class PSPPreTrainedModel(PreTrainedModel):
    """Base class holding the configuration class and weight initialisation of P-SP models."""

    config_class = PSPConfig
    base_model_prefix = "psp"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        # EmbeddingBag is not covered by PreTrainedModel's generic initialisation.
        if isinstance(module, nn.EmbeddingBag):
            module.weight.normal_(mean=0.0, std=self.config.initializer_range)
        elif isinstance(module, PSPModel) and module.piece_weights is not None:
            module.piece_weights.fill_(1.0)


class PSPModel(PSPPreTrainedModel):
    """P-SP sentence encoder: one embedding table; a sentence is the mean (or max) of its piece embeddings.

    Accepts either padded `input_ids` with an `attention_mask` (what `AutoTokenizer` returns) or, without
    padding, the pieces of all sentences concatenated in a 1-D `input_ids` with `offsets` marking where each
    sentence starts (the fast path).
    """

    def __init__(self, config: PSPConfig):
        super().__init__(config)
        self.embeddings = nn.EmbeddingBag(
            config.vocab_size, config.hidden_size, mode="sum" if config.use_piece_weights else config.pooling
        )
        self.piece_weights = nn.Parameter(torch.ones(config.vocab_size)) if config.use_piece_weights else None
        # The papers' other encoders (see encoders_psp.py): a head after the table, units formed from characters,
        # and a second encoder with its own table for combinations. None of it exists for P-SP's plain average.
        self.head = (
            SentenceHead(config.encoder_type, config.hidden_size) if config.encoder_type not in AVERAGING else None
        )
        if config.units != "tokens":
            self.register_buffer("unit_codes", torch.zeros(config.unit_count, dtype=torch.long))
        second = config.second_encoder
        if second is not None:
            self.second_embeddings = nn.EmbeddingBag(second["vocab_size"], second["hidden_size"], mode="sum")
            if second["encoder_type"] not in AVERAGING:
                self.second_head = SentenceHead(second["encoder_type"], second["hidden_size"])
            if second["units"] != "tokens":
                self.register_buffer("second_unit_codes", torch.zeros(second["unit_count"], dtype=torch.long))
        if getattr(config, "table_dtype", "float32") == "int8":
            # int8 storage: the loaded table holds the integers; one scale per row turns them back into floats.
            self.register_buffer("table_scales", torch.ones(config.vocab_size))
        self._table_dequantized = False
        self.post_init()

    @torch.no_grad()
    def dequantize_table(self) -> None:
        """Scale an int8-stored table's rows once after loading (scales become 1, so it is done only once)."""
        self._table_dequantized = True
        scales = getattr(self, "table_scales", None)
        if scales is not None and bool((scales != 1).any()):
            self.embeddings.weight.mul_(scales.to(self.embeddings.weight.dtype).unsqueeze(1))
            scales.fill_(1.0)

    def get_input_embeddings(self) -> nn.Module:
        return self.embeddings

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.embeddings = value

    @property
    def stream_count(self) -> int:
        """1, or 2 for a combination of two encoders."""
        return 1 if self.config.second_encoder is None else 2

    def stream_spec(self, index: int) -> dict:
        """Encoder type, units and pooling of encoder `index` (0: this config's, 1: `second_encoder`)."""
        config = self.config
        if index == 0:
            return {"encoder_type": config.encoder_type, "units": config.units, "pooling": config.pooling}
        second = config.second_encoder
        return {**second, "pooling": "max" if second["encoder_type"] == "max" else "mean"}

    def stream_table(self, index: int) -> nn.EmbeddingBag:
        """The embedding table of encoder `index`."""
        return self.embeddings if index == 0 else self.second_embeddings

    def stream_units(
        self, index: int, flat_ids: torch.Tensor, offsets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Table rows of encoder `index`'s units of the tokenizer's bags, after the unknown rule."""
        config = self.config
        units = self.stream_spec(index)["units"]
        boundary = None
        if units == "tokens":
            boundary = getattr(config, "word_boundary_token_id", None)
            boundary = boundary if boundary is not None and boundary >= 0 else None
        else:
            codes, offsets = unit_codes(flat_ids, offsets, units, config.word_separator_id, config.char_vocab_size)
            flat_ids = codes_to_rows(codes, self.unit_codes if index == 0 else self.second_unit_codes)
        if config.drop_unknown:
            flat_ids, offsets = apply_unknown_rule(flat_ids, offsets, config.unk_token_id, boundary)
        return flat_ids, offsets

    def pool_stream(
        self,
        index: int,
        rows: torch.Tensor,
        ids: torch.Tensor,
        offsets: torch.Tensor,
        table_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Encoder `index`'s sentence vectors from `rows[ids]` in bags (`table_ids`: the table rows, for weights)."""
        spec = self.stream_spec(index)
        if spec["encoder_type"] in AVERAGING:
            weights = None
            if index == 0 and self.piece_weights is not None:
                weights = self.piece_weights[ids if table_ids is None else table_ids]
            return pool_bags(rows, ids, offsets, weights, spec["pooling"])
        head = self.head if index == 0 else self.second_head
        return head(nn.functional.embedding(ids, rows), offsets)

    def combine(self, parts: list[torch.Tensor]) -> torch.Tensor:
        """One sentence vector from each encoder's: the sum or the concatenation (one encoder: as it is)."""
        if len(parts) == 1:
            return parts[0]
        return parts[0] + parts[1] if self.config.combination == "add" else torch.cat(parts, dim=1)

    def embed(self, flat_ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """Sentence embeddings of `(flat_ids, offsets)` bags, applying the unknown-piece rule if configured."""
        if not self._table_dequantized:
            self.dequantize_table()
        if not self.config.light_path:
            parts = []
            for index in range(self.stream_count):
                ids, bag_offsets = self.stream_units(index, flat_ids, offsets)
                parts.append(self.pool_stream(index, self.stream_table(index).weight, ids, bag_offsets))
            return self.combine(parts)
        if self.config.drop_unknown:
            boundary = getattr(self.config, "word_boundary_token_id", None)
            boundary = boundary if boundary is not None and boundary >= 0 else None
            flat_ids, offsets = apply_unknown_rule(flat_ids, offsets, self.config.unk_token_id, boundary)
        weights = None if self.piece_weights is None else self.piece_weights[flat_ids]
        return pool_bags(self.embeddings.weight, flat_ids, offsets, weights, self.config.pooling)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        offsets: torch.Tensor | None = None,
        return_dict: bool | None = None,
        output_token_embeddings: bool = True,
        **kwargs,
    ) -> PSPModelOutput | tuple[torch.Tensor, ...]:
        r"""Embed sentences.

        Args:
            input_ids: `(batch, seq_len)` padded piece ids, or `(total_pieces,)` when `offsets` is given.
            attention_mask: `(batch, seq_len)`; 0 marks padding. Ignored with `offsets`.
            offsets: `(batch,)` start of each sentence in a 1-D `input_ids`.
            output_token_embeddings: with padded `input_ids`, also return `last_hidden_state` (each piece's
                table row, zeros at padding). The flat `offsets` path never builds it.
        """
        token_embeddings = None
        if offsets is not None:
            if input_ids.dim() != 1:
                raise ValueError("with offsets, input_ids must be 1-D (all sentences' pieces concatenated)")
            flat_ids = input_ids
        else:
            if input_ids.dim() != 2:
                raise ValueError("input_ids must be 2-D (batch, seq_len) unless offsets is given")
            if attention_mask is None:
                attention_mask = (input_ids != self.config.pad_token_id).long()
            mask = attention_mask.bool()
            flat_ids = input_ids[mask]
            lengths = mask.sum(dim=1)
            offsets = torch.zeros_like(lengths)
            offsets[1:] = torch.cumsum(lengths, 0)[:-1]
            if output_token_embeddings and self.config.light_path:
                if not self._table_dequantized:
                    self.dequantize_table()
                # Zeros, then the real pieces' rows: about half the time of looking up every padded position
                # and multiplying by the mask (most of a padded batch is padding; the tensor is the cost).
                weight = self.embeddings.weight
                token_embeddings = weight.new_zeros((*input_ids.shape, weight.shape[1]))
                token_embeddings[mask] = nn.functional.embedding(flat_ids, weight)
        embeddings = self.embed(flat_ids, offsets)
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        if not return_dict:
            return (embeddings, embeddings) if token_embeddings is None else (token_embeddings, embeddings, embeddings)
        return PSPModelOutput(
            last_hidden_state=token_embeddings, sentence_embedding=embeddings, pooler_output=embeddings
        )


__all__ = ["PSPModel", "PSPPreTrainedModel", "PSPModelOutput", "apply_unknown_rule", "pool_bags"]
