"""Equal priorities (ordered by position), the priority bands, and the lint rules on both."""

from __future__ import annotations

import pytest

from tests.engine.builders import branch, graph, step
from workflows.engine import RunState, StepResult, decide, lint_notes, lint_recipe
from workflows.engine.priority_bands import band_of, describe

SHORT = {"type": "length_check", "operator": "less_than", "value": 200}
LONG = {"type": "length_check", "operator": "greater_equal", "value": 10}
TIMEOUT = {"type": "execution_timeout", "operator": "equals", "value": True}


def test_equal_priorities_are_accepted_and_kept_in_document_order() -> None:
    g = graph(
        step(
            "a",
            branch("later", 3, LONG, target="b"),
            branch("first", 1, SHORT, target="b"),
            branch("earlier", 3, LONG, target="@end"),
        ),
        step("b"),
    )
    assert [b.name for b in g.steps[0].branches] == ["first", "later", "earlier"]


def test_of_two_branches_at_one_priority_the_first_written_is_taken() -> None:
    g = graph(
        step("a", branch("one", 3, LONG, target="b"), branch("two", 3, LONG, target="@end")),
        step("b"),
    )
    decision = decide(g, RunState.start(g, {"topic": "t"}), StepResult("a", response="x" * 50))
    assert (decision.branch, decision.next_step) == ("one", "b")


def test_lint_notes_equal_priorities() -> None:
    g = graph(
        step("a", branch("one", 3, SHORT, target="b"), branch("two", 3, LONG, target="@end")),
        step("b"),
    )
    assert lint_recipe(g) == [
        "steps[0].branches[1].priority: priority 3 also has 'one'; equal priorities are "
        "evaluated in document order, so this branch comes after it"
    ]


def test_lint_warns_when_a_failure_is_caught_first_by_a_branch_that_does_not_handle_it() -> None:
    g = graph(
        step(
            "a",
            branch(
                "again",
                1,
                None,
                "REQUEST_MORE_DETAIL",
                "@repeat",
                params={"retry_suffix": "More.", "max_retries": 2},
            ),
            branch("model_timeout", 5, TIMEOUT, "ERROR_HANDLER", "b"),
        ),
        step("b"),
    )
    assert (
        "steps[0].branches[1]: a failure of the step never reaches this branch: 'again' "
        "(priority 1) holds first and does not handle a failure, so the run fails there"
    ) in lint_recipe(g)


def test_lint_does_not_warn_about_failures_when_answer_conditions_come_first() -> None:
    # The note's order: "too short" first is fine, it is not applicable to a failed step.
    g = graph(
        step(
            "a",
            branch(
                "story_too_short",
                1,
                SHORT,
                "REQUEST_MORE_DETAIL",
                "@repeat",
                params={"retry_suffix": "More.", "max_retries": 2},
            ),
            branch("model_timeout", 5, TIMEOUT, "ERROR_HANDLER", "b"),
        ),
        step("b"),
    )
    assert lint_recipe(g) == []


@pytest.mark.parametrize(
    ("priority", "band"),
    [
        (1, "errors"),
        (10, "errors"),
        (11, "quality"),
        (50, "quality"),
        (51, "flow"),
        (100, "flow"),
        (101, None),
        (899, None),
        (900, "defaults"),
        (5000, "defaults"),
    ],
)
def test_each_priority_has_its_band(priority: int, band: str | None) -> None:
    found = band_of(priority)
    assert (found.name if found else None) == band


def test_a_band_is_described_for_people() -> None:
    assert describe(5) == "Error handling (1-10)"
    assert describe(999) == "Defaults (900+)"
    assert describe(0) == describe("x") == ""


def test_lint_notes_a_default_outside_its_band_and_error_handling_after_a_quality_gate() -> None:
    g = graph(
        step(
            "a",
            branch("gate", 20, LONG, "QUALITY_APPROVED", "@complete"),
            branch("late_timeout", 30, TIMEOUT, "ERROR_HANDLER", "b"),
            branch("fallback", 100, None, "DEFAULT_CONTINUE", "b"),
        ),
        step("b", branch("done", 999, None, target="@complete")),
    )
    bands = "bands: error handling 1-10, quality gates 11-50, flow control 51-100, defaults 900+"
    assert lint_notes(g) == [
        "steps[0].branches[1].priority: the error-handling branch 'late_timeout' (priority 30) "
        f"comes after the quality gate 'gate' (priority 20); error handling belongs in 1-10 ({bands})",
        "steps[0].branches[2].priority: the default branch 'fallback' has priority 100; "
        f"defaults belong in 900+ ({bands})",
    ]


def test_the_notes_branch_set_follows_the_bands() -> None:
    g = graph(
        step(
            "a",
            branch(
                "story_too_short",
                1,
                SHORT,
                "REQUEST_MORE_DETAIL",
                "@repeat",
                params={"retry_suffix": "More.", "max_retries": 2},
            ),
            branch("model_timeout", 5, TIMEOUT, "ERROR_HANDLER", "b"),
            branch("default_evaluation", 999, None, "DEFAULT_CONTINUE", "b"),
        ),
        step("b", branch("done", 999, None, target="@complete")),
    )
    assert lint_notes(g) == []
