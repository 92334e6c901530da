"""A branch that runs its step again waits `delay_seconds * backoff_factor ** n` first."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.engine.builders import branch, graph, recipe, step
from workflows.engine import RecipeInvalid, RunState, StepResult, decide, parse_recipe
from workflows.engine.retry_delays import MAX_DELAY_SECONDS, retry_delay

TIMEOUT = {"type": "execution_timeout", "operator": "equals", "value": True}
RETRIABLE = {"type": "error_severity", "operator": "equals", "value": "RETRIABLE"}
P = "steps[0].branches[0].params"


def waits(params: dict[str, Any], results: int, *, action: str = "CONTINUE") -> list[float]:
    """The waits the retries of step `a` ask for, one per failed result."""
    g = graph(
        step(
            "a",
            branch("again", 1, TIMEOUT, action, "@repeat", params=params),
            branch("gave_up", 2, TIMEOUT, "ERROR_HANDLER", "@end"),
        )
    )
    state = RunState.start(g, {"topic": "x"})
    decisions = [decide(g, state, StepResult("a", "", timed_out=True)) for _ in range(results)]
    return [d.delay_s for d in decisions]


def test_each_retry_waits_longer_by_the_backoff_factor() -> None:
    params = {"delay_seconds": 1, "backoff_factor": 2, "max_retries": 3}
    # Three retries (1, 2, 4 s), then the branch is exhausted and the error handler ends.
    assert waits(params, 4) == [1.0, 2.0, 4.0, 0.0]


def test_without_a_backoff_factor_every_retry_waits_the_same() -> None:
    assert waits({"delay_seconds": 0.5, "max_retries": 2}, 2) == [0.5, 0.5]


def test_a_repeat_action_and_a_retry_with_another_actor_wait_too() -> None:
    params = {"delay_seconds": 3, "backoff_factor": 1.5, "retry_suffix": "More."}
    assert waits(params, 2, action="REQUEST_MORE_DETAIL") == [3.0, 4.5]
    params = {"delay_seconds": 2, "alternative_actor": "judge", "max_retries": 2}
    assert waits(params, 2, action="RETRY_WITH_DIFFERENT_ACTOR") == [2.0, 2.0]


def test_a_branch_without_a_delay_does_not_wait() -> None:
    assert waits({"max_retries": 2}, 2) == [0.0, 0.0]


def test_a_retriable_error_sent_back_to_its_step_waits() -> None:
    g = graph(
        step(
            "a",
            branch("transient", 1, RETRIABLE, "CONTINUE", "@repeat", params={"delay_seconds": 5}),
            branch("gave_up", 2, TIMEOUT, "ERROR_HANDLER"),
        )
    )
    state = RunState.start(g, {"topic": "x"})
    decision = decide(g, state, StepResult("a", "", timed_out=True, transient=True))
    assert (decision.kind, decision.branch, decision.delay_s) == ("repeat", "transient", 5.0)


def test_the_evaluation_says_how_long_the_run_waits() -> None:
    g = graph(
        step("a", branch("again", 1, TIMEOUT, "CONTINUE", "@repeat", params={"delay_seconds": 2}))
    )
    state = RunState.start(g, {"topic": "x"})
    decision = decide(g, state, StepResult("a", "", timed_out=True))
    assert decision.evaluations[0].reason.endswith("; waits 2 s before running the step again")
    assert decision.reason == decision.evaluations[0].reason


def test_the_wait_is_capped_at_an_hour() -> None:
    params = {"delay_seconds": 600, "backoff_factor": 10}
    assert retry_delay(params, 0) == 600
    assert retry_delay(params, 1) == MAX_DELAY_SECONDS
    assert retry_delay(params, 10_000) == MAX_DELAY_SECONDS


def test_jitter_adds_at_most_its_share_of_the_wait() -> None:
    params = {"delay_seconds": 10, "backoff_factor": 2, "jitter": 0.5}
    rng = random.Random(7)
    delays = [retry_delay(params, 1, rng) for _ in range(200)]
    assert all(20 <= d <= 30 for d in delays)
    assert len(set(delays)) > 100  # spread, not one value


@pytest.mark.parametrize(
    ("params", "errors"),
    [
        (
            {"delay_seconds": -1},
            [f"{P}.delay_seconds: must be a number from 0 to 3600 (seconds), got -1"],
        ),
        (
            {"delay_seconds": 86400},
            [f"{P}.delay_seconds: must be a number from 0 to 3600 (seconds), got 86400"],
        ),
        (
            {"delay_seconds": "5s"},
            [f"{P}.delay_seconds: must be a number from 0 to 3600 (seconds), got '5s'"],
        ),
        (
            {"delay_seconds": True},
            [f"{P}.delay_seconds: must be a number from 0 to 3600 (seconds), got True"],
        ),
        (
            {"delay_seconds": 1, "backoff_factor": 0.5},
            [f"{P}.backoff_factor: must be a number from 1 to 10 (a factor), got 0.5"],
        ),
        (
            {"delay_seconds": 1, "jitter": 2},
            [f"{P}.jitter: must be a number from 0 to 1 (a fraction of the wait), got 2"],
        ),
        (
            {"backoff_factor": 2},
            [f"{P}.backoff_factor: needs params.delay_seconds, the first wait"],
        ),
    ],
)
def test_bad_delays_are_rejected_with_their_path(params: dict[str, Any], errors: list[str]) -> None:
    doc = recipe(step("a", branch("again", 1, TIMEOUT, "CONTINUE", "@repeat", params=params)))
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(doc)
    assert caught.value.errors == errors


def test_a_branch_that_does_not_run_its_step_again_cannot_wait() -> None:
    doc = recipe(
        step("a", branch("on", 1, TIMEOUT, "CONTINUE", "b", params={"delay_seconds": 1})),
        step("b"),
    )
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(doc)
    assert caught.value.errors == [
        f"{P}.delay_seconds: only a branch that runs its step again (@repeat or a retry) waits"
    ]


def test_a_list_of_alternative_actors_is_checked_alias_by_alias() -> None:
    def retry(alternatives: object) -> dict[str, Any]:
        params = {"alternative_actor": alternatives}
        return recipe(
            step("a", branch("r", 1, TIMEOUT, "RETRY_WITH_DIFFERENT_ACTOR", None, params=params))
        )

    assert parse_recipe(retry(["judge", "critic"])).step("a").branches[0].params[
        "alternative_actor"
    ] == ["judge", "critic"]
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(retry(["judge", "poet", 3]))
    assert caught.value.errors == [
        f"{P}.alternative_actor[1]: unknown actor alias 'poet'; declared: critic, editors, judge, writer",
        f"{P}.alternative_actor[2]: must be a string, got int",
    ]
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(retry([]))
    assert caught.value.errors == [f"{P}.alternative_actor: must list 1 to 20 actor aliases, got 0"]
