from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.builders import branch, graph, recipe, step
from workflows.engine import (
    EngineError,
    Learning,
    Observation,
    RecipeGraph,
    RunState,
    StepResult,
    decide,
    parse_recipe,
)

SHORT = {"type": "length_check", "operator": "less_than", "value": 20}


def start(g: RecipeGraph, **fields: Any) -> RunState:
    return RunState.start(g, {"topic": "dragons"}, **fields)


def four_steps(*branches: dict[str, Any]) -> RecipeGraph:
    """Return a recipe whose first step `a` has `branches`, then b, review (human), last."""
    return graph(
        step("a", *branches),
        step("b"),
        step("review", kind="human", actor="editors"),
        step("last"),
    )


# (action, target, params, kind, next step, prompt suffix, actor, approved, error handled)
ACTION_CASES: list[
    tuple[str, str | None, dict[str, Any], str, str | None, str | None, str | None, bool, bool]
] = [
    ("CONTINUE", "b", {}, "goto", "b", None, None, False, False),
    ("CONTINUE", "@end", {}, "end", None, None, None, False, False),
    ("CONTINUE", "@complete", {}, "complete", None, None, None, False, False),
    ("CONTINUE", "@repeat", {}, "repeat", "a", None, None, False, False),
    ("DEFAULT_CONTINUE", "b", {}, "goto", "b", None, None, False, False),
    ("DEFAULT_CONTINUE", "@complete", {}, "complete", None, None, None, False, False),
    ("ERROR_HANDLER", "b", {}, "goto", "b", None, None, False, True),
    ("ERROR_HANDLER", "@end", {}, "end", None, None, None, False, True),
    (
        "REQUEST_MORE_DETAIL",
        "@repeat",
        {"retry_suffix": "Longer."},
        "repeat",
        "a",
        "Longer.",
        None,
        False,
        False,
    ),
    (
        "REQUEST_MORE_DETAIL",
        "a",
        {"retry_suffix": "Longer."},
        "repeat",
        "a",
        "Longer.",
        None,
        False,
        False,
    ),
    ("REQUEST_MORE_DETAIL", None, {}, "repeat", "a", None, None, False, False),
    (
        "ENHANCE_PROMPT",
        "@repeat",
        {"prompt_enhancement": "Give examples."},
        "repeat",
        "a",
        "Give examples.",
        None,
        False,
        False,
    ),
    (
        "RETRY_WITH_DIFFERENT_ACTOR",
        "@repeat",
        {"alternative_actor": "critic"},
        "retry_actor",
        "a",
        None,
        "critic",
        False,
        False,
    ),
    (
        "RETRY_DIFFERENT_ACTOR",
        "a",
        {"alternative_actor": "critic"},
        "retry_actor",
        "a",
        None,
        "critic",
        False,
        False,
    ),
    ("HUMAN_REVIEW", "review", {}, "goto", "review", None, None, False, False),
    ("HUMAN_REVIEW_NEEDED", "review", {}, "goto", "review", None, None, False, False),
    ("QUALITY_APPROVED", "@complete", {}, "complete", None, None, None, True, False),
    ("QUALITY_APPROVED", "b", {}, "goto", "b", None, None, True, False),
    ("SKIP_TO_END", None, {}, "goto", "last", None, None, False, False),
    ("SKIP_TO_END", "last", {}, "goto", "last", None, None, False, False),
    ("END_RECIPE", "@end", {}, "end", None, None, None, False, False),
    ("END_RECIPE", None, {}, "end", None, None, None, False, False),
]
CANONICAL = {
    "RETRY_DIFFERENT_ACTOR": "RETRY_WITH_DIFFERENT_ACTOR",
    "HUMAN_REVIEW_NEEDED": "HUMAN_REVIEW",
}


@pytest.mark.parametrize(
    ("action", "target", "params", "kind", "next_step", "suffix", "actor", "approved", "handled"),
    ACTION_CASES,
)
def test_it_turns_every_action_and_target_into_a_decision(
    action: str,
    target: str | None,
    params: dict[str, Any],
    kind: str,
    next_step: str | None,
    suffix: str | None,
    actor: str | None,
    approved: bool,
    handled: bool,
) -> None:
    g = four_steps(branch("go", 1, {"type": "default"}, action, target, params=params))
    state = start(g)
    decision = decide(g, state, StepResult("a", "some text"))
    assert (decision.kind, decision.next_step, decision.prompt_suffix, decision.actor) == (
        kind,
        next_step,
        suffix,
        actor,
    )
    assert (decision.branch, decision.action) == ("go", CANONICAL.get(action, action))
    assert (state.approved, state.error_handled) == (approved, handled)
    assert decision.reason == "default"


