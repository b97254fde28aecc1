"""Type checks of training settings read from a config file (any JSON type can arrive there)."""

from __future__ import annotations

from ..errors import PSPInputError


def check_types(arguments, fields: dict) -> None:
    """Raise `PSPInputError` when a setting of `arguments` (`TrainingArguments`) is not of its field's type."""
    # Config files can hold any JSON type; catch a string where a number belongs before training starts.
    expected = {"int": int, "float": (int, float), "bool": bool, "float | None": (int, float), "int | None": int}
    for name, spec in fields.items():
        wanted = expected.get(str(spec.type))
        value = getattr(arguments, name)
        if wanted is None or (value is None and str(spec.type).endswith("| None")):
            continue
        if not isinstance(value, wanted) or (wanted is int and isinstance(value, bool)):
            raise PSPInputError(f"setting {name!r} must be {str(spec.type)}, got {value!r}")
        if str(spec.type).startswith("float"):
            setattr(arguments, name, float(value))
