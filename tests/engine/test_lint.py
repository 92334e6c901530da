from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import branch, graph, step
from workflows.engine import lint_recipe

SHORT = {"type": "length_check", "operator": "less_than", "value": 20}
APPROVE = {"type": "human_decision", "value": "approve"}


def test_it_has_nothing_to_say_about_a_tidy_recipe() -> None:
    g = graph(
        step(
            "draft",
            branch("short", 1, SHORT, "REQUEST_MORE_DETAIL", None, params={"max_retries": 2}),
        ),
        step(
            "review",
            branch(
                "ok", 1, {"type": "human_decision", "value": "approve|reject"}, target="@complete"
            ),
            branch("again", 2, {"type": "human_decision", "value": "revise"}, target="draft"),
            kind="human",
            actor="editors",
        ),
    )
    assert lint_recipe(g) == []


@pytest.mark.parametrize(
    ("steps", "warnings"),
    [
        (
            [step("a", branch("out", 1, target="@end")), step("b"), step("c")],
            [
                "steps[1]: step 'b' is never reached from the first step 'a'",
                "steps[2]: step 'c' is never reached from the first step 'a'",
            ],
        ),
        (
            [
                step("a", branch("maybe", 1, SHORT, target="c")),
                step("b", branch("end", 1, target="@end")),
                step("c"),
            ],
            [],
        ),
        (
            [step("a", branch("skip", 1, action="SKIP_TO_END", target=None)), step("b"), step("c")],
            ["steps[1]: step 'b' is never reached from the first step 'a'"],
        ),
        (
            [
                step(
                    "a",
                    branch("again", 1, SHORT, target="@repeat", params={"max_retries": 1}),
                    branch("loop", 2, target="@repeat", params={"max_retries": 1}),
                ),
                step("b"),
            ],
            [
                "steps[0]: every branch repeats this step; the run moves on only when their retries are used up"
            ],
        ),
        (
            [step("a", branch("loop", 1, target="a")), step("b")],
            [
                "steps[1]: step 'b' is never reached from the first step 'a'",
                "steps[0]: the run never moves on from this step: every branch leads back to it and a "
                "default always matches, so only the step limit ends the loop",
                "steps[0].branches[0].target: leads back to its own step without a bound; use @repeat "
                "so max_retries limits the loop",
            ],
        ),
        (
            [
                step(
                    "a",
                    branch("catch_all", 5, target="b"),
                    branch("too_late", 9, SHORT, target="@end"),
                    branch("early", 1, SHORT, target="@end"),
                ),
                step("b"),
            ],
            [
                "steps[0].branches[1]: never evaluated: the default branch 'catch_all' (priority 5) always matches before it"
            ],
        ),
        (
            [step("a", branch("again", 1, SHORT, "REQUEST_MORE_DETAIL", None))],
            [
                "steps[0].branches[0].params.max_retries: not set; the default bound of 3 retries applies"
            ],
        ),
        (
            [step("a", branch("other", 1, SHORT, "RETRY_WITH_DIFFERENT_ACTOR", None))],
            [
                "steps[0].branches[0].params.max_retries: not set; the default bound of 3 retries applies"
            ],
        ),
        (
            [
                step(
                    "a",
                    branch(
                        "good",
                        1,
                        {
                            "type": "and",
                            "conditions": [
                                SHORT,
                                {"type": "ai_evaluation", "operator": "greater_than", "value": 7},
                            ],
                        },
                    ),
                )
            ],
            [
                "steps[0].branches[0].when.conditions[1].evaluator: not set; the step's judge or actor 'writer' will evaluate"
            ],
        ),
        (
            [step("a", branch("review", 1, SHORT, "HUMAN_REVIEW", "b")), step("b")],
            ["steps[0].branches[0].target: HUMAN_REVIEW goes to 'b', which is not a human step"],
        ),
        (
            [step("review", branch("ok", 1, APPROVE), kind="human", actor="editors")],
            [
                "steps[0].options: no human_decision branch handles the option 'reject'",
                "steps[0].options: no human_decision branch handles the option 'revise'",
            ],
        ),
        (
            [
                step(
                    "review",
                    branch("ok", 1, APPROVE),
                    kind="human",
                    actor="editors",
                    options=["approve"],
                )
            ],
            [],
        ),
    ],
)
def test_it_warns_about_recipes_that_probably_do_not_do_what_was_meant(
    steps: list[dict[str, Any]], warnings: list[str]
) -> None:
    assert lint_recipe(graph(*steps)) == warnings


def test_it_follows_decision_tree_leaves_when_it_looks_for_unreachable_steps() -> None:
    tree = {
        "type": "node",
        "condition": {"type": "check_safety"},
        "if_true": {"type": "leaf", "prompt": "careful"},
        "if_false": {"type": "leaf", "prompt": "mystery"},
    }
    g = graph(
        step(
            "route", kind="decision_tree", actor=None, tree=tree, leaf_targets={"mystery": "@end"}
        ),
        step("skipped", branch("end", 1, target="@end")),
        step("careful"),
    )
    assert lint_recipe(g) == [
        "steps[1]: step 'skipped' is never reached from the first step 'route'"
    ]


def test_it_warns_about_a_leaf_that_names_no_step() -> None:
    tree = {
        "type": "node",
        "condition": {"type": "check_safety"},
        "if_true": {"type": "leaf", "prompt": "careful"},
        "if_false": {"type": "leaf", "prompt": "mystery"},
    }
    g = graph(step("route", kind="decision_tree", actor=None, tree=tree), step("careful"))
    assert lint_recipe(g) == [
        "steps[0].leaf_targets: the leaf 'mystery' names no step; the step's branches or the next "
        "step in sequence decide where it goes"
    ]
