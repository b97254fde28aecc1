"""`psp train --config FILE`: a JSON or YAML file of `TrainingArguments` fields."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from ...errors import PSPInputError


def load_config_file(path: str | os.PathLike, cls: type) -> dict[str, Any]:
    """Read a JSON or YAML config file of the fields of dataclass `cls` (`TrainingArguments`, passed in by
    `arguments`, which imports this module), by name with dashes or underscores."""
    fields = {spec.name for spec in dataclasses.fields(cls)}
    path = Path(path)
    if not path.is_file():
        raise PSPInputError(f"--config {path}: no such file")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            values = yaml.safe_load(text)
        else:
            values = json.loads(text)
    except Exception as error:  # both json and yaml errors carry the line number in their message
        raise PSPInputError(f"{path}: not a valid config file: {error}") from None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise PSPInputError(f"{path}: the config must be a mapping of setting names to values")
    result: dict[str, Any] = {}
    for key, value in values.items():
        name = str(key).replace("-", "_")
        if name not in fields:
            raise PSPInputError(f"{path}: unknown setting {key!r} (known: {', '.join(sorted(fields))})")
        result[name] = value
    return result
