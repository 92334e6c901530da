"""`counts_as` on a branch: parsed, defaulted from the action, published in the catalog."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import branch, recipe, step
from workflows.engine import RecipeInvalid, attempt_outcome, branch_outcome, catalog, parse_recipe

HUMAN = {"type": "human_decision", "operator": "user_choice"}


def only_branch(**fields: Any) -> Any:
    action = fields.pop("action", "CONTINUE")
    when = fields.pop("when", None)
    target = "@repeat" if action in ("REQUEST_MORE_DETAIL", "RETRY_WITH_DIFFERENT_ACTOR") else "b"
    doc = recipe(step("a", branch("x", 1, when, action, target, **fields)), step("b"))
    return parse_recipe(doc).step("a").branches[0]


@pytest.mark.parametrize(
    ("fields", "outcome"),
    [
        ({"action": "REQUEST_MORE_DETAIL", "params": {"retry_suffix": "More."}}, "failure"),
        ({"action": "RETRY_WITH_DIFFERENT_ACTOR"}, "failure"),
        ({"action": "ERROR_HANDLER"}, "failure"),
        ({"action": "QUALITY_APPROVED"}, "success"),
        ({"action": "CONTINUE"}, "neutral"),
        ({"action": "DEFAULT_CONTINUE"}, "neutral"),
        ({"action": "CONTINUE", "when": {**HUMAN, "value": "reject"}}, "failure"),
        ({"action": "CONTINUE", "when": {**HUMAN, "value": "approve"}}, "success"),
        ({"action": "CONTINUE", "when": {**HUMAN, "value": "revise"}}, "neutral"),
        ({"action": "CONTINUE", "counts_as": "failure"}, "failure"),
        ({"action": "QUALITY_APPROVED", "counts_as": "neutral"}, "neutral"),
        ({"action": "RETRY_WITH_DIFFERENT_ACTOR", "counts_as": "success"}, "success"),
    ],
)
def test_a_branch_counts_as_it_says_else_as_its_action_or_decision(
    fields: dict[str, Any], outcome: str
) -> None:
    if fields.get("when", {}).get("type") == "human_decision":
        doc = recipe(
            step("a", kind="human", actor="editors"),
            step("b"),
        )
        doc["steps"][0]["branches"] = [branch("x", 1, fields["when"], fields["action"], "b")]
        taken = parse_recipe(doc).step("a").branches[0]
    else:
        taken = only_branch(**fields)
    assert branch_outcome(taken) == outcome


@pytest.mark.parametrize("value", ["win", "", 1, True, ["success"]])
def test_it_refuses_a_counts_as_that_is_not_an_outcome_at_its_path(value: object) -> None:
    doc = recipe(step("a", branch("x", 1, counts_as=value)))
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(doc)
    assert caught.value.errors == [
        f"steps[0].branches[0].counts_as: must be one of success, failure, neutral, got {value!r}"
    ]


def test_the_catalog_publishes_the_outcomes_and_each_actions_default() -> None:
    published = catalog()
    defaults = {a["name"]: a["counts_as"] for a in published["actions"]}
    assert defaults["QUALITY_APPROVED"] == "success"
    assert defaults["RETRY_WITH_DIFFERENT_ACTOR"] == "failure"
    assert defaults["END_RECIPE"] == "neutral"
    (field,) = published["branch_fields"]
    assert (field["name"], field["kind"], field["choices"]) == (
        "counts_as",
        "choice",
        ["success", "failure", "neutral"],
    )


@pytest.mark.parametrize(
    ("taken", "failed", "run_failed", "outcome"),
    [
        ("approve", False, False, "success"),
        ("again", False, False, "failure"),
        ("on", False, False, "neutral"),
        (None, False, False, "neutral"),
        (None, True, True, "failure"),
        ("on", True, True, "failure"),
        ("unknown leaf", False, False, "neutral"),
    ],
)
def test_an_attempts_outcome_comes_from_the_branch_taken(
    taken: str | None, failed: bool, run_failed: bool, outcome: str
) -> None:
    doc = recipe(
        step(
            "a",
            branch(
                "approve",
                1,
                {"type": "length_check", "operator": "greater_than", "value": 99},
                "QUALITY_APPROVED",
                "@complete",
            ),
            branch(
                "again",
                2,
                {"type": "length_check", "operator": "less_than", "value": 5},
                "REQUEST_MORE_DETAIL",
                None,
                params={"retry_suffix": "More."},
            ),
            branch("on", 3),
        )
    )
    a = parse_recipe(doc).step("a")
    assert attempt_outcome(a, taken, failed=failed, run_failed=run_failed) == outcome
