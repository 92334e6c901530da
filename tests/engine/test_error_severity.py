"""Error severities: a failed step's severity, the `error_severity` condition, and the failures
a RECLASSIFICATION or REPLANNING branch sends back, bounded per run."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import branch, graph, recipe, step
from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, uncovered
from workflows.engine import (
    RecipeGraph,
    RecipeInvalid,
    Route,
    RunState,
    StepResult,
    classify,
    decide,
    lint_errors,
    lint_recipe,
    parse_recipe,
    render,
)
from workflows.engine.conditions.error_severity import CONDITION_TYPE
from workflows.engine.replay import RecordedStep, replay
from workflows.engine.severity import severity_of


def severity(op: str, value: object) -> dict[str, Any]:
    return {"type": "error_severity", "operator": op, "value": value}


# -- a failed step's severity -------------------------------------------------------------

FAILS = {"error": "boom"}


@pytest.mark.parametrize(
    ("failure_severity", "result", "expected"),
    [
        (None, {}, None),
        ("REPLANNING", {}, None),  # a step that did not fail has no severity
        (None, FAILS, "CRITICAL"),
        ("CRITICAL", FAILS, "CRITICAL"),
        ("REPLANNING", FAILS, "REPLANNING"),
        ("RECLASSIFICATION", FAILS, "RECLASSIFICATION"),
        ("RETRIABLE", FAILS, "RETRIABLE"),
        # A transient failure is RETRIABLE whatever the step says.
        ("REPLANNING", {**FAILS, "transient": True}, "RETRIABLE"),
        (None, {"timed_out": True, "transient": True}, "RETRIABLE"),
        # A timeout nothing calls transient (a reviewer's task past due) is the step's.
        (None, {"timed_out": True}, "CRITICAL"),
        # A classifier with no readable answer chose nothing: ask it again.
        (None, {**FAILS, "classification_failure": "billing: ?"}, "RECLASSIFICATION"),
        ("CRITICAL", {**FAILS, "classification_failure": "billing: ?"}, "RECLASSIFICATION"),
    ],
)
def test_it_finds_the_severity_of_a_failed_step(
    failure_severity: str | None, result: dict[str, Any], expected: str | None
) -> None:
    fields = {} if failure_severity is None else {"failure_severity": failure_severity}
    g = graph(step("write", **fields))
    assert severity_of(g.step("write"), StepResult("write", **result)) == expected


# -- the condition --------------------------------------------------------------------------

CASES: list[Case] = [
    (severity("equals", "CRITICAL"), "", {"severity": None}, False, "step did not fail"),
    (
        severity("equals", "CRITICAL"),
        "",
        {"severity": "CRITICAL", "error": "HTTP 400"},
        True,
        "severity CRITICAL: HTTP 400",
    ),
    (
        severity("equals", "replanning"),
        "",
        {"severity": "CRITICAL", "error": "HTTP 400"},
        False,
        "severity CRITICAL, not REPLANNING: HTTP 400",
    ),
    (
        severity("in", ["RETRIABLE", "RECLASSIFICATION"]),
        "",
        {"severity": "RECLASSIFICATION", "error": "no route fits"},
        True,
        "severity RECLASSIFICATION: no route fits",
    ),
    (
        severity("in", "RETRIABLE|REPLANNING"),
        "",
        {"severity": "CRITICAL"},
        False,
        "severity CRITICAL, not REPLANNING|RETRIABLE",
    ),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_tells_whether_the_step_failed_with_a_severity(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    assert uncovered(CONDITION_TYPE, CASES) == []


def test_the_condition_handles_the_failure_of_its_step() -> None:
    assert CONDITION_TYPE.asks_about_failure


P = "steps[0].branches[0].when.value"
ONE = "must name a severity of: RETRIABLE, CRITICAL, RECLASSIFICATION, REPLANNING"
SOME = (
    "must name one or more severities (a list, or A|B) of: "
    "RETRIABLE, CRITICAL, RECLASSIFICATION, REPLANNING"
)


@pytest.mark.parametrize(
    ("when", "error"),
    [
        (severity("equals", "FATAL"), f"{P}: {ONE}"),
        (severity("equals", None), f"{P}: {ONE}"),
        (severity("equals", 3), f"{P}: {ONE}"),
        (
            severity("equals", "CRITICAL|RETRIABLE"),
            f"{P}: names several severities: use the operator `in`",
        ),
        (severity("in", []), f"{P}: {SOME}"),
        (severity("in", ["CRITICAL", 1]), f"{P}: {SOME}"),
        (severity("in", "CRITICAL|oops"), f"{P}: {SOME}"),
    ],
)
def test_it_refuses_a_value_that_names_no_severity(when: dict, error: str) -> None:
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(recipe(step("write", branch("on_error", 1, when, target="@end"))))
    assert raised.value.errors == [error]


def test_it_refuses_a_failure_severity_that_is_none_with_its_path() -> None:
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(recipe(step("write"), step("check", failure_severity="fatal")))
    assert raised.value.errors == [
        "steps[1].failure_severity: must be one of RETRIABLE, CRITICAL, RECLASSIFICATION, "
        "REPLANNING, got 'fatal'"
    ]


# -- RECLASSIFICATION: the classify step runs again, told of the failure --------------------

ROUTES = [{"name": "billing"}, {"name": "shipping"}]


def support(*, max_reclassify: int = 2, **extra: Any) -> RecipeGraph:
    """triage (classify) → pay on billing, send on shipping; pay fails as RECLASSIFICATION."""
    reclassify = branch(
        "wrong_route", 1, severity("equals", "RECLASSIFICATION"), "CONTINUE", "triage"
    )
    return graph(
        step(
            "triage",
            branch("billing", 1, {"type": "route_selected", "value": "billing"}, target="pay"),
            branch("shipping", 2, {"type": "route_selected", "value": "shipping"}, target="send"),
            kind="classify",
            routes=ROUTES,
            max_reclassify=max_reclassify,
        ),
        step("pay", reclassify, failure_severity="RECLASSIFICATION", **extra),
        step("send"),
    )


PAY_FAILED = StepResult("pay", error="the order has no invoice")


def test_a_reclassification_sends_the_failure_back_to_the_classify_step() -> None:
    g = support()
    state = RunState.start(g, {"topic": "where is my parcel"})
    decide(g, state, StepResult("triage", route_selection=("billing",)))
    decision = decide(g, state, PAY_FAILED)
    assert (decision.kind, decision.next_step, decision.branch) == ("goto", "triage", "wrong_route")
    assert decision.feedback == "step 'pay' failed: the order has no invoice"
    assert decision.evaluations[0].reason == "severity RECLASSIFICATION: the order has no invoice"
    assert state.reclassified == {"triage": 1}
    # The classifier is asked again, told of the failure; it chooses the other route now.
    asked: list[str] = []

    def ask(question: str) -> str:
        asked.append(question)
        return "yes" if "'shipping'" in question else "no"

    routes = [Route("billing"), Route("shipping")]
    selection = classify("where is my parcel", routes, ask, feedback=decision.feedback)
    assert selection.selected == ("shipping",)
    assert all(
        "The previous selection failed: \"step 'pay' failed: the order has no invoice\"" in q
        for q in asked
    )
    again = decide(g, state, StepResult("triage", route_selection=selection.selected))
    assert again.next_step == "send"
    assert again.feedback is None


def test_the_classifier_is_not_told_of_a_failure_when_there_is_none() -> None:
    asked: list[str] = []
    classify("x", [Route("billing")], lambda q: asked.append(q) or "yes")
    assert "previous selection" not in asked[0]


def test_reclassifications_are_bounded_by_the_classify_steps_max_reclassify() -> None:
    g = support(max_reclassify=1)
    state = RunState.start(g, {"topic": "x"})
    decide(g, state, StepResult("triage", route_selection=("billing",)))
    assert decide(g, state, PAY_FAILED).next_step == "triage"
    decide(g, state, StepResult("triage", route_selection=("billing",)))
    decision = decide(g, state, PAY_FAILED)
    # Used up: matched but not taken, and nothing else handles the failure.
    assert [(e.branch, e.matched, e.taken) for e in decision.evaluations] == [
        ("wrong_route", True, False)
    ]
    assert decision.evaluations[0].reason == "reclassified once already (max_reclassify 1)"
    assert (decision.kind, decision.reason) == (
        "fail",
        "step 'pay' failed: the order has no invoice",
    )


def test_once_reclassifications_are_used_up_evaluation_goes_on() -> None:
    on_error = branch(
        "give_up", 2, {"type": "execution_error", "operator": "equals"}, "ERROR_HANDLER", "send"
    )
    g = graph(
        step(
            "triage",
            branch("billing", 1, {"type": "route_selected", "value": "billing"}, target="pay"),
            kind="classify",
            routes=ROUTES,
            max_reclassify=0,
        ),
        step(
            "pay",
            branch("wrong_route", 1, severity("equals", "RECLASSIFICATION"), target="triage"),
            on_error,
            failure_severity="RECLASSIFICATION",
        ),
        step("send"),
    )
    state = RunState.start(g, {"topic": "x"})
    decide(g, state, StepResult("triage", route_selection=("billing",)))
    decision = decide(g, state, PAY_FAILED)
    assert [(e.branch, e.matched, e.taken, e.reason) for e in decision.evaluations] == [
        ("wrong_route", True, False, "reclassified 0 times already (max_reclassify 0)"),
        ("give_up", True, True, "step failed: the order has no invoice"),
    ]
    assert (decision.next_step, decision.feedback) == ("send", None)


def test_a_failed_classification_asks_the_classifier_again_through_its_own_branch() -> None:
    g = graph(
        step(
            "triage",
            branch("unreadable", 1, severity("equals", "RECLASSIFICATION"), target="triage"),
            branch("billing", 2, {"type": "route_selected", "value": "billing"}, target="pay"),
            kind="classify",
            routes=ROUTES,
        ),
        step("pay"),
    )
    state = RunState.start(g, {"topic": "x"})
    result = StepResult(
        "triage", error="classification failed: billing: ?", classification_failure="billing: ?"
    )
    decision = decide(g, state, result)
    assert (decision.kind, decision.next_step) == ("goto", "triage")
    assert decision.feedback == "step 'triage' failed: classification failed: billing: ?"


# -- REPLANNING: back to an earlier step, with the failure as its {feedback} --------------


def planned(**params: Any) -> RecipeGraph:
    replan = branch("replan", 1, severity("in", ["REPLANNING"]), "CONTINUE", "plan", params=params)
    return graph(
        step("plan", prompt="Plan how to write about {topic}. {feedback}"),
        step("execute", replan, failure_severity="REPLANNING"),
    )


EXECUTE_FAILED = StepResult("execute", error="the plan needs a database we do not have")


def test_a_replanning_goes_back_with_the_failure_as_feedback_in_the_prompt() -> None:
    g = planned()
    state = RunState.start(g, {"topic": "owls"})
    decide(g, state, StepResult("plan", response="1. use the database"))
    decision = decide(g, state, EXECUTE_FAILED)
    assert (decision.kind, decision.next_step, decision.branch) == ("goto", "plan", "replan")
    context = state.template_context("plan", lambda seq: "", decision.feedback)
    assert render(g.step("plan").prompt, context) == (
        "Plan how to write about owls. "
        "step 'execute' failed: the plan needs a database we do not have"
    )


def test_replannings_are_bounded_by_the_branchs_max_retries_over_the_run() -> None:
    g = planned(max_retries=2)
    state = RunState.start(g, {"topic": "owls"})
    taken = []
    for _ in range(3):
        decide(g, state, StepResult("plan", response="a plan"))
        decision = decide(g, state, EXECUTE_FAILED)
        taken.append((decision.kind, decision.evaluations[0].reason))
    assert taken == [
        ("goto", "severity REPLANNING: the plan needs a database we do not have"),
        ("goto", "severity REPLANNING: the plan needs a database we do not have"),
        ("fail", "replanned 2 times already (max_retries 2)"),
    ]


def test_replannings_default_to_three() -> None:
    g = planned()
    state = RunState.start(g, {"topic": "owls"})
    kinds = []
    for _ in range(4):
        decide(g, state, StepResult("plan", response="a plan"))
        kinds.append(decide(g, state, EXECUTE_FAILED).kind)
    assert kinds == ["goto", "goto", "goto", "fail"]


def test_a_retriable_failure_is_retried_without_feedback() -> None:
    retry = branch("again", 1, severity("equals", "RETRIABLE"), target="@repeat")
    g = graph(step("plan"), step("execute", retry, failure_severity="REPLANNING"))
    state = RunState.start(g, {"topic": "owls"})
    decide(g, state, StepResult("plan", response="a plan"))
    result = StepResult("execute", error="HTTP 503", transient=True)
    decision = decide(g, state, result)
    assert (decision.kind, decision.feedback) == ("repeat", None)
    assert decision.evaluations[0].reason == "severity RETRIABLE: HTTP 503"


def test_the_counts_survive_a_round_trip_and_old_states_load() -> None:
    g = planned()
    state = RunState.start(g, {"topic": "owls"})
    decide(g, state, StepResult("plan", response="a plan"))
    decide(g, state, EXECUTE_FAILED)
    state.reclassified["triage"] = 2
    loaded = RunState.from_dict(state.to_dict())
    assert (loaded.replans, loaded.reclassified) == ({"execute": {"replan": 1}}, {"triage": 2})
    old = state.to_dict()
    del old["replans"], old["reclassified"]
    assert (RunState.from_dict(old).replans, RunState.from_dict(old).reclassified) == ({}, {})


def test_a_replayed_run_counts_the_replannings_and_carries_the_feedback() -> None:
    g = planned(max_retries=1)
    state = RunState.start(g, {"topic": "owls"})
    move = replay(
        g,
        state,
        [
            RecordedStep(StepResult("plan", response="a plan")),
            RecordedStep(EXECUTE_FAILED, taken="replan"),
        ],
    )
    assert move is not None
    assert move.feedback == "step 'execute' failed: the plan needs a database we do not have"
    assert state.replans_used("execute", "replan") == 1


# -- where such a branch may go -------------------------------------------------------------


def test_a_reclassification_must_go_to_a_classify_step_and_a_replanning_back() -> None:
    g = graph(
        step("plan", prompt="Plan. {feedback}"),
        step(
            "execute",
            branch("reclassify", 1, severity("equals", "RECLASSIFICATION"), target="plan"),
            branch("replan", 2, severity("in", "REPLANNING|CRITICAL"), target="report"),
            branch("either", 3, severity("in", ["RECLASSIFICATION", "REPLANNING"]), target="@end"),
            # Under a `not` the branch asks for another severity: nothing is sent back.
            branch("not", 4, {"type": "not", "conditions": [severity("equals", "REPLANNING")]}),
        ),
        step("report"),
    )
    assert lint_errors(g) == [
        "steps[1].branches[0].target: taken on RECLASSIFICATION, the branch must go to a "
        "classify step (it runs again with the failure), got 'plan'",
        "steps[1].branches[1].target: taken on REPLANNING, the branch must go back to an "
        "earlier step (it plans again with the failure as its {feedback}), got 'report'",
        "steps[1].branches[2].target: taken on RECLASSIFICATION, the branch must go to a "
        "classify step (it runs again with the failure), got '@end'",
        "steps[1].branches[2].target: taken on REPLANNING, the branch must go back to an "
        "earlier step (it plans again with the failure as its {feedback}), got '@end'",
    ]
    assert lint_errors(support()) == []
    assert lint_errors(planned()) == []


def test_lint_warns_when_the_planning_step_does_not_show_the_feedback() -> None:
    g = graph(
        step("plan", prompt="Plan how to write about {topic}."),
        step("execute", branch("replan", 1, severity("equals", "REPLANNING"), target="plan")),
    )
    assert (
        "steps[1].branches[0].target: step 'plan' does not name {feedback} in its prompt: the "
        "failure sent back to it is not shown"
    ) in lint_recipe(g)
    assert not [w for w in lint_recipe(planned()) if "{feedback}" in w]
