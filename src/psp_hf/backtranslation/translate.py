"""Translating the source side of bitext with a transformers seq2seq model, keeping each translation's cost.

The cost ("score") of a translation is its negative log-probability per token under the model that made
it: the generated tokens (up to and including the end-of-sentence token) are scored again with one
teacher-forced forward pass, so greedy and beam search give the same kind of number, and it does not depend
on generate()'s length penalty.

Sentences are translated a chunk at a time (streaming: the input is never held whole); inside a chunk they
are sorted by source length so each batch pads little, and the chunk is written back in input order.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import PSPInputError
from ..io.reading import iter_tsv

ENGLISH = "en"


@dataclass
class BitextRow:
    """One input line: its number, the sentence to translate and the English reference."""

    line: int
    source: str
    reference: str


def read_bitext(
    path: str | os.PathLike, src_lang: str, columns: Sequence[int | str] | None = None, header: str = "auto"
) -> Iterator[BitextRow]:
    """Stream `(line, source, reference)` from a TSV (gzip when .gz); errors name FILE:LINE.

    Columns: `columns` (0-based numbers or header names: source first, then English), else the header's
    `<src_lang>` and `en` columns, else columns 1 (source) and 2 (English). `header`: auto (a first line
    naming `<src_lang>` and `en`, or the `columns` names), yes or no.
    """
    rows = iter_tsv(path)
    first = next(rows, None)
    if first is None:
        return
    number, fields = first
    wanted = list(columns) if columns is not None else [src_lang, ENGLISH]
    names = [c for c in wanted if isinstance(c, str)]
    has_header = header == "yes" or (header == "auto" and bool(names) and all(n in fields for n in names))
    width = len(fields)
    if has_header:
        indices = []
        for column in wanted:
            if isinstance(column, int):
                indices.append(column)
            elif column in fields:
                indices.append(fields.index(column))
            else:
                raise PSPInputError(f"{path}:1: header {fields} has no column {column!r}")
    else:
        if columns is not None and names:
            raise PSPInputError(f"{path}:1: columns {names} asked for by name, but the file has no header")
        indices = list(columns) if columns is not None else [0, 1]
    for index in indices:
        if index >= width:
            raise PSPInputError(f"{path}:{number}: column {index + 1} asked for, but the line has {width} columns")
    source_index, reference_index = indices
    if not has_header:
        yield BitextRow(number, fields[source_index], fields[reference_index])
    for number, fields in rows:
        if len(fields) != width:
            raise PSPInputError(f"{path}:{number}: expected {width} tab-separated fields, got {len(fields)}")
        yield BitextRow(number, fields[source_index], fields[reference_index])


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Indices in batches of at most `batch_size`, longest first (ties keep input order)."""
    order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def clean_text(text: str) -> str:
    """Fold whitespace (tabs and newlines included) into single spaces, so every translation is one TSV field."""
    return " ".join(text.split())


