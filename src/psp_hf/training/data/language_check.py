"""Check `--lang` against the training pairs before any work: column names, then language ID on a sample."""

from __future__ import annotations

from ...errors import PSPInputError

SAMPLE_ROWS = 200


def _looks_like_language_code(name: str) -> bool:
    return 2 <= len(name) <= 3 and name.isalpha() and name.islower()


def _sample(source, rows: int) -> tuple[list[str], list[str]]:
    first: list[str] = []
    second: list[str] = []
    for chunk in source.dataset.iter(batch_size=rows):
        for a, b in zip(*source.columns(chunk), strict=True):
            if isinstance(a, str) and isinstance(b, str) and a.strip() and b.strip():
                first.append(a)
                second.append(b)
        break
    return first, second


def check_declared_language(source, lang: str | None, kind: str) -> None:
    """Refuse `--lang` when the data says otherwise (de-en bitext with --lang fr; English pairs with --lang de)."""
    if not lang:
        return
    lang = lang.lower()
    columns = (source.first_column, source.second_column)
    named_by_language = source.translation_langs is None and all(map(_looks_like_language_code, columns))
    if named_by_language and columns[0] != columns[1] and (lang not in columns or (kind == "bitext" and lang == "en")):
        other = next((name for name in columns if name != "en"), columns[0])
        raise PSPInputError(
            f"--lang {lang}: the data's text columns are {columns[0]}, {columns[1]} ({'-'.join(columns)} "
            f"bitext); pass --lang {other}, or name the columns with --columns"
        )
    from ...data.language_id import language_mismatch

    first, second = _sample(source, SAMPLE_ROWS)
    expected = [(columns[0], first, lang), (columns[1], second, "en" if kind == "bitext" else lang)]
    for column, texts, language in expected:
        mismatch = language_mismatch(texts, language)
        if mismatch:
            role = "the English side" if language == "en" and kind == "bitext" else f"--lang {lang}"
            raise PSPInputError(
                f"--lang {lang}: column {column!r} of the data does not look like {language} ({role}): {mismatch}; "
                "check --lang (and --columns, --kind)"
            )
