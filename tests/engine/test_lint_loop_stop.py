"""Lint: a loop that ends only when a model's figure says so (adaptive mode's progress check)."""

from __future__ import annotations

from typing import Any

from tests.engine.builders import branch, graph, step
from workflows.engine import lint_recipe

DONE = {"type": "field_compare", "field": "progress", "operator": "greater_equal", "value": 100}
NOT_DONE = {"type": "field_compare", "field": "progress", "operator": "less_than", "value": 100}
CRITERIA = {"type": "criteria_met", "operator": "all", "intent_step": "understand"}


def loop(*exits: dict[str, Any]) -> list[str]:
    g = graph(
        step("understand", kind="intent", prompt="{topic}"),
        step("deliver"),
        step("check", *exits, branch("more", 9, NOT_DONE, target="deliver")),
    )
    return [w for w in lint_recipe(g) if "loops back" in w]


def test_it_warns_about_a_loop_that_only_a_progress_figure_ends() -> None:
    [warning] = loop(branch("done", 1, DONE, target="@complete"))
    assert warning.startswith("steps[2].branches[1]: loops back to 'deliver' with no bound")
    assert "ends only when 'done' holds, on a figure a model gives" in warning
    assert "criteria_met" in warning


def test_a_judges_score_as_the_only_exit_is_warned_about_too() -> None:
    score = {"type": "ai_evaluation", "operator": "greater_equal", "value": 9, "prompt": "0-10"}
    assert len(loop(branch("done", 1, score, target="@complete"))) == 1


def test_an_exit_on_criteria_met_or_attempts_or_a_default_stops_the_loop() -> None:
    assert loop(branch("done", 1, CRITERIA, target="@complete")) == []
    either = {"type": "or", "conditions": [DONE, CRITERIA]}
    assert loop(branch("done", 1, either, target="@complete")) == []
    assert loop(branch("done", 1, DONE, target="@complete"), branch("d", 10, target="@end")) == []
