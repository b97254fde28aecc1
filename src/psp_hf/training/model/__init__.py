"""The model a run trains: the trainable module (`trainable.py`), the papers' other architectures
(`architectures.py`), the tokenizer and initial table before the first step (`setup.py`, `initial_tables.py`)."""
