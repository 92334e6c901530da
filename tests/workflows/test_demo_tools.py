"""The calculate-with-tools demo: its tool step calls the demo MCP server (stdio, registered by
seed_demo), its calculator model asks for a tool call, and every path is walked."""

from __future__ import annotations

from typing import Any

import pytest

from tests.workflows.test_demo_recipes import demo, start, taken, walked
from workflows.demo.actors import CALCULATED_ANSWER

__all__ = ["demo"]

pytestmark = pytest.mark.django_db

SLUG = "calculate-with-tools"


def test_the_demo_adds_with_the_server_and_checks_with_the_calculators_tool_call(
    demo: Any,
) -> None:
    run = start(demo, SLUG, {"a": 2, "b": 3})

    assert (run.status, run.outcome, run.error) == ("succeeded", "approved", "")
    assert walked(run) == ["add", "explain"]
    assert taken(run) == ["sum_found", "checked_with_tools"]
    add, explain = run.steps.order_by("seq")
    assert add.response == "5.0"
    assert add.details["tool_calls"][0]["arguments"] == {"a": 2, "b": 3}
    assert explain.prompt.startswith("The sum of 2 and 3 is 5.0.")
    assert explain.response == CALCULATED_ANSWER
    calls = explain.details["tool_calls"]
    assert [(c["tool"], c["arguments"], c["result"]) for c in calls] == [
        ("demo.multiply", {"a": 2, "b": 21}, "42.0")
    ]
    reasons = [e.reason for e in explain.evaluations.order_by("order")]
    assert reasons == ["called demo.multiply once"]


@pytest.mark.parametrize(
    ("script", "path", "branches", "outcome"),
    [
        pytest.param(
            {"tool.demo.add": ["@error: the calculator is unplugged"]},
            ["add", "apologise"],
            ["calculator_failed", "said"],
            "ended",
            id="the-calculator-fails",
        ),
        pytest.param(
            {"tool.demo.add": ["5000"]},
            ["add", "too_big"],
            ["big_sum", "said"],
            "ended",
            id="a-big-sum",
        ),
        pytest.param(
            {"tool.demo.add": ["5"], "calculator": ["I know it without tools."]},
            ["add", "explain"],
            ["sum_found", "answered_alone"],
            "ended",
            id="the-model-answers-without-tools",
        ),
    ],
)
def test_the_calculate_with_tools_paths(
    demo: Any, script: dict[str, Any], path: list[str], branches: list[str], outcome: str
) -> None:
    run = start(demo, SLUG, {"a": 2, "b": 3}, **script)

    assert walked(run) == path
    assert taken(run) == branches
    assert run.outcome == outcome, run.error
