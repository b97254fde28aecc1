"""What a training run reads: the pair stream (`pairs.py`, `objects.py`), the distillation corpus
(`teacher_corpus.py`), bitext labels and the dev set (`bitext_teacher.py`), multilingual distillation
(`multilingual.py`) and the `--lang` check."""
