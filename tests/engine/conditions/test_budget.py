"""`budget`: what the run spent (tokens, cost, calls) compared, with every operator and alias;
its bad values refused at parse; a step the budget stopped takes its budget branch."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from tests.engine.builders import branch, condition, graph, recipe, step
from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, uncovered
from workflows.engine import (
    EvalContext,
    RecipeInvalid,
    RunState,
    Spend,
    StepResult,
    condition_summary,
    decide,
    evaluate_condition,
    lint_recipe,
    parse_recipe,
)
from workflows.engine.conditions.budget import CONDITION_TYPE

SPENT = Spend(tokens=1200, cost=Decimal("0.42"), calls=3, seconds=9.5)
P = "steps[0].branches[0].when"


def spent(spend: Spend = SPENT) -> dict[str, Any]:
    """Return the context of a step in a run that has spent `spend`."""
    return {"spend": lambda: spend}


def budget(op: str, value: object, measure: str | None = None) -> dict[str, Any]:
    when: dict[str, Any] = {"type": "budget", "operator": op, "value": value}
    if measure is not None:
        when["measure"] = measure
    return when


CASES: list[Case] = [
    (budget("greater_equal", 1000), "", spent(), True, "1200 tokens spent >= 1000"),
    (budget("greater_equal", 2000), "", spent(), False, "1200 tokens spent not >= 2000"),
    (budget("less_than", 2000, "tokens"), "", spent(), True, "1200 tokens spent < 2000"),
    (budget("less_than", 1200, "tokens"), "", spent(), False, "1200 tokens spent not < 1200"),
    (budget("less_equal", 3, "calls"), "", spent(), True, "3 calls spent <= 3"),
    (budget("less_equal", 2, "calls"), "", spent(), False, "3 calls spent not <= 2"),
    (budget("greater_than", 2, "calls"), "", spent(), True, "3 calls spent > 2"),
    (budget("greater_than", 3, "calls"), "", spent(), False, "3 calls spent not > 3"),
    (budget("equals", 0.42, "cost"), "", spent(), True, "cost 0.42 == 0.42"),
    (budget("equals", 0.4, "cost"), "", spent(), False, "cost 0.42 != 0.4"),
    (budget("not_equals", 0.5, "cost"), "", spent(), True, "cost 0.42 != 0.5"),
    (budget("not_equals", "0.42", "cost"), "", spent(), False, "cost 0.42 == 0.42"),
    (budget("greater_than_or_equal", 0.4, "cost"), "", spent(), True, "cost 0.42 >= 0.4"),
    (budget("greater_than_or_equal", 0.5, "cost"), "", spent(), False, "cost 0.42 not >= 0.5"),
    (budget("less_than_or_equal", 0.5, "cost"), "", spent(), True, "cost 0.42 <= 0.5"),
    (budget("less_than_or_equal", 0.1, "cost"), "", spent(), False, "cost 0.42 not <= 0.1"),
    # A cost compares exactly: 0.1 + 0.2 is 0.3, not 0.30000000000000004.
    (
        budget("equals", 0.3, "cost"),
        "",
        spent(Spend(cost=Decimal("0.1") + Decimal("0.2"))),
        True,
        "cost 0.3 == 0.3",
    ),
    (budget("equals", 0, "calls"), "", spent(Spend()), True, "0 calls spent == 0"),
    (budget("greater_equal", 1), "", {}, False, "no spend is known to compare"),
    # The budget stopped the step: every budget condition holds, whatever it compares.
    (
        budget("less_than", 1, "calls"),
        "",
        {**spent(), "budget_exceeded": True},
        True,
        "the run's budget stopped the step",
    ),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_evaluates_each_operator_with_its_reason(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    assert uncovered(CONDITION_TYPE, CASES) == []


def test_it_asks_for_the_spend_each_time_it_is_evaluated() -> None:
    # An evaluator asked between two branches adds to the spend: it is never cached.
    spends = iter([Spend(calls=1), Spend(calls=2)])
    ctx = EvalContext(text="", spend=lambda: next(spends))
    when = condition(budget("greater_equal", 2, "calls"))
    assert evaluate_condition(when, ctx) == (False, "1 calls spent not >= 2")
    assert evaluate_condition(when, ctx) == (True, "2 calls spent >= 2")


@pytest.mark.parametrize(
    ("when", "errors"),
    [
        (
            budget("greater_equal", 1, "dollars"),
            [f"{P}.measure: unknown measure 'dollars'; expected one of: tokens, cost, calls"],
        ),
        (budget("greater_equal", "lots"), [f"{P}.value: must be a number, got 'lots'"]),
        (budget("greater_equal", None), [f"{P}.value: must be a number, got None"]),
        (budget("greater_equal", True), [f"{P}.value: must be a number, got True"]),
        (budget("greater_equal", [1]), [f"{P}.value: must be a number, got [1]"]),
        (
            budget("greater_equal", -1, "cost"),
            [f"{P}.value: what was spent is at least 0, got -1"],
        ),
        (
            budget("more_than", 1),
            [
                f"{P}.operator: unknown operator 'more_than'; budget takes: less_than, less_equal, "
                "greater_than, greater_equal, equals, not_equals, greater_than_or_equal, "
                "less_than_or_equal"
            ],
        ),
    ],
)
def test_it_refuses_a_bad_condition_at_its_path(when: dict, errors: list[str]) -> None:
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(recipe(step("s", branch("b", 1, when))))
    assert raised.value.errors == errors


@pytest.mark.parametrize(
    ("when", "summary"),
    [
        (budget("greater_equal", 0.5, "cost"), "cost ≥ 0.5"),
        (budget("less_than", 1000), "tokens < 1000"),
        (budget("greater_than", 4, "calls"), "calls > 4"),
    ],
)
def test_it_summarises_the_condition_for_the_canvas(when: dict, summary: str) -> None:
    assert condition_summary(when) == summary


# -- the decision after a step the budget stopped --------------------------------------------

STOPPED = "budget: max_calls 2 would be passed (2 model calls made)"


def _decided(result: StepResult, *branches: dict[str, Any], spend: Spend = SPENT) -> Any:
    parsed = graph(
        step("write", *branches),
        step("cheap", branch("done", 1)),
        budget={"max_calls": 2},
    )
    return decide(parsed, RunState(), result, spend=lambda: spend)


def test_a_step_the_budget_stopped_takes_its_budget_branch() -> None:
    result = StepResult("write", error=STOPPED, budget_exceeded=True)
    decision = _decided(
        result,
        branch("long", 1, {"type": "length_check", "operator": "greater_than", "value": 5}),
        branch("cheaper", 2, budget("greater_equal", 0.9, "cost"), target="cheap"),
        branch("on", 3),
    )
    assert (decision.kind, decision.next_step, decision.branch) == ("goto", "cheap", "cheaper")
    taken = decision.evaluations[-1]
    assert (taken.branch, taken.taken, taken.reason) == (
        "cheaper",
        True,
        "the run's budget stopped the step",
    )


def test_a_budget_branch_inside_a_combination_handles_the_stopped_step() -> None:
    result = StepResult("write", error=STOPPED, budget_exceeded=True)
    when = {"type": "or", "conditions": [budget("greater_equal", 5, "calls"), {"type": "default"}]}
    decision = _decided(result, branch("out", 1, when, action="END_RECIPE", target="@end"))
    assert (decision.kind, decision.branch) == ("end", "out")


def test_a_step_the_budget_stopped_without_a_budget_branch_fails_the_run_with_the_reason() -> None:
    result = StepResult("write", error=STOPPED, budget_exceeded=True)
    decision = _decided(result, branch("on", 1, target="cheap"))
    assert (decision.kind, decision.reason) == ("fail", f"step 'write' failed: {STOPPED}")


def test_a_budget_branch_does_not_handle_another_failure() -> None:
    # The branch compares what was spent and holds, but the step failed for another reason.
    result = StepResult("write", error="the model answered 500")
    decision = _decided(
        result, branch("cheaper", 1, budget("greater_equal", 1, "calls"), target="cheap")
    )
    assert (decision.kind, decision.branch) == ("fail", None)
    assert decision.reason == "step 'write' failed: the model answered 500"


def test_a_budget_branch_switches_actor_as_the_run_spends() -> None:
    ok = StepResult("write", response="A fine answer")
    switch = branch("cheaper", 1, budget("greater_equal", 0.4, "cost"), target="cheap")
    assert _decided(ok, switch).next_step == "cheap"
    poor = _decided(ok, switch, branch("on", 2), spend=Spend(cost=Decimal("0.1")))
    assert (poor.kind, poor.branch) == ("complete", "on")


def test_lint_warns_about_a_comparison_with_as_much_as_the_budget_allows() -> None:
    parsed = graph(
        step(
            "write",
            branch("reached", 1, budget("greater_equal", 0.5, "cost")),
            branch("half", 2, budget("greater_equal", 0.25, "cost")),
            branch("many", 3, budget("greater_equal", 100, "calls")),
        ),
        budget={"max_cost": 0.5},
    )
    assert [w for w in lint_recipe(parsed) if "budget" in w] == [
        "steps[0].branches[0].when.value: the run never reaches cost 0.5: budget.max_cost 0.5 "
        "stops it first, so the condition holds only when the budget stops the step"
    ]
