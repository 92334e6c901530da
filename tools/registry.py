"""Name a tool (`SERVER.TOOL`) and check what is sent to it.

`resolve_tool` finds the server and the tool in the cache of its last discovery;
`validate_arguments` checks arguments against the tool's JSON schema before any call, and
`coerce_arguments` turns rendered template text into the JSON types the schema asks for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import SchemaError
from jsonschema.validators import validator_for

from workflows.engine import strict_json

from .client import ToolError, ToolSpec
from .models import ToolServer
from .selectors import tool_server

# Shown per call: more problems than this are summarised.
MAX_PROBLEMS = 10


def split_tool_name(qualified: str) -> tuple[str, str]:
    """Split `SERVER.TOOL` into its parts, or raise ToolError if it is not that shape."""
    server, dot, tool = qualified.partition(".")
    if not dot or not server or not tool:
        raise ToolError(f"'{qualified}' is not a tool name (SERVER.TOOL)")
    return server, tool


def resolve_tool(qualified: str) -> tuple[ToolServer, ToolSpec]:
    """Return the server and the tool named `SERVER.TOOL`; ToolError if either is unknown,
    the server disabled, or the tool not among those it listed."""
    server_name, tool_name = split_tool_name(qualified)
    server = tool_server(server_name)
    if server is None:
        raise ToolError(f"unknown tool server '{server_name}' (in '{qualified}')")
    if not server.enabled:
        raise ToolError(f"tool server '{server_name}' is disabled")
    for entry in server.tools if isinstance(server.tools, list) else []:
        if isinstance(entry, dict) and entry.get("name") == tool_name:
            return server, ToolSpec.from_json(entry)
    if not server.tools:
        raise ToolError(
            f"unknown tool '{qualified}': server '{server_name}' has no discovered tools"
            " (discover them first)"
        )
    raise ToolError(f"unknown tool '{qualified}'")


def argument_problems(spec: ToolSpec, arguments: Mapping[str, Any]) -> list[str]:
    """Return each way `arguments` break the tool's input schema, as `path: message`."""
    schema = spec.input_schema or {"type": "object"}
    try:
        validator_class = validator_for(schema)
        validator_class.check_schema(schema)
        validator = validator_class(schema)
        errors = sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.path))
    except SchemaError as exc:
        return [f"$: the tool's input schema is invalid ({exc.message})"]
    except Exception as exc:  # an unresolvable $ref, a $schema of the wrong type...
        return [f"$: the tool's input schema cannot be used ({type(exc).__name__})"]
    problems = []
    for error in errors:
        path = ".".join(str(part) for part in error.absolute_path)
        problems.append(f"{path or '$'}: {error.message}")
    if len(problems) > MAX_PROBLEMS:
        problems = [*problems[:MAX_PROBLEMS], f"… and {len(problems) - MAX_PROBLEMS} more"]
    return problems


def validate_arguments(spec: ToolSpec, arguments: Mapping[str, Any]) -> None:
    """Raise ToolError listing every way `arguments` break the tool's input schema."""
    problems = argument_problems(spec, arguments)
    if problems:
        raise ToolError(f"arguments of '{spec.name}' refused: " + "; ".join(problems))


def coerce_arguments(spec: ToolSpec, rendered: Mapping[str, Any]) -> dict[str, Any]:
    """Turn rendered text into the JSON type each argument's schema asks for.

    "3" becomes 3 for a number, "true" true for a boolean, '{"a": 1}' an object for an
    object or array; text that does not parse stays text (validation then says why).
    """
    properties = spec.input_schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    coerced: dict[str, Any] = {}
    for name, value in rendered.items():
        schema = properties.get(name)
        if isinstance(value, str) and isinstance(schema, dict):
            coerced[name] = _coerce(value, _types(schema))
        else:
            coerced[name] = value
    return coerced


def _types(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    # anyOf / oneOf of simple types, as schemas generated from Optional[...] are.
    kinds: list[str] = []
    for option in [*schema.get("anyOf", []), *schema.get("oneOf", [])]:
        if isinstance(option, dict):
            kinds += _types(option)
    return kinds


def _coerce(text: str, kinds: list[str]) -> Any:
    if not kinds or "string" in kinds:
        return text
    stripped = text.strip()
    try:
        value = strict_json(stripped)
    except ValueError:
        return text
    checks = {
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "null": lambda v: v is None,
    }
    if any(checks.get(kind, lambda v: False)(value) for kind in kinds):
        return value
    if "integer" in kinds and isinstance(value, float) and value.is_integer():
        return int(value)
    return text
