"""`http_status`: the status of an http step's response, as a status, a class or a range."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import branch, condition, graph
from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, uncovered
from workflows.engine import RecipeInvalid, RunState, StepResult, decide, lint_recipe
from workflows.engine.conditions.http_status import CONDITION_TYPE, status_range


def status(op: str, value: Any) -> dict[str, Any]:
    return {"type": "http_status", "operator": op, "value": value}


CASES: list[Case] = [
    (status("is", 200), "", {"http_status": 200}, True, "status 200 is 200"),
    (status("is", "2xx"), "", {"http_status": 204}, True, "status 204 is 2xx"),
    (status("is", "4xx"), "", {"http_status": 503}, False, "status 503 is not 4xx"),
    (status("is", "500-504"), "", {"http_status": 502}, True, "status 502 is 500-504"),
    (status("is", "500-504"), "", {"http_status": 505}, False, "status 505 is not 500-504"),
    (status("is_not", "2xx"), "", {"http_status": 404}, True, "status 404 is not 2xx"),
    (status("is_not", 404), "", {"http_status": 404}, False, "status 404 is 404"),
    (status("equals", "404"), "", {"http_status": 404}, True, "status 404 is 404"),
    (status("in", "3xx"), "", {"http_status": 301}, True, "status 301 is 3xx"),
    (status("not_equals", 200), "", {"http_status": 201}, True, "status 201 is not 200"),
    (status("not_in", "5xx"), "", {"http_status": 500}, False, "status 500 is 5xx"),
    (
        status("is_not", "2xx"),
        "",
        {"error": "url refused"},
        False,
        "no HTTP status: the step got no response (url refused)",
    ),
    (status("is", "2xx"), "", {}, False, "no HTTP status: the step got no response"),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_evaluates_each_operator_with_its_reason(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    assert uncovered(CONDITION_TYPE, CASES) == []


@pytest.mark.parametrize(
    ("value", "bounds"),
    [(404, (404, 404)), ("404", (404, 404)), ("2XX", (200, 299)), ("400 - 499", (400, 499))],
)
def test_it_reads_a_status_a_class_or_a_range(value: Any, bounds: tuple[int, int]) -> None:
    assert status_range(value) == bounds


@pytest.mark.parametrize("value", [None, True, 99, 600, "6xx", "2xx,3xx", "500-400", "ok", 2.5])
def test_it_refuses_a_value_that_names_no_status(value: Any) -> None:
    with pytest.raises(RecipeInvalid) as raised:
        condition(status("is", value))
    assert "when.value: must be a status (404), a class" in str(raised.value)


def fetch(*branches: dict[str, Any]) -> dict[str, Any]:
    return {
        "key": "fetch",
        "name": "Fetch",
        "kind": "http",
        "url": "https://api.example.com/{topic}",
        "branches": list(branches),
    }


def test_an_http_status_branch_handles_a_failed_request_and_a_default_does_not() -> None:
    handled = graph(fetch(branch("gone", 1, status("is", "4xx"), "ERROR_HANDLER", "@end")))
    state = RunState.start(handled, {"topic": "x"})
    failed = StepResult("fetch", error="GET … answered 404", http_status=404)

    decision = decide(handled, state, failed)

    assert (decision.kind, decision.branch) == ("end", "gone")
    unhandled = graph(fetch(branch("any", 1, None, "CONTINUE", "@complete")))
    assert decide(unhandled, RunState.start(unhandled, {"topic": "x"}), failed).kind == "fail"


def test_lint_warns_about_a_status_asked_of_a_step_that_sends_no_request() -> None:
    llm = {
        "key": "ask",
        "name": "Ask",
        "actor": "writer",
        "prompt": "Hi",
        "branches": [branch("ok", 1, status("is", "2xx"))],
    }
    warnings = lint_recipe(graph(llm))
    assert (
        "steps[0].branches[0].when: http_status is never true here: step 'ask' is llm, "
        "not an http step"
    ) in warnings
