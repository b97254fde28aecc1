"""Tokenizers: sentencepiece vocabularies and their fast `tokenizer.json` (`pieces.py`), WORD and TRIGRAM units
(`units.py`), and Traditional Chinese folded into Simplified (`chinese_script.py`)."""
