"""The learner: which actor and prompt variant a step runs with, from its judged attempts."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.engine.builders import branch, recipe, step
from workflows.engine import (
    Learning,
    Observation,
    RecipeGraph,
    RecipeInvalid,
    RunState,
    StepResult,
    decide,
    first_choice,
    parse_recipe,
    seeded,
)
from workflows.engine.learner import (
    RULE_BEST,
    RULE_EVIDENCE,
    RULE_SAMPLED,
    STRATEGIES_HEADING,
    Arm,
    LearnerSettings,
    choose,
    format_strategies,
    parse_learning,
)
from workflows.engine.outcomes import attempt_outcome

WRONG = {"type": "pattern_match", "operator": "contains", "value": "wrong"}
ACTORS = {"a": "model-a", "b": "model-b", "c": "model-c", "editors": "@human:editors"}


def seen(
    actor: str, successes: int, failures: int, variant: str = "", **kw: Any
) -> list[Observation]:
    """`successes` then `failures` judged attempts of one arm, interleaved newest first."""
    return [Observation(actor, variant, True, **kw)] * successes + [
        Observation(actor, variant, False, **kw)
    ] * failures


ABC = [Arm("a"), Arm("b"), Arm("c")]


@pytest.mark.parametrize(
    ("observations", "settings", "full", "picked", "rule"),
    [
        # No evidence: the least tried, in the order given.
        ([], LearnerSettings(), (), "a", RULE_EVIDENCE),
        # a was tried thrice, b twice, c never: c is heard first.
        (seen("a", 3, 0) + seen("b", 2, 0), LearnerSettings(), (), "c", RULE_EVIDENCE),
        # Enough evidence of each: the sampler favours the one that succeeds.
        (
            seen("a", 0, 5) + seen("b", 0, 5) + seen("c", 5, 0),
            LearnerSettings(),
            (),
            "c",
            RULE_SAMPLED,
        ),
        # Exploration off: the best mean at once, unproven arms or not.
        (seen("b", 4, 1), LearnerSettings(explore=False), (), "b", RULE_BEST),
        # Exploration off, no evidence: all tie; the first in order.
        ([], LearnerSettings(explore=False), (), "a", RULE_BEST),
        # A full actor is passed over while another has capacity…
        (seen("a", 0, 5) + seen("b", 0, 5) + seen("c", 5, 0), LearnerSettings(), ("c",), "a", None),
        # …but when every actor is full, the best is still chosen (its step waits).
        (
            seen("a", 0, 5) + seen("b", 0, 5) + seen("c", 5, 0),
            LearnerSettings(explore=False),
            ("a", "b", "c"),
            "c",
            RULE_BEST,
        ),
        # min_evidence 0: nothing is explored for lack of evidence.
        ([], LearnerSettings(min_evidence=0, explore=False), (), "a", RULE_BEST),
    ],
)
def test_it_chooses_by_evidence_capacity_and_settings(
    observations: list[Observation],
    settings: LearnerSettings,
    full: tuple[str, ...],
    picked: str,
    rule: str | None,
) -> None:
    choice = choose(ABC, observations, settings=settings, rng=random.Random(1), full=full)
    assert choice is not None
    if rule is not None:
        assert choice.rule == rule
    if picked == "a" and full == ("c",):
        assert choice.arm.actor in ("a", "b")  # either of the two with capacity
    else:
        assert choice.arm.actor == picked


def test_ties_go_to_the_cheaper_arm_by_cost_then_by_tokens() -> None:
    explore_off = LearnerSettings(explore=False)
    by_cost = seen("a", 4, 1, cost=0.02, tokens=10) + seen("b", 4, 1, cost=0.01, tokens=900)
    assert choose(ABC[:2], by_cost, settings=explore_off, rng=seeded(1)).arm.actor == "b"
    by_tokens = seen("a", 4, 1, tokens=300) + seen("b", 4, 1, tokens=200)
    assert choose(ABC[:2], by_tokens, settings=explore_off, rng=seeded(1)).arm.actor == "b"
    # While gathering evidence, equally tried arms go to the cheaper too.
    few = seen("a", 1, 0, cost=0.5) + seen("b", 1, 0, cost=0.1)
    assert choose(ABC[:2], few, rng=seeded(1)).arm.actor == "b"


def test_old_evidence_fades_with_the_half_life() -> None:
    # a failed 40 times long ago and has succeeded 10 times since; b the other way round.
    newest_first = (seen("a", 10, 0) + seen("b", 0, 10)) + (seen("a", 0, 40) + seen("b", 40, 0))
    explore_off = LearnerSettings(explore=False, half_life=5)
    assert choose(ABC[:2], newest_first, settings=explore_off, rng=seeded(1)).arm.actor == "a"
    remembers = LearnerSettings(explore=False, half_life=100_000)
    assert choose(ABC[:2], newest_first, settings=remembers, rng=seeded(1)).arm.actor == "b"


def test_the_same_seed_draws_the_same_choices() -> None:
    evidence = seen("a", 3, 3) + seen("b", 3, 3) + seen("c", 3, 3)
    first = [choose(ABC, evidence, rng=seeded("run", 7, i)).arm.actor for i in range(30)]
    again = [choose(ABC, evidence, rng=seeded("run", 7, i)).arm.actor for i in range(30)]
    assert first == again
    assert len(set(first)) > 1  # equal evidence: the sampler explores every arm


def test_every_choice_keeps_its_reason_and_each_arms_evidence() -> None:
    choice = choose(ABC, seen("a", 0, 5) + seen("b", 0, 5) + seen("c", 5, 0), rng=seeded(3))
    data = choice.as_json()
    assert (data["actor"], data["rule"], data["explored"]) == ("c", RULE_SAMPLED, False)
    assert data["reason"].startswith("c: Thompson sampling, 5 of 5 attempts succeeded")
    c = next(e for e in data["evidence"] if e["actor"] == "c")
    assert (c["wins"], c["attempts"], c["failures"], c["has_capacity"]) == (5, 5, 0, True)
    assert 4 < c["successes"] < 5  # weighted: the older attempts weigh less
    assert all(e["score"] is not None for e in data["evidence"])


@pytest.mark.parametrize(
    ("learning", "error"),
    [
        ("yes", "learning: must be an object, got str"),
        ({"explore": "no"}, "learning.explore: must be true or false, got 'no'"),
        ({"min_evidence": -1}, "learning.min_evidence: must be a whole number from 0 to 1000"),
        ({"half_life": 0}, "learning.half_life: must be a whole number of attempts from 1"),
        (
            {"decay": 1},
            "learning.decay: unknown field; expected explore, min_evidence, half_life, share",
        ),
    ],
)
def test_bad_learning_settings_are_refused_with_their_path(learning: object, error: str) -> None:
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(recipe(step("a"), learning=learning))
    assert any(e.startswith(error) for e in caught.value.errors), caught.value.errors


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (
            {"kind": "human", "actor": "@learned", "prompt": "x"},
            "steps[0].actor: @learned is for llm steps only",
        ),
        ({"variants": "short"}, "steps[0].variants: must be a list of {name, prompt} objects"),
        ({"variants": [{"name": "x"}]}, "steps[0].variants[0].prompt: is required"),
        (
            {"variants": [{"name": "+ x", "prompt": "p"}]},
            "steps[0].variants[0].name: must be 1 to 200",
        ),
        (
            {"variants": [{"name": "x", "prompt": "p"}, {"name": "x", "prompt": "q"}]},
            "steps[0].variants[1].name: the variant 'x' is listed twice",
        ),
        ({"variants": [{"name": "x", "prompt": "{nope}"}]}, "steps[0].variants[0].prompt:"),
        (
            {"candidates": ["writer", "ghost"]},
            "steps[0].candidates[1]: unknown actor alias 'ghost'",
        ),
        ({"candidates": ["editors"]}, "steps[0].candidates[0]: 'editors' is a reviewer group"),
    ],
)
def test_bad_learning_fields_of_a_step_are_refused_with_their_path(
    fields: dict[str, Any], error: str
) -> None:
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(recipe(step("a", **fields)))
    assert any(e.startswith(error) for e in caught.value.errors), caught.value.errors


def adaptive(explore: bool = True) -> RecipeGraph:
    """A step the learner runs with a, b or c, retried with another actor on a wrong answer."""
    retry = branch("retry", 1, WRONG, "RETRY_WITH_DIFFERENT_ACTOR", None, params={"max_retries": 5})
    return parse_recipe(
        recipe(
            step("s", retry, branch("done", 2, action="QUALITY_APPROVED"), actor="@learned"),
            actors=ACTORS,
            inputs={},
            learning={"explore": explore},
        )
    )


ANSWERS = {"a": "wrong: a guess", "b": "wrong: off topic", "c": "right"}


def one_run(g: RecipeGraph, run: int, history: list[Observation]) -> list[str]:
    """Run step `s` as the runner does, adding each judged attempt to `history` (newest
    first); return the actors in the order they ran."""
    state = RunState.start(g)
    step = g.step("s")
    choice = first_choice(g, step, Learning(history, rng=seeded(run, "s", 1)))
    assert choice is not None
    ran = [choice.arm.actor]
    for seq in range(2, 10):
        actor = ran[-1]
        learning = Learning(list(history), rng=seeded(run, "s", seq))
        decision = decide(g, state, StepResult("s", ANSWERS[actor], actor=actor), learning=learning)
        outcome = attempt_outcome(step, decision.branch, failed=False, run_failed=False)
        history.insert(0, Observation(actor, "", outcome == "success"))
        if decision.kind != "retry_actor":
            return ran
        assert decision.actor not in ran, "a retry went back to an actor that failed"
        ran.append(decision.actor)
    raise AssertionError(f"run {run} did not end: {ran}")


@pytest.mark.parametrize("seed", range(10))
def test_after_20_runs_it_picks_the_actor_that_answers_right_first_in_90_percent(seed: int) -> None:
    g = adaptive()
    history: list[Observation] = []
    for run in range(20):
        one_run(g, seed * 1000 + run, history)
    firsts = [one_run(g, seed * 1000 + run, history)[0] for run in range(20, 120)]
    assert firsts.count("c") >= 90, firsts


def test_with_exploration_off_it_exploits_from_the_first_evidence() -> None:
    g = adaptive(explore=False)
    history: list[Observation] = []
    trails = [one_run(g, run, history) for run in range(5)]
    # Nothing known: a, then b, then c; from then on c has the best mean and runs first.
    assert trails[0] == ["a", "b", "c"]
    assert [t[0] for t in trails[1:]] == ["c"] * 4


def test_a_step_with_variants_learns_which_prompt_works() -> None:
    doc = recipe(
        step(
            "s",
            branch(
                "retry", 1, WRONG, "REQUEST_MORE_DETAIL", None, params={"retry_suffix": "Be exact."}
            ),
            variants=[{"name": "direct", "prompt": "Give the data directly."}],
        ),
        learning={"min_evidence": 1},
    )
    g = parse_recipe(doc)
    step_ = g.step("s")
    history = seen("writer", 0, 4) + seen("writer", 4, 0, variant="direct")
    choice = first_choice(g, step_, Learning(history, rng=seeded(1)))
    assert choice is not None and choice.arm == Arm("writer", "direct")
    # A suffix that led to success is a candidate too, with the step's own actor only.
    history = seen("writer", 3, 0, variant="+ Be exact.") + history
    arms = {e.arm for e in first_choice(g, step_, Learning(history, rng=seeded(2))).evidence}
    assert arms == {Arm("writer"), Arm("writer", "direct"), Arm("writer", "+ Be exact.")}


def test_a_step_that_does_not_learn_makes_no_first_choice() -> None:
    g = parse_recipe(recipe(step("s")))
    assert first_choice(g, g.step("s"), Learning()) is None


def test_candidates_limit_the_actors_a_learned_step_chooses_among() -> None:
    g = parse_recipe(recipe(step("s", actor="@learned", candidates=["critic", "judge"])))
    choice = first_choice(g, g.step("s"), Learning())
    assert choice is not None
    assert {e.arm.actor for e in choice.evidence} == {"critic", "judge"}


def test_a_repeat_keeps_the_actor_and_variant_the_visit_runs_with() -> None:
    doc = recipe(
        step(
            "s",
            branch("more", 1, WRONG, "REQUEST_MORE_DETAIL", None, params={"retry_suffix": "More."}),
            actor="@learned",
        )
    )
    g = parse_recipe(doc)
    state = RunState.start(g, {"topic": "x"})
    decision = decide(g, state, StepResult("s", "wrong", actor="critic", variant="v"))
    assert (decision.kind, decision.actor, decision.variant) == ("repeat", "critic", "v")


def test_learned_strategies_are_shown_as_a_heading_and_a_line_each() -> None:
    assert format_strategies([]) == ""
    shown = format_strategies(["+ Ask for the data.", "+ Ask  for the data.", "+ Be brief."])
    assert shown == f"{STRATEGIES_HEADING}\n- Ask for the data.\n- Be brief."
    assert format_strategies([f"+ tip {n}" for n in range(9)]).count("\n- ") == 5


def test_share_is_read_from_the_learning_settings() -> None:
    errors: list[tuple[str, str]] = []
    assert parse_learning({"share": True}, lambda p, m: errors.append((p, m))).share is True
    assert parse_learning({}, lambda p, m: errors.append((p, m))).share is False
    assert errors == []
    parse_learning({"share": "yes"}, lambda p, m: errors.append((p, m)))
    assert errors == [("learning.share", "must be true or false, got 'yes'")]
