"""Check run inputs against a recipe's input schema, applying defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.errors import InputError
from workflows.engine.files import is_file_type, ref_problem

_PYTHON_TYPES: dict[str, tuple[type | tuple[type, ...], str]] = {
    "string": (str, "a string"),
    "number": ((int, float), "a number"),
    "integer": (int, "an integer"),
    "boolean": (bool, "a boolean"),
    "object": (dict, "an object"),
    "array": (list, "an array"),
}


def input_type_problem(kind: str, value: object) -> str | None:
    """Return why `value` is not of the input type `kind`, or None when it is."""
    if is_file_type(kind):
        return ref_problem(kind, value)
    wanted, described = _PYTHON_TYPES[kind]
    # bool is an int in Python, but `true` is not a number in a recipe.
    if isinstance(value, bool) and kind != "boolean":
        return f"must be {described}, got {value!r}"
    if not isinstance(value, wanted):
        return f"must be {described}, got {value!r}"
    return None


def _coerce(kind: str, value: object) -> object:
    # Inputs typed on a command line arrive as text: read them as the declared type.
    if not isinstance(value, str):
        return value
    text = value.strip()
    if kind == "boolean" and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            return value
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            return value
        return int(number) if number.is_integer() and "." not in text else number
    return value


def resolve_inputs(
    schema: Mapping[str, Mapping[str, Any]], inputs: Mapping[str, object]
) -> dict[str, object]:
    """Return `inputs` checked against `schema`, with defaults filled in.

    Text is read as the declared type (`"3"` for an integer). Raise InputError listing every
    missing, unknown or mistyped input as `inputs.NAME: message`.
    """
    errors: list[str] = []
    resolved: dict[str, object] = {}
    for name in inputs:
        if name not in schema:
            errors.append(f"inputs.{name}: unknown input; declared: {', '.join(schema) or 'none'}")
    for name, spec in schema.items():
        kind = str(spec.get("type", "string"))
        if inputs.get(name) is not None:  # null is the same as leaving the input out
            value = _coerce(kind, inputs[name])
            problem = input_type_problem(kind, value)
            if problem:
                errors.append(f"inputs.{name}: {problem}")
            else:
                resolved[name] = value
        elif spec.get("default") is not None:
            resolved[name] = spec["default"]
        elif spec.get("required"):
            errors.append(f"inputs.{name}: is required")
    if errors:
        raise InputError(errors)
    return resolved
