"""Structured output: an llm step's `output_schema`, the JSON Schema its answer must meet.

The schema is checked when the recipe is read (`schema_problems`): a valid JSON Schema
(draft 2020-12 unless its `$schema` names another), an object at the top (its fields become
the facts), references within itself only, and patterns RE2 compiles. An answer is read as
the engine reads JSON in answers (`answers.py`: reasoning skipped, a fenced block or an
object inside prose) and validated with `jsonschema` (`check_answer`); a `pattern` is
matched with RE2, in bounded time, as every user pattern is (`regex.py`).

The runner sends the schema to servers that enforce it, asks again with the errors as
feedback (`feedback`) up to `output_schema_attempts` answers, and records how it ended as a
`SchemaCheck`, which the `schema_valid` condition reads.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import (  # type: ignore[import-untyped]
    Draft202012Validator,
    SchemaError,
    ValidationError,
)
from jsonschema.validators import extend, validator_for  # type: ignore[import-untyped]

from workflows.engine.answers import json_object, json_objects, shorten, strip_thinking
from workflows.engine.errors import RegexError
from workflows.engine.regex import compile_pattern

DEFAULT_ATTEMPTS = 2
MAX_ATTEMPTS = 5
MAX_SCHEMA_CHARS = 50_000
# The errors an answer's check keeps (the feedback and the reasons show them).
MAX_ERRORS = 5
# OpenAI's rule for a response format's name.
MAX_NAME_CHARS = 64
NOT_JSON = "the answer holds no JSON object"


@dataclass(frozen=True, slots=True)
class SchemaCheck:
    """How a step's answers met its schema: whether the last one did, its first errors
    (`path: message`), and how many answers were asked for."""

    valid: bool
    errors: tuple[str, ...] = ()
    attempts: int = 1

    def as_json(self) -> dict[str, Any]:
        """Return the check as a step's details keep it."""
        return {"valid": self.valid, "errors": list(self.errors), "attempts": self.attempts}

    @classmethod
    def from_json(cls, data: object) -> SchemaCheck | None:
        """Return the check a step's details keep (None: they keep none, or not as one)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("valid"), bool):
            return None
        errors = data.get("errors")
        attempts = data.get("attempts")
        return cls(
            valid=data["valid"],
            errors=tuple(str(e) for e in errors) if isinstance(errors, list) else (),
            attempts=attempts if isinstance(attempts, int) and attempts > 0 else 1,
        )

    def reason(self) -> str:
        """Say how the check ended, for a branch's reason or the step's error."""
        tries = f"{self.attempts} answer{'s' if self.attempts != 1 else ''}"
        if self.valid:
            return f"the answer met the output schema ({tries})"
        return f"no answer met the output schema in {tries}: {'; '.join(self.errors)}"


# -- reading the schema --------------------------------------------------------------------


def schema_problems(schema: object) -> list[tuple[str, str]]:
    """Return each problem of an output schema as (path below the schema, message)."""
    if not isinstance(schema, Mapping):
        return [("", f"must be a JSON Schema (an object), got {type(schema).__name__}")]
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError, RecursionError):
        return [("", "must be JSON")]
    if size > MAX_SCHEMA_CHARS:
        return [("", f"is {size} characters of JSON, at most {MAX_SCHEMA_CHARS}")]
    if schema.get("type") != "object":
        return [("type", "must be \"object\": the answer's fields become the run's facts")]
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        return [(_dotted(exc.absolute_path), exc.message)]
    try:
        return list(_keyword_problems(schema, ""))
    except RecursionError:
        return [("", "is nested too deeply")]


def _keyword_problems(node: object, path: str) -> Iterator[tuple[str, str]]:
    """Yield what the checker refuses: outside references, patterns RE2 cannot run."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from _keyword_problems(item, f"{path}[{i}]")
        return
    if not isinstance(node, Mapping):
        return
    for key, value in node.items():
        here = f"{path}.{key}" if path else str(key)
        if key in ("$ref", "$dynamicRef") and isinstance(value, str) and not value.startswith("#"):
            yield here, "only references within the schema (#/...) are followed"
        elif key == "patternProperties" and isinstance(value, Mapping):
            yield here, "is not supported (its patterns would run unbounded); use propertyNames"
        elif key == "pattern" and isinstance(value, str):
            try:
                compile_pattern(value)
            except RegexError as exc:
                yield here, f"pattern does not compile: {exc}"
        else:
            yield from _keyword_problems(value, here)


