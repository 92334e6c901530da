"""Naming tools (SERVER.TOOL), checking and typing their arguments."""

from __future__ import annotations

from typing import Any

import pytest

from tools.client import ToolError, ToolSpec
from tools.models import ToolServer
from tools.registry import argument_problems, coerce_arguments, resolve_tool, validate_arguments
from tools.selectors import discovered_tools

ADD = ToolSpec(
    name="add",
    description="Add two numbers.",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
)


@pytest.fixture
def calculator(db: None) -> ToolServer:
    return ToolServer.objects.create(
        name="calc", transport="stdio", command="demo", tools=[ADD.as_json()]
    )


def test_it_resolves_a_tool_by_its_qualified_name(calculator: ToolServer) -> None:
    server, spec = resolve_tool("calc.add")

    assert server == calculator
    assert spec == ADD


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("calc", r"'calc' is not a tool name \(SERVER\.TOOL\)"),
        (".add", "is not a tool name"),
        ("calc.", "is not a tool name"),
        ("other.add", "unknown tool server 'other'"),
        ("calc.divide", "unknown tool 'calc.divide'"),
    ],
)
def test_it_refuses_names_it_cannot_resolve(
    calculator: ToolServer, name: str, message: str
) -> None:
    with pytest.raises(ToolError, match=message):
        resolve_tool(name)


def test_a_disabled_server_resolves_no_tool(calculator: ToolServer) -> None:
    calculator.enabled = False
    calculator.save()

    with pytest.raises(ToolError, match="tool server 'calc' is disabled"):
        resolve_tool("calc.add")
    assert discovered_tools() == []


def test_a_server_never_discovered_says_so(db: None) -> None:
    ToolServer.objects.create(name="fresh", transport="stdio", command="demo")

    with pytest.raises(ToolError, match="has no discovered tools"):
        resolve_tool("fresh.add")


def test_the_tools_of_enabled_servers_are_listed_by_qualified_name(
    calculator: ToolServer,
) -> None:
    [tool] = discovered_tools()

    assert tool.as_json() == {
        "name": "calc.add",
        "description": "Add two numbers.",
        "input_schema": ADD.input_schema,
        "server": "calc",
    }


@pytest.mark.parametrize(
    ("arguments", "problems"),
    [
        ({"a": 1, "b": 2}, []),
        ({"a": 1}, ["$: 'b' is a required property"]),
        ({"a": "one", "b": 2}, ["a: 'one' is not of type 'number'"]),
        (
            {"a": True, "b": None},
            ["a: True is not of type 'number'", "b: None is not of type 'number'"],
        ),
    ],
)
def test_it_checks_arguments_against_the_schema(
    arguments: dict[str, Any], problems: list[str]
) -> None:
    assert argument_problems(ADD, arguments) == problems


def test_invalid_arguments_are_a_tool_error_listing_them() -> None:
    with pytest.raises(ToolError, match=r"arguments of 'add' refused: \$: 'b' is a required"):
        validate_arguments(ADD, {"a": 1})


def test_an_invalid_schema_is_reported_not_raised() -> None:
    broken = ToolSpec(name="odd", description="", input_schema={"type": "nonsense"})

    [problem] = argument_problems(broken, {})
    assert problem.startswith("$: the tool's input schema is invalid")


@pytest.mark.parametrize(
    ("schema", "text", "value"),
    [
        ({"type": "number"}, "3", 3),
        ({"type": "number"}, " 2.5 ", 2.5),
        ({"type": "integer"}, "7", 7),
        ({"type": "integer"}, "7.0", 7),
        ({"type": "boolean"}, "true", True),
        ({"type": "object"}, '{"k": 1}', {"k": 1}),
        ({"type": "array"}, "[1, 2]", [1, 2]),
        ({"type": "string"}, "3", "3"),
        ({"type": "number"}, "three", "three"),
        ({"type": "integer"}, "true", "true"),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "4", 4),
        ({}, "5", "5"),
    ],
)
def test_it_types_rendered_text_as_the_schema_asks(
    schema: dict[str, Any], text: str, value: Any
) -> None:
    spec = ToolSpec(
        name="t", description="", input_schema={"type": "object", "properties": {"x": schema}}
    )

    assert coerce_arguments(spec, {"x": text}) == {"x": value}
    assert type(coerce_arguments(spec, {"x": text})["x"]) is type(value)


def test_a_schema_that_cannot_be_used_is_a_problem_not_a_crash() -> None:
    unresolvable = ToolSpec(name="odd", description="", input_schema={"$ref": "#/nowhere"})
    assert argument_problems(unresolvable, {}) == [
        "$: the tool's input schema cannot be used (_WrappedReferencingError)"
    ]


def test_nan_is_not_a_number_argument() -> None:
    assert coerce_arguments(ADD, {"a": "NaN", "b": "2"}) == {"a": "NaN", "b": 2}
    assert argument_problems(ADD, coerce_arguments(ADD, {"a": "NaN", "b": "2"}))


def test_what_a_call_records_fits_the_database() -> None:
    from workflows.validators import storable

    record = {"arguments": {"a": float("nan"), "b\x00": [float("inf"), "x\ud800"]}, "n": 1.5}
    assert storable(record) == {"arguments": {"a": None, "b\ufffd": [None, "x\ufffd"]}, "n": 1.5}
