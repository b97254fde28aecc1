"""Corpus-scale work: embedding datasets into resumable shards (`psp embed-dataset`) and mining them (`psp mine`)."""
