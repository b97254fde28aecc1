"""Experiment drivers: whole runs built from the library's parts, not parts of it.

- demo.py: `make demo`, the English job end to end on the data folder (distillation corpus, teacher labels,
  distilled and trained students, evaluation), run as `python -m psp_hf.experiments.demo`;
- languages.py and languages_data.py: `psp languages`, the X–English models one language after another;
  language_results.py: what each is scored on and the build's summary; multilingual_model.py: `--multilingual`;
  english_rows.py: the English student whose rows start theirs; build_steps.py: the resumable steps all three run.
"""
