"""`tool_called`, `tool_error`, `tool_result`: a step's recorded tool calls, with every operator."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import branch, condition, graph, step
from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, uncovered
from workflows.engine import (
    EvalContext,
    RecipeInvalid,
    RunState,
    StepResult,
    decide,
    evaluate_condition,
    lint_recipe,
)
from workflows.engine.conditions.tool_called import CONDITION_TYPE as CALLED
from workflows.engine.conditions.tool_error import CONDITION_TYPE as ERROR
from workflows.engine.conditions.tool_result import CONDITION_TYPE as RESULT


def made(*calls: dict[str, Any]) -> dict[str, Any]:
    """Return the context of a step that made these calls."""
    return {"tool_calls": [{"is_error": False, "truncated": False, **c} for c in calls]}


ADD_5 = {"tool": "demo.add", "arguments": {"a": 2, "b": 3}, "result": '{"total": 5}'}
ADD_TEXT = {"tool": "demo.add", "result": "5.0"}
WORDS = {"tool": "demo.word_count", "result": '{"words": 3, "label": "short"}'}
DOWN = {"tool": "demo.add", "result": "", "is_error": True, "error": "server down"}
OWN_ERROR = {"tool": "demo.add", "result": "bad number", "is_error": True}


def called(op: str, tool: str | None = None) -> dict[str, Any]:
    return {"type": "tool_called", "operator": op, **({"tool": tool} if tool else {})}


def failed(op: str, tool: str | None = None) -> dict[str, Any]:
    return {"type": "tool_error", "operator": op, **({"tool": tool} if tool else {})}


def result(op: str, value: Any, tool: str = "demo.add", field: str | None = None) -> dict:
    when = {"type": "tool_result", "operator": op, "value": value, "tool": tool}
    return when | ({"field": field} if field else {})


CALLED_CASES: list[Case] = [
    (called("called", "demo.add"), "", made(ADD_5, ADD_5), True, "called demo.add 2 times"),
    (called("called", "demo.add"), "", made(WORDS), False, "did not call demo.add"),
    (called("called"), "", made(WORDS), True, "called tools once"),
    (called("not_called", "demo.add"), "", made(WORDS), True, "did not call demo.add"),
    (called("not_called"), "", made(ADD_5), False, "called tools once"),
    (called("called"), "", {}, False, "step could call no tools"),
    (called("not_called"), "", {}, True, "step could call no tools"),
]
ERROR_CASES: list[Case] = [
    (failed("failed", "demo.add"), "", made(ADD_5, DOWN), True, "demo.add failed: server down"),
    (failed("failed"), "", made(OWN_ERROR), True, "demo.add failed: bad number"),
    (failed("failed"), "", made(ADD_5), False, "the call to tools succeeded"),
    (
        failed("succeeded", "demo.add"),
        "",
        made(ADD_5, ADD_5),
        True,
        "all 2 calls to demo.add succeeded",
    ),
    (failed("succeeded", "demo.add"), "", made(DOWN), False, "demo.add failed: server down"),
    (failed("succeeded", "demo.add"), "", made(WORDS), False, "did not call demo.add"),
    (failed("failed"), "", {}, False, "step could call no tools"),
]
RESULT_CASES: list[Case] = [
    (
        result("greater_equal", 3, field="total"),
        "",
        made(ADD_5),
        True,
        "tool demo.add field total 5 >= 3",
    ),
    (
        result("greater_equal", 6, field="total"),
        "",
        made(ADD_5),
        False,
        "tool demo.add field total 5 not >= 6",
    ),
    (result("less_than", 6), "", made(ADD_TEXT), True, "tool demo.add result 5 < 6"),
    (result("less_than", 5), "", made(ADD_TEXT), False, "tool demo.add result 5 not < 5"),
    (result("less_equal", 5), "", made(ADD_TEXT), True, "tool demo.add result 5 <= 5"),
    (result("less_equal", 4), "", made(ADD_TEXT), False, "tool demo.add result 5 not <= 4"),
    (result("greater_than", 4), "", made(ADD_TEXT), True, "tool demo.add result 5 > 4"),
    (result("greater_than", 5), "", made(ADD_TEXT), False, "tool demo.add result 5 not > 5"),
    (
        result("equals", "short", "demo.word_count", "label"),
        "",
        made(WORDS),
        True,
        'tool demo.word_count field label "short" == "short"',
    ),
    (
        result("equals", 4, "demo.word_count", "words"),
        "",
        made(WORDS),
        False,
        "tool demo.word_count field words 3 != 4",
    ),
    (
        result("not_equals", 4, "demo.word_count", "words"),
        "",
        made(WORDS),
        True,
        "tool demo.word_count field words 3 != 4",
    ),
    (
        result("not_equals", 3, "demo.word_count", "words"),
        "",
        made(WORDS),
        False,
        "tool demo.word_count field words 3 == 3",
    ),
    (result("greater_than_or_equal", 5), "", made(ADD_TEXT), True, "tool demo.add result 5 >= 5"),
    (result("less_than_or_equal", 5), "", made(ADD_TEXT), True, "tool demo.add result 5 <= 5"),
    (
        result("greater_equal", 1, field="total"),
        "",
        made(ADD_5, DOWN),
        True,
        "tool demo.add field total 5 >= 1",
    ),
    (
        result("greater_equal", 1, field="nope"),
        "",
        made(ADD_5),
        False,
        "tool demo.add field nope missing",
    ),
    (
        result("greater_equal", 1, field="total"),
        "",
        made(ADD_TEXT),
        False,
        "tool demo.add result is not a JSON object",
    ),
    (result("greater_equal", 1), "", made(DOWN), False, "no result of demo.add"),
    (result("greater_equal", 1), "", {}, False, "step could call no tools"),
]


@pytest.mark.parametrize(CASE_FIELDS, CALLED_CASES + ERROR_CASES + RESULT_CASES)
def test_it_evaluates_each_operator_with_its_reason(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    assert uncovered(CALLED, CALLED_CASES) == []
    assert uncovered(ERROR, ERROR_CASES) == []
    assert uncovered(RESULT, RESULT_CASES) == []


def test_the_calls_are_indexed_by_tool_only_when_a_condition_asks() -> None:
    ctx = EvalContext(text="", tool_calls=[ADD_5])
    assert ctx._tools is None
    evaluated_once = condition(called("called", "demo.add"))
    assert evaluate_condition(evaluated_once, ctx) == (True, "called demo.add once")
    assert ctx._tools is not None and ctx._tools._by_tool == {"demo.add": [ADD_5]}


@pytest.mark.parametrize(
    ("when", "error"),
    [
        (called("called", "add"), "when.tool: must be a tool name SERVER.TOOL"),
        ({"type": "tool_result", "operator": "equals", "value": 1}, "when.tool: is required"),
        (result("greater_than", "many"), "when.value"),
        ({"type": "tool_error", "operator": "broken"}, "when.operator: unknown operator"),
    ],
)
def test_it_refuses_a_bad_tool_condition(when: dict, error: str) -> None:
    with pytest.raises(Exception) as raised:
        condition(when)
    assert error in str(raised.value)


def tool_step(*branches: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return step(
        "add",
        *branches,
        kind="tool",
        actor=None,
        prompt="",
        tool="demo.add",
        arguments={"a": "{topic}", "b": "2"},
        **fields,
    )


def test_a_tool_error_branch_handles_a_failed_tool_step_and_others_do_not() -> None:
    handled = graph(
        tool_step(branch("broke", 1, failed("failed"), "CONTINUE", "after")), step("after")
    )
    result_ = StepResult("add", error="demo.add failed: down", tool_calls=[DOWN])
    decision = decide(handled, RunState(), result_)
    assert (decision.kind, decision.next_step) == ("goto", "after")
    assert decision.evaluations[0].reason == "demo.add failed: server down"

    unhandled = graph(tool_step(), step("after"))
    decision = decide(unhandled, RunState(), result_)
    assert decision.kind == "fail"
    assert decision.reason == "step 'add' failed: demo.add failed: down"


def test_it_reads_a_tool_step_and_an_llm_steps_tools() -> None:
    parsed = graph(tool_step(), step("ask", tools=["demo.add", "demo.multiply"], max_tool_calls=3))
    add, ask = parsed.steps
    assert (add.kind, add.tool, dict(add.arguments)) == (
        "tool",
        "demo.add",
        {"a": "{topic}", "b": "2"},
    )
    assert (ask.tools, ask.max_tool_calls, ask.max_tool_seconds) == (
        ("demo.add", "demo.multiply"),
        3,
        60,
    )


@pytest.mark.parametrize(
    ("fields", "errors"),
    [
        (
            {"tools": "demo.add"},
            ["steps[0].tools: must be a list of tool names SERVER.TOOL, got str"],
        ),
        ({"tools": ["demo.add", "demo.add"]}, ["steps[0].tools[1]: demo.add is listed twice"]),
        (
            {"tools": ["demo__x.y", "demo.x__y"]},
            [
                "steps[0].tools[1]: demo.x__y and demo__x.y reach the model under the same "
                "function name demo__x__y"
            ],
        ),
        (
            {"tools": ["demo." + "x" * 70 + "1", "demo." + "x" * 70 + "2"]},
            ["steps[0].tools[1]: demo." + "x" * 70 + "2 and demo."],
        ),
        ({"tools": ["add"]}, ["steps[0].tools[0]: must be a tool name SERVER.TOOL"]),
        (
            {"max_tool_calls": 0},
            ["steps[0].max_tool_calls: must be a whole number from 1 to 50, got 0"],
        ),
        (
            {"max_tool_calls": 51},
            ["steps[0].max_tool_calls: must be a whole number from 1 to 50, got 51"],
        ),
        (
            {"max_tool_seconds": True},
            ["steps[0].max_tool_seconds: must be a whole number from 1 to 3600"],
        ),
        ({"tool": "demo.add"}, ["steps[0].tool: an llm step has no tool"]),
    ],
)
def test_it_refuses_bad_tool_fields_of_an_llm_step(fields: dict, errors: list[str]) -> None:
    with pytest.raises(RecipeInvalid) as raised:
        graph(step("ask", **fields))
    assert len(raised.value.errors) == len(errors)
    for got, want in zip(raised.value.errors, errors, strict=True):
        assert got.startswith(want)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"tool": None}, "steps[0].tool: is required: the tool to call, as SERVER.TOOL"),
        ({"tool": "demo"}, "steps[0].tool: must be a tool name SERVER.TOOL"),
        ({"arguments": {"a": 3}}, "steps[0].arguments.a: must be a template (text), got int"),
        ({"arguments": {"a": "{nope}"}}, "steps[0].arguments.a: unknown template name 'nope'"),
        ({"arguments": "a=1"}, "steps[0].arguments: must be an object, got str"),
        ({"tools": ["demo.add"]}, "steps[0].tools: a tool step has no tools"),
    ],
)
def test_it_refuses_a_bad_tool_step(fields: dict, error: str) -> None:
    doc = tool_step()
    doc.update(fields)
    if doc["tool"] is None:
        del doc["tool"]
    with pytest.raises(RecipeInvalid) as raised:
        graph(doc)
    assert any(e.startswith(error) for e in raised.value.errors), raised.value.errors


def test_lint_warns_of_a_tool_condition_on_a_step_that_cannot_call_the_tool() -> None:
    parsed = graph(
        step("plain", branch("b", 1, called("called"))),
        step("ask", branch("b", 1, failed("failed", "demo.multiply")), tools=["demo.add"]),
    )
    warnings = lint_recipe(parsed)
    assert any("the step calls no tools, so tool_called never holds" in w for w in warnings)
    assert any("the step cannot call demo.multiply (it calls demo.add)" in w for w in warnings)