class Translator:
    """A seq2seq model and its tokenizer (folder or Hub id), translating lists of sentences."""

    def __init__(
        self,
        model: str,
        device: str | None = None,
        num_beams: int = 1,
        max_new_tokens: int = 256,
        max_source_tokens: int = 512,
        dtype: str | None = None,
        target_token: str | None = None,
        tokenizer_src_lang: str | None = None,
    ):
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        if num_beams < 1:
            raise PSPInputError(f"--beam-size must be at least 1, got {num_beams}")
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model)
            kwargs = {"dtype": getattr(torch, dtype)} if dtype else {}
            self.model = AutoModelForSeq2SeqLM.from_pretrained(model, **kwargs).to(self.device).eval()
        except (OSError, ValueError) as error:
            raise PSPInputError(f"--model {model}: cannot load a seq2seq model and tokenizer: {error}") from error
        positions = _positions(self.model.config)
        if positions is not None:
            # A model with learned positions cannot read or write past them (an index error deep in torch):
            # inputs are cut to what it reads, and asking for longer outputs is refused before any work.
            if max_new_tokens > positions:
                raise PSPInputError(f"--max-new-tokens {max_new_tokens}: {model} writes at most {positions} tokens")
            max_source_tokens = min(max_source_tokens, positions)
        self.num_beams, self.max_new_tokens, self.max_source_tokens = num_beams, max_new_tokens, max_source_tokens
        # Many-to-many models (NLLB, M2M100, mBART) take the source language on the tokenizer and start the
        # translation with a forced target-language token.
        if tokenizer_src_lang is not None:
            if not hasattr(self.tokenizer, "src_lang"):
                raise PSPInputError(f"--tokenizer-src-lang: the tokenizer of {model} has no source language setting")
            self.tokenizer.src_lang = tokenizer_src_lang
        self.forced_bos_token_id = None
        if target_token is not None:
            token_id = self.tokenizer.convert_tokens_to_ids(target_token)
            if token_id is None or token_id == self.tokenizer.unk_token_id:
                raise PSPInputError(f"--target-token {target_token!r} is not in the vocabulary of {model}")
            self.forced_bos_token_id = token_id
        config = self.model.generation_config
        self.eos_token_id = config.eos_token_id if config.eos_token_id is not None else self.tokenizer.eos_token_id
        if isinstance(self.eos_token_id, list):
            self.eos_token_id = self.eos_token_id[0]

    def source_lengths(self, sources: Sequence[str]) -> list[int]:
        """Token counts of the sources (the sort key of the batches)."""
        encoded = self.tokenizer(list(sources), truncation=True, max_length=self.max_source_tokens)
        return [len(ids) for ids in encoded["input_ids"]]

    def translate(self, sources: Sequence[str], batch_size: int = 32, progress=None) -> tuple[list[str], np.ndarray]:
        """Translations (in the order of `sources`) and their costs (negative log-probability per token)."""
        translations: list[str] = [""] * len(sources)
        costs = np.zeros(len(sources), dtype=np.float64)
        for batch in length_sorted_batches(self.source_lengths(sources), batch_size):
            texts, batch_costs = self._translate_batch([sources[i] for i in batch])
            for position, index in enumerate(batch):
                translations[index] = texts[position]
                costs[index] = batch_costs[position]
            if progress is not None:
                progress.update(len(batch))
        return translations, costs

    def _translate_batch(self, sources: list[str]) -> tuple[list[str], np.ndarray]:
        import torch

        inputs = self.tokenizer(
            sources, return_tensors="pt", padding=True, truncation=True, max_length=self.max_source_tokens
        ).to(self.device)
        inputs.pop("token_type_ids", None)
        with torch.inference_mode():
            generated = self.model.generate(
                **inputs,
                num_beams=self.num_beams,
                do_sample=False,
                max_new_tokens=self.max_new_tokens,
                **({"forced_bos_token_id": self.forced_bos_token_id} if self.forced_bos_token_id is not None else {}),
            )
            costs = self._costs(inputs, generated)
        texts = self.tokenizer.batch_decode(generated, skip_special_tokens=True)
        return [clean_text(text) for text in texts], costs

    def _costs(self, inputs, generated) -> np.ndarray:
        """Negative log-probability per generated token, up to and including the first end-of-sentence."""
        import torch

        labels = generated[:, 1:]
        logits = self.model(**inputs, decoder_input_ids=generated[:, :-1]).logits.float()
        token_nll = -torch.log_softmax(logits, dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
        # What generate() appends after a sequence ended is padding: count tokens until the first EOS.
        ended_before = torch.cumsum((labels == self.eos_token_id).long(), dim=1) - (labels == self.eos_token_id).long()
        mask = (ended_before == 0).float()
        counts = mask.sum(dim=1).clamp(min=1)
        return ((token_nll * mask).sum(dim=1) / counts).cpu().numpy().astype(np.float64)


def _positions(config) -> int | None:
    """How many positions the model's learned position embeddings hold (None: no such limit known)."""
    for name in ("max_position_embeddings", "n_positions", "max_target_positions"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None
