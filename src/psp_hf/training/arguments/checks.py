"""The per-field rules of `TrainingArguments`, declared in each field's metadata, and the flags and checks that
read them.

A field declares everything about itself once, where it is defined:

    dim: int = field(default=1024, metadata=setting("embedding dimension", min=1, fixed_on_resume=True))

`setting` accepts only the keys in `RULES`, so a misspelt rule fails at import instead of being ignored. The flags
(`add_field_arguments`), the value checks (`check_rules`, `check_types`), the resume comparison and the model
card read these keys, so no list of field names per rule is kept beside the fields.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Iterator
from typing import Any

from ...errors import PSPInputError

# What a field's metadata may hold (besides "help"), and what each key means.
RULES = {
    "choices": "the allowed values (None stays allowed for an optional field)",
    "min": "the smallest allowed value",
    "max": "the largest allowed value",
    "above": "values must be greater than this",
    "below": "values must be less than this",
    "fixed_on_resume": "--resume refuses a value other than the checkpointed run's (data order or model change)",
    "pairs_only": "only the margin loss on pairs reads it (left off the card of a distillation-only model)",
    "aliases": "the option strings shown in --help instead of --field-name, e.g. ('-o', '--output')",
    "switch": "a boolean given as a bare switch (no optional true/false value)",
}


def setting(help_text: str, **rules: Any) -> dict[str, Any]:
    """A field's metadata: its --help text and its rules (keys of `RULES`)."""
    unknown = set(rules) - set(RULES)
    if unknown:
        raise TypeError(f"unknown setting rule(s) {', '.join(sorted(unknown))}; known: {', '.join(RULES)}")
    return {"help": help_text, **rules}


def flag_name(name: str) -> str:
    """`--name-with-dashes`: the flag of field `name` when its metadata gives no aliases."""
    return "--" + name.replace("_", "-")


def fields_with(cls: type, rule: str) -> tuple[str, ...]:
    """The names of the fields of dataclass `cls` whose metadata sets `rule`, in field order."""
    return tuple(spec.name for spec in dataclasses.fields(cls) if spec.metadata.get(rule))


def value_type(hint: Any) -> tuple[Any, bool, bool]:
    """(the element type, optional, list) of a field's type hint: `int | None` -> (int, True, False)."""
    optional = False
    arguments = typing.get_args(hint)
    if type(None) in arguments:
        optional = True
        rest = [argument for argument in arguments if argument is not type(None)]
        hint = rest[0]
    if typing.get_origin(hint) is list:
        return typing.get_args(hint)[0], optional, True
    return hint, optional, False


def type_name(hint: Any) -> str:
    """`int`, `float | None`, `list[str]`: a type hint as the field declares it."""
    kind, optional, is_list = value_type(hint)
    name = f"list[{kind.__name__}]" if is_list else kind.__name__
    return f"{name} | None" if optional else name


def _field_hints(arguments: Any) -> Iterator[tuple[dataclasses.Field, Any]]:
    hints = typing.get_type_hints(type(arguments))
    for spec in dataclasses.fields(arguments):
        yield spec, hints[spec.name]


def check_types(arguments: Any) -> None:
    """Raise `PSPInputError` when a setting of `arguments` is not of its field's type (config files can hold any
    JSON type: catch a string where a number belongs before training starts); ints become floats where a float
    belongs."""
    for spec, hint in _field_hints(arguments):
        kind, optional, is_list = value_type(hint)
        value = getattr(arguments, spec.name)
        if value is None and optional:
            continue
        items = value if is_list and isinstance(value, list) else [value]
        wanted = (int, float) if kind is float else kind
        bad = is_list and not isinstance(value, list)
        bad = bad or any(
            not isinstance(item, wanted) or (kind is not bool and isinstance(item, bool)) for item in items
        )
        if bad:
            raise PSPInputError(f"setting {spec.name!r} must be {type_name(hint)}, got {value!r}")
        if kind is float and not is_list:
            setattr(arguments, spec.name, float(value))


