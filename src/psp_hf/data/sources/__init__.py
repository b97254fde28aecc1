"""Where training text comes from, read with Python alone: what Debian packages ship, PPDB, and the data folder's
sources for the X–English models by name.

- registry_text.py: English text of Debian packages (WordNet glosses, fortunes, dictionaries) for the distillation
  corpus; registry_bitext.py: X–English pairs of Debian packages, read through dictionaries.py (dictd files, Unihan),
  bible.py (SWORD modules), help_pages.py (LibreOffice's help) and apertium.py (the rule-based translator).
- ppdb.py: PPDB-XL lexical paraphrases as training pairs.
- language_sources.py: the data folder's bitext, monolingual text and dev set for `psp languages`, by name.

The prepare pipeline that turns them into training data (readers, filters, runner, report) is the rest of `data/`.
"""