def _dotted(parts: Any) -> str:
    return ".".join(str(part) for part in parts)


# -- checking answers ----------------------------------------------------------------------


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    """Match `pattern` with RE2: a model's text must not make a worker backtrack for hours."""
    if validator.is_type(instance, "string") and compile_pattern(pattern).search(instance) is None:
        yield ValidationError(f"{shorten(instance)!r} does not match {pattern!r}")


@functools.lru_cache(maxsize=128)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    base = validator_for(schema, default=Draft202012Validator)
    return extend(base, {"pattern": _pattern})(schema)


def read_answer(answer: str) -> dict[str, object] | None:
    """Return the JSON object an answer gives: leading (bare or fenced), else the first one
    inside its prose; reasoning (`<think>`) skipped. None: it gives none."""
    text = strip_thinking(answer)
    found = json_object(text)
    if found is not None:
        return found
    objects = json_objects(text)
    return objects[0] if objects else None


def check_answer(
    schema: Mapping[str, Any], answer: str
) -> tuple[dict[str, object] | None, list[str]]:
    """Return the answer's JSON object and each way it breaks `schema` (`path: message`,
    the first MAX_ERRORS, then how many more); no errors: it meets the schema."""
    value = read_answer(answer)
    if value is None:
        return None, [NOT_JSON]
    validator = _validator(json.dumps(schema, sort_keys=True))
    errors = sorted(validator.iter_errors(value), key=lambda e: (list(e.absolute_path), e.message))
    problems = [f"{_dotted(e.absolute_path) or '$'}: {e.message}" for e in errors]
    if len(problems) > MAX_ERRORS:
        problems = [*problems[:MAX_ERRORS], f"… and {len(problems) - MAX_ERRORS} more"]
    return value, problems


def feedback(errors: list[str] | tuple[str, ...]) -> str:
    """Return what the model is told when its answer did not meet the schema."""
    return (
        f"Your previous answer did not match the required JSON Schema: {'; '.join(errors)}. "
        "Answer again with only a JSON object that matches the schema."
    )


def instruction(schema: Mapping[str, Any]) -> str:
    """Return the line a prompt ends with for a server that does not enforce the schema."""
    return "Answer with only a JSON object that matches this JSON Schema:\n" + json.dumps(
        schema, ensure_ascii=False
    )


def wire_name(step_key: str) -> str:
    """Return the name a response format carries: the step's key (OpenAI allows 64 of
    letters, digits, `_` and `-`, as step keys are written)."""
    return step_key[:MAX_NAME_CHARS]


def strict_compatible(schema: object) -> bool:
    """Tell whether OpenAI's strict mode takes the schema: every object lists all its
    properties as required and allows no others (strict mode refuses any other schema)."""
    if isinstance(schema, list):
        return all(strict_compatible(item) for item in schema)
    if not isinstance(schema, Mapping):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        if schema.get("additionalProperties") is not False or not isinstance(properties, Mapping):
            return False
        if set(schema.get("required") or ()) != set(properties):
            return False
    children: list[object] = []
    for key in ("properties", "$defs", "definitions"):
        value = schema.get(key)
        if isinstance(value, Mapping):
            children.extend(value.values())
    children += [schema[key] for key in ("items", "anyOf", "prefixItems") if key in schema]
    return all(strict_compatible(child) for child in children)