def test_it_completes_when_skip_to_end_is_taken_on_the_last_step() -> None:
    g = graph(step("a"), step("z", branch("skip", 1, action="SKIP_TO_END", target=None)))
    state = start(g)
    decide(g, state, StepResult("a", "x"))
    assert decide(g, state, StepResult("z", "y")).kind == "complete"


def test_it_takes_the_first_true_branch_in_priority_order_and_evaluates_no_further() -> None:
    g = four_steps(
        branch("third", 30, {"type": "default"}, target="last"),
        branch(
            "first",
            10,
            {"type": "pattern_match", "operator": "contains", "value": "zzz"},
            target="b",
        ),
        branch("second", 20, SHORT, target="review"),
        branch("off", 15, {"type": "default"}, target="b", active=False),
    )
    decision = decide(g, start(g), StepResult("a", "short"))
    assert (decision.kind, decision.next_step, decision.branch) == ("goto", "review", "second")
    assert [(e.branch, e.priority, e.matched, e.taken, e.reason) for e in decision.evaluations] == [
        ("first", 10, False, False, 'response does not contain "zzz"'),
        ("second", 20, True, True, "length 5 < 20"),
    ]


def test_it_goes_to_the_next_step_in_sequence_when_no_branch_matches() -> None:
    g = four_steps(branch("never", 1, SHORT, target="last"))
    decision = decide(g, start(g), StepResult("a", "x" * 50))
    assert (decision.kind, decision.next_step, decision.branch, decision.action) == (
        "goto",
        "b",
        None,
        None,
    )
    assert decision.reason == "no branch matched; next in sequence"
    assert [(e.matched, e.taken) for e in decision.evaluations] == [(False, False)]


def test_it_completes_the_run_after_the_last_step_when_no_branch_matches() -> None:
    g = graph(step("only"))
    decision = decide(g, start(g), StepResult("only", "done"))
    assert (decision.kind, decision.next_step, decision.reason) == (
        "complete",
        None,
        "no branch matched; last step done",
    )


def test_it_takes_a_repeat_branch_at_most_max_retries_times_per_visit() -> None:
    g = four_steps(
        branch(
            "too_short",
            1,
            SHORT,
            "REQUEST_MORE_DETAIL",
            "@repeat",
            params={"max_retries": 2, "retry_suffix": "More."},
        ),
        branch("fallback", 2, {"type": "default"}, target="b"),
    )
    state = start(g)
    kinds = [decide(g, state, StepResult("a", "short")).kind for _ in range(2)]
    third = decide(g, state, StepResult("a", "short"))
    assert kinds == ["repeat", "repeat"]
    assert (third.kind, third.next_step, third.branch) == ("goto", "b", "fallback")
    assert [(e.branch, e.matched, e.taken, e.reason) for e in third.evaluations] == [
        ("too_short", True, False, "exhausted after 2 retries"),
        ("fallback", True, True, "default"),
    ]


def test_it_bounds_repeats_by_three_when_max_retries_is_not_set() -> None:
    g = graph(step("a", branch("again", 1, SHORT, "CONTINUE", "@repeat")))
    state = start(g)
    kinds = [decide(g, state, StepResult("a", "short")).kind for _ in range(4)]
    assert kinds == ["repeat", "repeat", "repeat", "complete"]


def test_it_never_takes_a_repeat_branch_whose_max_retries_is_zero() -> None:
    g = graph(
        step("a", branch("again", 1, SHORT, "CONTINUE", "@repeat", params={"max_retries": 0}))
    )
    decision = decide(g, start(g), StepResult("a", "short"))
    assert decision.kind == "complete"
    assert decision.evaluations[0].reason == "exhausted after 0 retries"


def test_it_counts_retries_afresh_on_each_visit_of_a_step() -> None:
    g = graph(
        step(
            "a",
            branch("again", 1, SHORT, "CONTINUE", "@repeat", params={"max_retries": 1}),
            branch("on", 2, target="b"),
        ),
        step("b", branch("back", 1, target="a")),
    )
    state = start(g)
    trail = []
    for key in ["a", "a", "b", "a", "a"]:
        trail.append(decide(g, state, StepResult(key, "short")).kind)
    assert trail == ["repeat", "goto", "goto", "repeat", "goto"]
    assert state.visits == {"a": 2, "b": 1}