def _bound_problem(value: Any, rules: dict[str, Any]) -> str | None:
    """What is wrong with `value` under the bounds in `rules` (None when it is within them), worded as before."""
    low, high = rules.get("min"), rules.get("max")
    above, below = rules.get("above"), rules.get("below")
    if low is not None and high is not None:
        return None if low <= value <= high else f"must be in [{low}, {high}]"
    if low is not None and below is not None:
        return None if low <= value < below else f"must be in [{low}, {below})"
    if low is not None and value < low:
        return f"must be at least {low}" if low > 0 else f"must be >= {low}"
    if high is not None and value > high:
        return f"must be <= {high}"
    if above is not None and value <= above:
        return "must be positive" if above == 0 else f"must be > {above}"
    if below is not None and value >= below:
        return f"must be < {below}"
    return None


def check_rules(arguments: Any) -> None:
    """Raise `PSPInputError` naming the flag when a setting breaks the choices or bounds its field declares."""
    for spec in dataclasses.fields(arguments):
        rules, value = spec.metadata, getattr(arguments, spec.name)
        if value is None:
            continue
        flag = rule_flag(spec)
        choices = rules.get("choices")
        if choices is not None and value not in choices:
            raise PSPInputError(f"{flag} must be one of {', '.join(choices)}; got {value!r}")
        problem = _bound_problem(value, rules)
        if problem is not None:
            raise PSPInputError(f"{flag} {problem}, got {value}")


def shown_flags(spec: dataclasses.Field) -> tuple[str, ...]:
    """The spellings `psp train --help` shows for field `spec`: its `aliases`, else `--name-with-dashes`; the long one
    last."""
    return tuple(spec.metadata.get("aliases", ())) or (flag_name(spec.name),)


def field_default(spec: dataclasses.Field) -> Any:
    """Field `spec`'s default value."""
    return spec.default_factory() if spec.default is dataclasses.MISSING else spec.default


def rule_flag(spec: dataclasses.Field) -> str:
    """The flag that names field `spec` in messages: its first long alias, else `--name-with-dashes`."""
    longs = [alias for alias in spec.metadata.get("aliases", ()) if alias.startswith("--")]
    return longs[0] if longs else flag_name(spec.name)


# ------------------------------------------------------------------------------------------------ flags
TRUE_WORDS, FALSE_WORDS = ("yes", "true", "t", "y", "1"), ("no", "false", "f", "n", "0")


def to_bool(value: str) -> bool:
    """An argparse `type=` for `--switch VALUE`: yes/no, true/false, 1/0 (any case)."""
    if value.lower() in TRUE_WORDS:
        return True
    if value.lower() in FALSE_WORDS:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def add_field_arguments(parser: argparse.ArgumentParser, cls: type) -> list[argparse.Action]:
    """Add one flag per field of dataclass `cls` (`--no-X` beside each boolean); the field's type hint gives the
    flag's type (`list[...]`: one or more values), its metadata the help, choices and spelling.

    Every flag parses to None when not given, so that a config file can fill it in before the defaults do. A field
    has one spelling: its `aliases` or `--name-with-dashes`. Returns the actions added.
    """
    hints = typing.get_type_hints(cls)
    added = []
    for spec in dataclasses.fields(cls):
        added.extend(_add_field(parser, spec, hints[spec.name]))
    return added


def _add_field(parser: argparse.ArgumentParser, spec: dataclasses.Field, hint: Any) -> list:
    rules = spec.metadata
    kind, _optional, is_list = value_type(hint)
    shown = shown_flags(spec)
    default = field_default(spec)
    help_text = rules["help"]
    if default not in (None, "", []) and not rules.get("switch"):
        help_text = f"{help_text} (default: {default!r})"
    options: dict[str, Any] = {"dest": spec.name, "default": None, "help": help_text}
    if rules.get("switch"):
        options["action"] = "store_true"
    elif kind is bool:
        options.update(nargs="?", const=True, type=to_bool)  # `--cpu`, and `--cpu false` as before
    else:
        options.update(type=kind, choices=rules.get("choices"), nargs="+" if is_list else None)
    if rules.get("aliases") and kind is not bool:
        options["metavar"] = shown[-1].lstrip("-").replace("-", "_").upper()
    added = [parser.add_argument(*shown, **options)]
    if kind is bool:
        long_name = shown[-1]
        options = {"action": "store_false", "dest": spec.name, "default": None, "help": f"not {long_name}"}
        added.append(parser.add_argument("--no-" + long_name[2:], **options))
    return added
