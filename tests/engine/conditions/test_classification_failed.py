"""`classification_failed`: a classify step whose classifier gave no readable answer.

The classification reports the routes it could not read; the runner fails the step, and only
a branch taken that reads the failure (or an error branch) takes the run on.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import branch, graph, step
from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, uncovered
from workflows.engine import (
    RecipeGraph,
    Route,
    RunState,
    StepResult,
    classify,
    decide,
    lint_recipe,
)
from workflows.engine.conditions.classification_failed import CONDITION_TYPE

FAILED = {"classification_failure": "billing: not selected, no readable answer in 3 tries: x"}


def failed(value: object = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"type": "classification_failed", "operator": "equals"}
    if value is not None:
        doc["value"] = value
    return doc


CASES: list[Case] = [
    (
        failed(),
        "",
        FAILED,
        True,
        "classification failed: billing: not selected, no readable answer in 3 tries: x",
    ),
    (failed(True), "billing", {}, False, "classification did not fail"),
    (failed(False), "billing", {}, True, "classification did not fail"),
    (
        failed("false"),
        "",
        FAILED,
        False,
        "classification failed: billing: not selected, no readable answer in 3 tries: x",
    ),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_tells_whether_the_classifier_gave_no_readable_answer(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    assert uncovered(CONDITION_TYPE, CASES) == []


BILLING = Route("billing", "Invoices.")
SHIPPING = Route("shipping", "Parcels.")


@pytest.mark.parametrize(
    ("answers", "selected", "unreadable"),
    [
        ({"billing": "yes", "shipping": "no"}, ("billing",), ()),
        ({"billing": "perhaps", "shipping": "yes"}, ("shipping",), ("billing",)),
        ({"billing": "perhaps", "shipping": "hmm"}, (), ("billing", "shipping")),
    ],
)
def test_the_classification_names_the_routes_it_could_not_read(
    answers: dict[str, str], selected: tuple[str, ...], unreadable: tuple[str, ...]
) -> None:
    def ask(prompt: str) -> str:
        return next(answer for name, answer in answers.items() if f"'{name}'" in prompt)

    result = classify("text", [BILLING, SHIPPING], ask, max_reclassify=1)
    assert (result.selected, result.unreadable) == (selected, unreadable)
    if not unreadable:
        assert result.failure is None
    else:
        assert result.failure is not None
        for name in unreadable:
            assert f"{name}: not selected, no readable answer in 2 tries: " in result.failure


def triage(*branches: dict[str, Any]) -> RecipeGraph:
    return graph(
        step("triage", *branches, kind="classify", routes=[{"name": "billing"}]),
        step("pay"),
        step("apologise"),
    )


ON_ROUTE = branch("billing", 2, {"type": "route_selected", "value": "billing"}, target="pay")
OTHERWISE = branch("otherwise", 999, target="pay")
UNSURE = branch("unsure", 1, failed(), target="apologise")
ON_ERROR = branch(
    "on_error", 1, {"type": "execution_error", "operator": "equals"}, "ERROR_HANDLER", "apologise"
)


def test_decide_takes_the_branch_reading_the_failure_before_the_default() -> None:
    g = triage(UNSURE, ON_ROUTE, OTHERWISE)
    state = RunState.start(g, {"topic": "x"})
    result = StepResult(
        "triage",
        error="classification failed: billing: ...",
        classification_failure="billing: ...",
    )
    decision = decide(g, state, result)
    assert (decision.kind, decision.next_step, decision.branch) == ("goto", "apologise", "unsure")
    assert decision.evaluations[0].reason == "classification failed: billing: ..."


def test_decide_passes_the_branch_by_when_the_classifier_was_read() -> None:
    g = triage(UNSURE, ON_ROUTE, OTHERWISE)
    state = RunState.start(g, {"topic": "x"})
    decision = decide(g, state, StepResult("triage", route_selection=("billing",)))
    assert (decision.next_step, decision.branch) == ("pay", "billing")


@pytest.mark.parametrize(
    "branches",
    [
        # A branch that reads the failure but does not hold, asking for `false`, then the default.
        (branch("sure", 1, failed(False), target="pay"), OTHERWISE),
        (branch("sure", 1, {"type": "not", "conditions": [failed(True)]}, target="pay"),),
        (OTHERWISE,),
    ],
)
def test_an_unread_failed_classification_fails_the_run_whatever_else_matches(
    branches: tuple[dict[str, Any], ...],
) -> None:
    g = triage(*branches)
    state = RunState.start(g, {"topic": "x"})
    result = StepResult(
        "triage",
        error="classification failed: billing: ...",
        classification_failure="billing: ...",
    )
    decision = decide(g, state, result)
    assert (decision.kind, decision.next_step) == ("fail", None)
    assert "classification failed" in decision.reason


def test_a_failed_classification_with_only_an_error_branch_goes_there() -> None:
    """The runner fails the step (no branch reads the failure): its error branch takes it."""
    g = triage(ON_ERROR, OTHERWISE)
    state = RunState.start(g, {"topic": "x"})
    result = StepResult("triage", error="classification failed: billing: ...")
    decision = decide(g, state, result)
    assert (decision.kind, decision.next_step, decision.branch) == ("goto", "apologise", "on_error")


def test_a_failed_classification_with_no_branch_for_it_fails_the_run() -> None:
    g = triage(ON_ROUTE, OTHERWISE)
    state = RunState.start(g, {"topic": "x"})
    result = StepResult("triage", error="classification failed: billing: ...")
    decision = decide(g, state, result)
    assert decision.kind == "fail"
    assert decision.reason == "step 'triage' failed: classification failed: billing: ..."


def test_lint_warns_about_the_condition_on_a_step_that_classifies_nothing() -> None:
    g = graph(step("write", branch("unsure", 1, failed(), target="@end")))
    assert lint_recipe(g) == [
        "steps[0].branches[0].when: never holds: only a classify step can fail to classify"
    ]
    assert lint_recipe(triage(UNSURE, OTHERWISE)) == []