def test_it_retries_with_the_best_other_actor_learned_so_far() -> None:
    g = four_steps(
        branch(
            "retry", 1, SHORT, "RETRY_WITH_DIFFERENT_ACTOR", "@repeat", params={"max_retries": 2}
        )
    )
    stats = Learning(
        [Observation("writer", "", True)] * 10  # the step's own actor
        + [Observation("judge", "", True)]
        + [Observation("judge", "", False)] * 4
        + [Observation("critic", "", True)] * 45
        + [Observation("critic", "", False)] * 5
    )
    state = start(g)
    first = decide(g, state, StepResult("a", "short"), learning=stats)
    assert (first.kind, first.actor) == ("retry_actor", "critic")
    # The critic's answer was short too: the next retry goes to neither the critic nor the
    # writer, both already failed in this visit.
    second = decide(g, state, StepResult("a", "short"), learning=stats)
    assert (second.kind, second.actor) == ("retry_actor", "judge")


def test_it_treats_a_retry_with_no_other_actor_as_exhausted() -> None:
    doc = recipe(
        step(
            "a",
            branch("retry", 1, SHORT, "RETRY_WITH_DIFFERENT_ACTOR", None),
            branch("on", 2, target="@end"),
        ),
        actors={"writer": "llama3.2:latest", "editors": "@human:editors"},
    )
    g = parse_recipe(doc)
    decision = decide(g, start(g), StepResult("a", "short"))
    assert decision.kind == "end"
    assert [(e.branch, e.matched, e.taken, e.reason) for e in decision.evaluations] == [
        ("retry", True, False, "no other actor available; treated as exhausted"),
        ("on", True, True, "default"),
    ]


def test_it_keeps_the_alternative_actor_for_a_repeat_within_the_same_visit() -> None:
    g = four_steps(
        branch(
            "timeout",
            1,
            {"type": "execution_timeout", "value": True},
            "RETRY_WITH_DIFFERENT_ACTOR",
            None,
            params={"alternative_actor": "critic"},
        ),
        branch("short", 2, SHORT, "REQUEST_MORE_DETAIL", None, params={"retry_suffix": "More."}),
    )
    state = start(g)
    assert decide(g, state, StepResult("a", "", timed_out=True)).actor == "critic"
    again = decide(g, state, StepResult("a", "tiny"))
    assert (again.kind, again.actor, again.prompt_suffix) == ("repeat", "critic", "More.")
    assert decide(g, state, StepResult("a", "x" * 40)).next_step == "b"
    assert state.actor_override is None


def test_it_fails_the_run_when_the_step_limit_is_reached() -> None:
    g = graph(step("a", branch("loop", 1, target="a")))
    state = start(g, max_steps=3)
    kinds = [decide(g, state, StepResult("a", "x")).kind for _ in range(3)]
    assert kinds == ["goto", "goto", "fail"]
    state = start(g, max_steps=3)
    for _ in range(2):
        decide(g, state, StepResult("a", "x"))
    failed = decide(g, state, StepResult("a", "x"))
    assert (failed.kind, failed.next_step, failed.branch, failed.reason) == (
        "fail",
        None,
        None,
        "step limit 3 reached",
    )
    assert (failed.evaluations[0].matched, failed.evaluations[0].taken) == (True, False)


def test_it_still_ends_a_run_that_finishes_on_its_last_allowed_step() -> None:
    g = graph(step("a"), step("b"))
    state = start(g, max_steps=2)
    decide(g, state, StepResult("a", "x"))
    assert decide(g, state, StepResult("b", "y")).kind == "complete"


def test_it_fails_at_the_default_limit_of_one_hundred_steps() -> None:
    g = graph(step("a", branch("loop", 1, target="a")))
    state = start(g)
    decisions = [decide(g, state, StepResult("a", "x")) for _ in range(100)]
    assert [d.kind for d in decisions[:99]] == ["goto"] * 99
    assert (decisions[99].kind, decisions[99].reason) == ("fail", "step limit 100 reached")


def test_it_reads_the_reviewers_decision_on_the_human_step_and_after_it() -> None:
    g = graph(
        step(
            "review",
            branch("approve", 1, {"type": "human_decision", "value": "approve"}, target="publish"),
            branch("revise", 2, {"type": "human_decision", "value": "revise"}, target="rewrite"),
            kind="human",
            actor="editors",
        ),
        step("rewrite", prompt="Rewrite with {step1_response}"),
        step("publish", branch("was_approved", 1, {"type": "human_decision", "value": "approve"})),
    )
    state = start(g)
    first = decide(g, state, StepResult("review", comment="add a dragon", decision="revise"))
    assert (first.next_step, first.reason) == ("rewrite", "reviewer chose revise")
    assert state.latest_seq == {"review": 1}
    decide(g, state, StepResult("rewrite", "new draft"))
    state.record_decision("review", "approve")
    final = decide(g, state, StepResult("publish", "done"))
    assert (final.kind, final.reason) == ("complete", "reviewer chose approve")


def test_a_reviewers_comment_is_the_feedback_of_the_step_the_run_goes_to() -> None:
    g = graph(
        step("draft", prompt="Write. {feedback}"),
        step(
            "review",
            branch("revise", 1, {"type": "human_decision", "value": "revise"}, target="draft"),
            branch("reject", 2, {"type": "human_decision", "value": "reject"}, target="@end"),
            kind="human",
            actor="editors",
        ),
    )
    state = start(g)
    decide(g, state, StepResult("draft", "first draft"))
    revised = decide(g, state, StepResult("review", comment=" Name the storm. ", decision="revise"))
    assert (revised.next_step, revised.feedback) == ("draft", "Name the storm.")
    # A decision that ends the run sends none; nor does a revise without a comment.
    decide(g, state, StepResult("draft", "second draft"))
    ended = decide(g, state, StepResult("review", comment="No.", decision="reject"))
    assert ended.feedback is None
    silent = decide(g, start(g), StepResult("review", decision="revise"))
    assert silent.feedback is None


def test_it_reads_the_routes_an_earlier_classify_step_selected() -> None:
    g = graph(
        step(
            "triage",
            kind="classify",
            routes=[{"name": "billing"}, {"name": "respond", "always_active": True}],
        ),
        step(
            "answer",
            branch("billing", 1, {"type": "route_selected", "value": "billing"}, target="@end"),
        ),
    )
    state = start(g)
    decide(
        g, state, StepResult("triage", "billing, respond", route_selection=("billing", "respond"))
    )
    decision = decide(g, state, StepResult("answer", "hello"))
    assert (decision.kind, decision.reason) == ("end", "route billing selected")


def test_it_overlays_the_facts_with_a_json_response_for_the_next_conditions() -> None:
    when = {"type": "field_compare", "field": "image_count", "operator": "greater_than", "value": 0}
    g = graph(step("extract", branch("images", 1, when, target="@end")), step("b"), inputs={})
    state = RunState.start(g, {})
    decision = decide(g, state, StepResult("extract", '```json\n{"image_count": 2}\n```'))
    assert (decision.kind, decision.reason) == ("end", "field image_count 2 > 0")
    assert state.facts == {"image_count": 2}
    decide(g, state, StepResult("extract", "plain text"))
    assert state.facts == {}


def test_it_asks_the_judge_once_for_branches_that_share_evaluator_and_prompt() -> None:
    calls: list[tuple[str, str]] = []

    def judge(evaluator: str, prompt: str, text: str) -> str:
        calls.append((evaluator, prompt))
        return "Score: 7"

    rate = {"type": "ai_evaluation", "evaluator": "judge", "prompt": "Rate 1-10"}
    g = four_steps(
        branch("great", 1, {**rate, "operator": "greater_equal", "value": 9}, target="@complete"),
        branch("bad", 2, {**rate, "operator": "less_than", "value": 5}, target="@end"),
        branch("fine", 3, {**rate, "operator": "greater_equal", "value": 6}, target="b"),
    )
    decision = decide(g, start(g), StepResult("a", "a story"), judge=judge)
    assert (decision.next_step, decision.reason) == ("b", "judge scored 7 >= 6")
    assert calls == [("judge", "Rate 1-10")]


def test_it_lets_an_ai_evaluation_without_evaluator_use_the_steps_judge() -> None:
    seen: list[str] = []

    def judge(evaluator: str, prompt: str, text: str) -> str:
        seen.append(evaluator)
        return "9"

    g = graph(
        step(
            "a",
            branch(
                "good",
                1,
                {"type": "ai_evaluation", "operator": "greater_equal", "value": 8},
                target="@end",
            ),
            validation={"judge": "critic"},
        )
    )
    assert decide(g, start(g), StepResult("a", "x"), judge=judge).kind == "end"
    assert seen == ["critic"]


REFERENCE_TREE = {
    "version": "1.0",
    "tree": {
        "type": "node",
        "priority": 1,
        "condition": {"type": "check_safety", "operator": "has_unsafe_pages"},
        "if_true": {"type": "leaf", "prompt": "safety_focused"},
        "if_false": {"type": "leaf", "prompt": "base_classification"},
    },
}


def tree_graph(leaf_targets: dict[str, str], *branches: dict[str, Any]) -> RecipeGraph:
    return graph(
        step(
            "route",
            *branches,
            kind="decision_tree",
            actor=None,
            tree=REFERENCE_TREE,
            leaf_targets=leaf_targets,
        ),
        step("base_classification"),
        step("careful"),
        inputs={"unsafe_pages": {"type": "array"}},
    )


ERROR = {"type": "execution_error", "operator": "equals", "value": True}
TIMEOUT = {"type": "execution_timeout", "operator": "equals", "value": True}


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        (StepResult("a", error="provider said no"), "step 'a' failed: provider said no"),
        (StepResult("a", timed_out=True), "step 'a' failed: timed out"),
        (
            StepResult("a", error="no answer in 30 s", timed_out=True),
            "step 'a' failed: no answer in 30 s",
        ),
    ],
)
def test_it_fails_the_run_when_a_failed_step_takes_a_branch_that_ignores_failure(
    result: StepResult, reason: str
) -> None:
    g = four_steps(branch("short", 1, SHORT, target="b"), branch("other", 2, target="last"))
    decision = decide(g, start(g), result)
    assert (decision.kind, decision.next_step, decision.branch, decision.reason) == (
        "fail",
        None,
        None,
        reason,
    )
    # The length is not applicable to a failed step; the default matched, but the run
    # failed instead of following it.
    assert [(e.branch, e.matched, e.taken) for e in decision.evaluations] == [
        ("short", False, False),
        ("other", True, False),
    ]
    failure = reason.removeprefix("step 'a' failed: ")
    assert decision.evaluations[0].reason == f"not applicable: the step failed: {failure}"


def test_it_fails_the_run_when_a_failed_step_falls_through_to_the_next_step() -> None:
    g = four_steps(branch("on_error", 1, ERROR, target="b", active=False))
    decision = decide(g, start(g), StepResult("a", error="boom"))
    assert (decision.kind, decision.branch, decision.reason) == (
        "fail",
        None,
        "step 'a' failed: boom",
    )


@pytest.mark.parametrize(
    "when",
    [
        ERROR,
        TIMEOUT,
        {"type": "execution_error", "operator": "contains", "value": "boom"},
        {"type": "or", "conditions": [TIMEOUT, ERROR]},
        {
            "type": "and",
            "conditions": [
                TIMEOUT,
                {
                    "type": "not",
                    "conditions": [
                        {"type": "execution_error", "operator": "contains", "value": "quota"}
                    ],
                },
            ],
        },
    ],
)
def test_a_branch_that_asks_about_errors_or_timeouts_handles_a_failed_step(
    when: dict[str, Any],
) -> None:
    g = four_steps(branch("handled", 1, when, "ERROR_HANDLER", target="b"))
    decision = decide(g, start(g), StepResult("a", error="boom", timed_out=True))
    assert (decision.kind, decision.next_step, decision.branch) == ("goto", "b", "handled")


def test_a_failed_step_that_handles_nothing_fails_before_the_step_limit_is_told() -> None:
    g = graph(step("a", branch("loop", 1, target="a")))
    state = start(g, max_steps=1)
    decision = decide(g, state, StepResult("a", error="boom"))
    assert (decision.kind, decision.reason) == ("fail", "step 'a' failed: boom")


def test_a_decision_tree_leaf_does_not_handle_a_failed_step() -> None:
    g = tree_graph({})
    state = RunState.start(g, {"unsafe_pages": []})
    decision = decide(g, state, StepResult("route", error="the facts could not be read"))
    assert (decision.kind, decision.branch, decision.reason) == (
        "fail",
        None,
        "step 'route' failed: the facts could not be read",
    )


def test_it_sends_a_decision_tree_step_to_the_step_its_leaf_names() -> None:
    g = tree_graph({})
    state = RunState.start(g, {"unsafe_pages": []})
    decision = decide(g, state, StepResult("route", "base_classification"))
    assert (decision.kind, decision.next_step, decision.branch) == (
        "goto",
        "base_classification",
        "leaf:base_classification",
    )
    assert decision.reason == "node 1: 0 unsafe pages -> if_false → leaf base_classification"
    assert decision.evaluations[0].taken


def test_it_maps_a_leaf_through_leaf_targets() -> None:
    g = tree_graph({"safety_focused": "careful", "base_classification": "@complete"})
    assert (
        decide(
            g,
            RunState.start(g, {"unsafe_pages": [4]}),
            StepResult("route", "", leaf="safety_focused"),
        ).next_step
        == "careful"
    )
    assert (
        decide(g, RunState.start(g, {"unsafe_pages": []}), StepResult("route", "")).kind
        == "complete"
    )


def test_it_uses_a_tree_steps_branches_when_the_leaf_names_no_step() -> None:
    g = tree_graph({}, branch("unsafe", 1, {"type": "default"}, target="careful"))
    decision = decide(g, RunState.start(g, {"unsafe_pages": [1]}), StepResult("route", ""))
    assert (decision.next_step, decision.branch) == ("careful", "unsafe")
    assert [(e.branch, e.matched, e.taken) for e in decision.evaluations] == [
        ("leaf:safety_focused", True, False),
        ("unsafe", True, True),
    ]
    assert decision.evaluations[0].reason.endswith("; leaf safety_focused names no step")


def test_it_refuses_a_result_for_a_step_the_recipe_does_not_have() -> None:
    g = graph(step("a"))
    with pytest.raises(EngineError, match="unknown step 'zzz'"):
        decide(g, start(g), StepResult("zzz", "x"))


def test_it_continues_identically_after_a_json_round_trip_of_the_state() -> None:
    g = four_steps(branch("again", 1, SHORT, "CONTINUE", "@repeat", params={"max_retries": 2}))
    state = start(g)
    decide(g, state, StepResult("a", "short"))
    revived = RunState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert revived == state
    assert decide(g, revived, StepResult("a", "short")).kind == "repeat"
    assert decide(g, revived, StepResult("a", "short")).kind == "goto"


# -- properties -------------------------------------------------------------------------

CONDITIONS = st.one_of(
    st.builds(
        lambda v: {"type": "length_check", "operator": "less_than", "value": v}, st.integers(0, 30)
    ),
    st.builds(
        lambda v: {"type": "length_check", "operator": "greater_equal", "value": v},
        st.integers(0, 30),
    ),
    st.builds(
        lambda v: {"type": "pattern_match", "operator": "contains", "value": v},
        st.sampled_from(["a", "b", "ab", "z"]),
    ),
    st.just({"type": "default"}),
    st.just({"type": "content_type", "operator": "is", "value": "prose"}),
)
TARGETS = st.sampled_from(["@repeat", "@end", "@complete", "a", "b", "c"])


@st.composite
def branch_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(0, 6))
    priorities = draw(st.lists(st.integers(1, 50), min_size=count, max_size=count, unique=True))
    return [
        branch(
            f"b{i}",
            priority,
            draw(CONDITIONS),
            "CONTINUE",
            draw(TARGETS),
            active=draw(st.booleans()),
            params={"max_retries": draw(st.integers(0, 2))},
        )
        for i, priority in enumerate(priorities)
    ]


@settings(max_examples=200, deadline=None)
@given(
    branches=branch_lists(),
    responses=st.lists(st.text(alphabet="ab z", max_size=25), min_size=1, max_size=6),
    key=st.sampled_from(["a", "b", "c"]),
)
def test_exactly_one_branch_is_taken_or_the_sequence_goes_on_and_priority_is_followed(
    branches: list[dict[str, Any]], responses: list[str], key: str
) -> None:
    steps = [step(k, *(branches if k == key else [])) for k in ("a", "b", "c")]
    g = graph(*steps)
    state = start(g)
    active = sorted((b for b in branches if b["active"]), key=lambda b: b["priority"])
    for response in responses:
        decision = decide(g, state, StepResult(key, response))
        evaluations = decision.evaluations
        taken = [e for e in evaluations if e.taken]
        # Evaluated in ascending priority: a prefix of the active branches.
        assert [e.branch for e in evaluations] == [b["name"] for b in active[: len(evaluations)]]
        assert len(taken) <= 1
        if taken:
            assert evaluations[-1].taken and decision.branch == taken[0].branch
            assert all(not e.matched or e.reason.startswith("exhausted") for e in evaluations[:-1])
        else:
            assert len(evaluations) == len(active)
            assert decision.branch is None
            following = g.next_in_sequence(key)
            expected = ("goto", following.key) if following else ("complete", None)
            assert (decision.kind, decision.next_step) == expected
        if decision.kind == "fail":
            break
