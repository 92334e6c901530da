"""Check a run's inputs against the recipe's input schema."""

from __future__ import annotations

import json
import math
from typing import Any

from workflows.engine import files
from workflows.engine.inputs import input_type_problem

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


class InputsInvalid(Exception):
    """Inputs that do not fit the recipe; `errors` lists every `inputs.NAME: message`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def check_inputs(schema: dict[str, dict[str, Any]], inputs: object) -> dict[str, Any]:
    """Return the inputs with defaults filled in, or raise InputsInvalid listing every problem."""
    if not isinstance(inputs, dict):
        raise InputsInvalid(["inputs: must be an object of name: value"])
    errors = []
    checked: dict[str, Any] = {}
    for name, spec in schema.items():
        type_name = spec.get("type", "string")
        if name not in inputs or inputs[name] is None:
            if spec.get("default") is not None:
                checked[name] = spec["default"]
            elif spec.get("required"):
                errors.append(f"inputs.{name}: required")
            continue
        value = inputs[name]
        if files.is_file_type(type_name):
            # By now a ref to a stored file (`run_files.take_uploads` turned the upload into one).
            if problem := input_type_problem(type_name, value):
                errors.append(f"inputs.{name}: {problem}")
            else:
                checked[name] = value
            continue
        expected = _TYPES.get(type_name, (object,))
        # bool is an int in Python; a number input must not accept true/false.
        if not isinstance(value, expected) or (isinstance(value, bool) and type_name != "boolean"):
            errors.append(
                f"inputs.{name}: must be {'an' if type_name[0] in 'aeio' else 'a'} {type_name}"
            )
            continue
        if isinstance(value, float) and not math.isfinite(value):
            errors.append(f"inputs.{name}: must be a finite number")
            continue
        checked[name] = value
    errors += [
        f"inputs.{name}: not an input of this recipe" for name in inputs if name not in schema
    ]
    if errors:
        raise InputsInvalid(errors)
    return checked


def coerce_cli_value(schema: dict[str, Any], raw: str) -> Any:
    """Turn a `--input k=v` string into the input's declared type (for the CLI)."""
    type_name = schema.get("type", "string")
    if type_name == "string":
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw  # check_inputs reports the wrong type
