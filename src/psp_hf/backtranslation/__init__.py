"""Paraphrase pairs from bitext by back-translation (`psp backtranslate`), with the paper's filters."""
