"""The settings of a training run: `TrainingArguments` (`training_arguments.py`), the per-field rules and flags
(`checks.py`), the teacher settings (`teacher.py`), config files and the `psp train` command line of a set of
arguments."""
