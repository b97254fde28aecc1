"""Tiny random translation models (a Marian MT model and a GPT-2 LM over one word-level vocabulary) and a toy
Czech-English bitext, for the back-translation tests and `bench/backtranslate.py`."""

from __future__ import annotations

import random
from pathlib import Path

import torch

SOURCE_WORDS = ["ahoj", "svět", "pes", "kočka", "dům", "voda", "strom", "slunce", "velký", "malý", "běží"]
ENGLISH_WORDS = ["the", "a", "dog", "cat", "house", "water", "tree", "sun", "is", "runs", "big", "small"]


def _tokenizer(bos: bool):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {word: i for i, word in enumerate(["<pad>", "</s>", "<unk>", "<s>", *SOURCE_WORDS, *ENGLISH_WORDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    extra = {"bos_token": "<s>"} if bos else {}
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", **extra
    )


def build_models(root: Path) -> Path:
    """`mt/`: a random Marian model; `lm/`: a random GPT-2; both with a word-level tokenizer."""
    from transformers import GPT2Config, GPT2LMHeadModel, MarianConfig, MarianMTModel

    tokenizer = _tokenizer(bos=False)
    vocab_size = len(tokenizer)
    torch.manual_seed(0)
    config = MarianConfig(
        vocab_size=vocab_size,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        init_std=0.5,  # wide logits, so the random model's choices depend on the source
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        forced_eos_token_id=None,
    )
    model = MarianMTModel(config)
    with torch.no_grad():
        model.final_logits_bias[0, [0, 2, 3]] = -100.0  # never <pad>, <unk>, <s> inside a translation
        model.final_logits_bias[0, 1] = 2.0  # </s> often enough that most translations end before the cap
    # Each word at most once: translations of varied length, ending when </s> wins.
    model.generation_config.no_repeat_ngram_size = 1
    model.save_pretrained(root / "mt")
    tokenizer.save_pretrained(root / "mt")
    lm = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=vocab_size, n_embd=16, n_layer=1, n_head=2, n_positions=64, bos_token_id=3, eos_token_id=1
        )
    )
    lm.save_pretrained(root / "lm")
    _tokenizer(bos=True).save_pretrained(root / "lm")
    return root


def make_bitext(path: Path, n: int, seed: int = 0, header: bool = False) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        source = " ".join(rng.choice(SOURCE_WORDS) for _ in range(rng.randint(1, 9)))
        reference = " ".join(rng.choice(ENGLISH_WORDS) for _ in range(rng.randint(2, 9)))
        rows.append((source, reference))
    lines = (["cs\ten"] if header else []) + [f"{s}\t{r}" for s, r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows
