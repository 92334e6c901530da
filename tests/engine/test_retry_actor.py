"""RETRY_WITH_DIFFERENT_ACTOR never goes back to an actor already failed in the step's visit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.builders import branch, graph, step
from workflows.engine import (
    Learning,
    Observation,
    RecipeGraph,
    RunState,
    StepResult,
    decide,
    parse_recipe,
)
from workflows.engine.replay import RecordedStep, replay

WRONG = {"type": "pattern_match", "operator": "contains", "value": "wrong"}
ACTORS = {"a": "model-a", "b": "model-b", "c": "model-c", "editors": "@human:editors"}


def three_actors(**params: Any) -> RecipeGraph:
    """Return a recipe whose step `s`, run by `a`, retries with another actor on a wrong answer."""
    retry = branch("retry", 1, WRONG, "RETRY_WITH_DIFFERENT_ACTOR", None, params=params)
    return parse_recipe(
        {
            "format": "branchline.recipe/v1",
            "slug": "three",
            "name": "Three",
            "actors": ACTORS,
            "steps": [
                step("s", retry, branch("done", 2, target="next"), actor="a"),
                step("next", actor="a"),
            ],
        }
    )


def judged(**records: tuple[int, int]) -> list[Observation]:
    """Judged attempts per actor: (successes, failures)."""
    return [
        Observation(actor, "", success)
        for actor, (good, bad) in records.items()
        for success in [True] * good + [False] * bad
    ]


def walk(g: RecipeGraph, state: RunState, answers: dict[str, str], **kw: Any) -> list[str]:
    """Run step `s` until it moves on; return the actors that ran it, in order."""
    ran = ["a"]
    for _ in range(10):
        decision = decide(g, state, StepResult("s", answers[ran[-1]]), **kw)
        if decision.kind != "retry_actor":
            return ran
        assert decision.actor is not None
        ran.append(decision.actor)
    return ran


@pytest.mark.parametrize(
    ("answers", "stats", "trail"),
    [
        # a and b answer wrong, c right: each actor once, never back to a.
        ({"a": "wrong", "b": "wrong", "c": "right"}, [], ["a", "b", "c"]),
        # What was learned picks the order; a failed actor is still never asked again.
        (
            {"a": "wrong", "b": "right", "c": "wrong"},
            judged(c=(9, 1), b=(1, 9), a=(10, 0)),
            ["a", "c", "b"],
        ),
        # Everyone wrong: once every actor has failed, the retry is exhausted.
        ({"a": "wrong", "b": "wrong", "c": "wrong"}, [], ["a", "b", "c"]),
        # The first answer is right: no retry.
        ({"a": "right", "b": "wrong", "c": "wrong"}, [], ["a"]),
    ],
)
def test_a_retry_never_returns_to_an_actor_already_failed_in_the_visit(
    answers: dict[str, str], stats: list[Observation], trail: list[str]
) -> None:
    g = three_actors(max_retries=5)
    learning = Learning(stats)
    assert walk(g, RunState.start(g), answers, learning=learning) == trail


def test_it_treats_the_retry_as_exhausted_once_every_actor_failed() -> None:
    g = three_actors(max_retries=5)
    state = RunState.start(g)
    for actor in ("a", "b"):
        decide(g, state, StepResult("s", f"wrong from {actor}"))
    last = decide(g, state, StepResult("s", "wrong from c"))
    assert (last.kind, last.next_step) == ("goto", "next")
    assert last.evaluations[0].reason == "no other actor available; treated as exhausted"


def test_a_named_alternative_is_asked_as_often_as_max_retries_says() -> None:
    g = three_actors(alternative_actor="b", max_retries=5)
    state = RunState.start(g)
    actors = [decide(g, state, StepResult("s", "wrong")).actor for _ in range(5)]
    assert actors == ["b"] * 5
    again = decide(g, state, StepResult("s", "wrong"))
    assert (again.kind, again.next_step) == ("goto", "next")
    assert again.evaluations[0].reason == "exhausted after 5 retries"


def test_a_named_alternative_is_asked_the_default_three_times() -> None:
    g = three_actors(alternative_actor="b")
    state = RunState.start(g)
    kinds = [decide(g, state, StepResult("s", "wrong")).kind for _ in range(4)]
    assert kinds == ["retry_actor"] * 3 + ["goto"]


def test_a_list_of_alternatives_is_asked_in_order_then_its_last_one_again() -> None:
    g = three_actors(alternative_actor=["b", "c"], max_retries=4)
    state = RunState.start(g)
    actors = [decide(g, state, StepResult("s", "wrong")).actor for _ in range(5)]
    assert actors == ["b", "c", "c", "c", None]
    assert state.actor_override is None


def test_a_replayed_state_goes_on_down_the_list_of_alternatives() -> None:
    g = three_actors(alternative_actor=["b", "c"], max_retries=4)
    state = RunState.start(g)
    recorded = [
        RecordedStep(StepResult("s", "wrong"), "retry", "a"),
        RecordedStep(StepResult("s", "wrong"), "retry", "b"),
    ]
    replay(g, state, recorded)
    assert state.actor_override == "c"
    assert decide(g, state, StepResult("s", "wrong", actor="c")).actor == "c"


def test_a_timeout_takes_model_timeout_with_its_alternative_twice() -> None:
    """The reference design's branch: `model_timeout`, priority 5, on execution_timeout,
    RETRY_DIFFERENT_ACTOR with `alternative_actor` and `max_retries` 2."""
    timeout = branch(
        "model_timeout",
        5,
        {"type": "execution_timeout", "operator": "equals", "value": True},
        "RETRY_DIFFERENT_ACTOR",
        None,
        params={"alternative_actor": "b", "max_retries": 2},
    )
    handled = branch(
        "gave_up",
        9,
        {"type": "execution_timeout", "operator": "equals", "value": True},
        "ERROR_HANDLER",
        "next",
    )
    g = parse_recipe(
        {
            "format": "branchline.recipe/v1",
            "slug": "timeouts",
            "name": "Timeouts",
            "actors": ACTORS,
            "steps": [step("s", timeout, handled, actor="a"), step("next", actor="a")],
        }
    )
    state = RunState.start(g)
    taken = []
    for actor in ("a", "b", "b"):
        decision = decide(g, state, StepResult("s", "", timed_out=True, actor=actor))
        taken.append((decision.branch, decision.kind, decision.actor))
    assert taken == [
        ("model_timeout", "retry_actor", "b"),
        ("model_timeout", "retry_actor", "b"),
        ("gave_up", "goto", None),
    ]
    assert decision.evaluations[0].reason == "exhausted after 2 retries"


def test_a_new_visit_of_the_step_may_try_every_actor_again() -> None:
    retry = branch("retry", 1, WRONG, "RETRY_WITH_DIFFERENT_ACTOR", None)
    g = parse_recipe(
        {
            "format": "branchline.recipe/v1",
            "slug": "loop",
            "name": "Loop",
            "actors": ACTORS,
            "steps": [
                step("s", retry, branch("back", 2, target="t"), actor="a"),
                step("t", branch("again", 1, target="s"), actor="a"),
            ],
        }
    )
    state = RunState.start(g)
    assert decide(g, state, StepResult("s", "wrong")).actor == "b"
    assert decide(g, state, StepResult("s", "fine")).next_step == "t"
    assert state.tried_actors == {"s": ["a"]}
    decide(g, state, StepResult("t", "x"))
    # Back in s: b failed in the first visit only, so it is the best other again.
    assert decide(g, state, StepResult("s", "wrong")).actor == "b"
    assert state.tried_actors == {"s": ["a"]}


def test_the_actors_tried_survive_the_state_round_trip() -> None:
    g = three_actors(max_retries=5)
    state = RunState.start(g)
    decide(g, state, StepResult("s", "wrong"))
    decide(g, state, StepResult("s", "wrong"))
    restored = RunState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert restored.tried_actors == {"s": ["a", "b"]}
    assert restored == state
    assert decide(g, restored, StepResult("s", "wrong")).kind == "goto"


def test_a_state_stored_before_the_actors_tried_still_leaves_the_steps_own_actor() -> None:
    g = three_actors(max_retries=5)
    state = RunState.start(g)
    decide(g, state, StepResult("s", "wrong"))
    old = state.to_dict()
    del old["tried_actors"]
    restored = RunState.from_dict(old)
    assert restored.tried_actors == {}
    # b runs now; the step's own actor a is still known to have failed.
    assert decide(g, restored, StepResult("s", "wrong")).actor == "c"


def test_a_replayed_state_remembers_the_actors_tried() -> None:
    g = three_actors(max_retries=5)
    state = RunState.start(g)
    recorded = [
        RecordedStep(StepResult("s", "wrong"), "retry", "a"),
        RecordedStep(StepResult("s", "wrong"), "retry", "b"),
    ]
    replay(g, state, recorded)
    assert state.tried_actors == {"s": ["a", "b"]}
    assert state.actor_override == "c"


def test_the_builders_recipe_retries_through_every_model_actor() -> None:
    g = graph(
        step(
            "a",
            branch(
                "retry", 1, WRONG, "RETRY_WITH_DIFFERENT_ACTOR", None, params={"max_retries": 9}
            ),
        )
    )
    state = RunState.start(g, {"topic": "x"})
    actors = [decide(g, state, StepResult("a", "wrong")).actor for _ in range(3)]
    assert actors == ["judge", "critic", None]  # nothing learned yet: in the order declared
