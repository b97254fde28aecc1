"""The card template `hub_cards/_card.md` is Jinja (rendered by `huggingface_hub.ModelCard.from_template`),
which renders a misspelt or missing variable as empty text: every variable it uses must be one the renderer
fills in, and every language's facts must parse."""

from __future__ import annotations

from importlib import resources

import pytest

from psp_hf.hub import card as card_module


def test_every_template_variable_is_filled(monkeypatch):
    import jinja2
    import jinja2.meta
    from huggingface_hub import ModelCard

    from psp_hf.modeling import PSPConfig

    template = resources.files("psp_hf.hub_cards").joinpath("_card.md").read_text(encoding="utf-8")
    used = jinja2.meta.find_undeclared_variables(jinja2.Environment().parse(template))
    given: dict = {}
    original = ModelCard.from_template.__func__

    def recording(cls, card_data, template_path=None, template_str=None, **kwargs):
        given.update(kwargs, card_data=card_data.to_yaml(), **card_data.to_dict())
        return original(cls, card_data, template_path=template_path, template_str=template_str, **kwargs)

    monkeypatch.setattr(ModelCard, "from_template", classmethod(recording))
    text = card_module.render_model_card(PSPConfig(vocab_size=500, hidden_size=16), "en")
    assert used and used <= set(given), sorted(used - set(given))
    assert "{{" not in text and "}}" not in text
    assert text.startswith("---\n") and "\n---\n\n# p-sp-en: " in text


@pytest.mark.parametrize("language", card_module.LANGUAGES)
def test_language_facts_parse(language):
    facts, notes = card_module.language_template(language)
    assert {"title", "language_name", "languages", "examples", "paper_setting"} <= set(facts)
    # The multilingual model's card names every language of the single-language ones.
    codes = set(card_module.LANGUAGES) - {"multilingual"} if language == "multilingual" else {language}
    assert codes <= set(facts["languages"]) and notes and not notes.startswith("---")


def test_card_of_a_recurrent_encoder_names_it_and_offers_no_sentence_transformers_layout():
    from psp_hf.hub.card import render_model_card
    from psp_hf.modeling import PSPConfig

    gran = render_model_card(
        PSPConfig(vocab_size=50, hidden_size=8, encoder_type="gran", units="words", unit_count=48), "en"
    )
    assert "GRAN over words" in gran and "library_name: transformers" in gran
    assert "SentenceTransformer(" not in gran and "sentence-transformers" not in gran.split("---")[1]
    average = render_model_card(PSPConfig(vocab_size=50, hidden_size=8), "en")
    assert "SentenceTransformer(" in average and "library_name: sentence-transformers" in average
