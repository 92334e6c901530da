"""Confidence as design note 001 reckons it: rules that all pass give the base score 0.5, then
confidence = 0.3 x rules + 0.7 x judge / 100 against the threshold 0.75; each number is a
step's (or its recipe's) `validation` setting."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.builders import graph, recipe, step
from workflows.engine import RecipeInvalid, Scoring, parse_recipe, run_validation_loop
from workflows.engine.lint import lint_errors, lint_recipe

DEFAULT = Scoring()
ANSWER = "A dragon lived under the old bridge and guarded it."


def times(text: str) -> str:
    """Spell the products of `text` with the multiplication sign, as the arithmetic does."""
    return text.replace(" x ", " \u00d7 ")


def verdict(total: float) -> str:
    each = total / 4
    return json.dumps(
        {
            "relevance": each,
            "helpfulness": each,
            "accuracy": each,
            "completeness": each,
            "feedback": "More.",
        }
    )


def loop(total: float, scoring: Scoring = DEFAULT, attempts: int = 1) -> Any:
    return run_validation_loop(
        lambda feedback: ANSWER,
        lambda prompt: verdict(total),
        question="Write about a dragon.",
        scoring=scoring,
        max_attempts=attempts,
        fallback="No answer.",
    )


def test_a_perfect_answer_scores_the_notes_example_confidence_of_0_85() -> None:
    outcome = loop(100)

    assert outcome.confidence == 0.85  # the note's example output
    assert not outcome.used_fallback
    assert outcome.attempts[0].rule_score == 0.5
    assert outcome.attempts[0].arithmetic == times("0.3 x 0.50 + 0.7 x 1.00 = 0.85 ≥ 0.75")


def test_a_judge_total_of_65_no_longer_passes_the_default_threshold() -> None:
    outcome = loop(65)

    assert outcome.used_fallback
    assert outcome.confidence == pytest.approx(0.15 + 0.455)
    assert outcome.attempts[0].arithmetic == times("0.3 x 0.50 + 0.7 x 0.65 = 0.60 < 0.75")


@pytest.mark.parametrize(("total", "passes"), [(85, False), (86, True)])
def test_the_judge_needs_about_86_of_100_to_pass(total: float, passes: bool) -> None:
    assert loop(total).used_fallback is not passes


def test_the_arithmetic_reads_as_the_note_writes_the_formula() -> None:
    assert Scoring().arithmetic(0.5, 72) == times("0.3 x 0.50 + 0.7 x 0.72 = 0.65 < 0.75")
    assert Scoring().arithmetic(0.5, None) == (
        times("0.3 x 0.50 + 0.7 x 0 (no readable verdict) = 0.15 < 0.75")
    )
    # Two decimals would read 0.75 < 0.75: it shows as many as tell the two apart.
    assert Scoring().arithmetic(0.5, 85.7) == times("0.3 x 0.50 + 0.7 x 0.86 = 0.7499 < 0.75")
    scoring = Scoring(threshold=0.6, rule_base=1, rule_weight=0.2, judge_weight=0.8)
    assert scoring.arithmetic(1, 50) == times("0.2 x 1.00 + 0.8 x 0.50 = 0.60 ≥ 0.6")


def test_an_unreadable_verdict_scores_the_rules_alone() -> None:
    outcome = run_validation_loop(
        lambda feedback: ANSWER,
        lambda prompt: "Nice.",
        question="q",
        max_attempts=1,
        fallback="-",
    )
    assert outcome.attempts[0].judge_total is None
    assert outcome.confidence == pytest.approx(0.15)


def test_the_rule_scale_weights_and_threshold_change_the_score() -> None:
    # The old reckoning (rules 0-1) is one setting away.
    old = Scoring(rule_base=1)
    assert loop(65, old).confidence == pytest.approx(0.755)
    assert not loop(65, old).used_fallback
    judge_only = Scoring(rule_weight=0, judge_weight=1, threshold=0.9)
    assert loop(90, judge_only).confidence == pytest.approx(0.9)
    assert not loop(90, judge_only).used_fallback


def validated(settings: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """Parse a one-step recipe whose step has `settings` as its validation."""
    doc = recipe(step("a", validation={"fallback": "-", **(settings or {})}), **fields)
    return dict(parse_recipe(doc).steps[0].validation or {})


def test_a_step_without_settings_gets_the_notes_numbers() -> None:
    assert validated() == {
        "threshold": 0.75,
        "max_attempts": 5,
        "rule_base": 0.5,
        "rule_weight": 0.3,
        "judge_weight": 0.7,
        "judge": None,
        "fallback": "-",
    }


def test_a_step_sets_its_own_scale_weights_and_threshold() -> None:
    settings = validated(
        {"threshold": 0.6, "rule_base": 1, "rule_weight": 0.2, "judge_weight": 0.8}
    )
    assert Scoring.of(settings) == Scoring(0.6, 1, 0.2, 0.8)


def test_a_step_inherits_the_recipes_validation_and_overrides_what_it_sets() -> None:
    defaults = {"threshold": 0.7, "max_attempts": 3, "rule_weight": 0.2, "judge_weight": 0.8}
    defaults["judge"] = "critic"
    inherited = validated(validation=defaults)
    assert Scoring.of(inherited) == Scoring(0.7, 0.5, 0.2, 0.8)
    assert (inherited["max_attempts"], inherited["judge"]) == (3, "critic")

    own = validated({"threshold": 0.8, "judge": "judge"}, validation=defaults)
    assert Scoring.of(own) == Scoring(0.8, 0.5, 0.2, 0.8)
    assert (own["max_attempts"], own["judge"]) == (3, "judge")


def test_the_recipes_validation_validates_no_step_by_itself() -> None:
    g = graph(step("a"), validation={"threshold": 0.6})
    assert g.steps[0].validation is None


def test_every_step_validates_each_llm_step_without_its_own_and_false_opts_out() -> None:
    every = {"every_step": True, "threshold": 0.7, "fallback": "Sorry, no good answer."}
    g = graph(
        step("plain"),
        step("own", validation={"threshold": 0.8, "fallback": "-"}),
        step("out", validation=False),
        validation=every,
    )
    plain, own, out = (s.validation for s in g.steps)
    assert plain is not None and own is not None
    assert (plain["threshold"], plain["fallback"]) == (0.7, "Sorry, no good answer.")
    assert (own["threshold"], own["fallback"]) == (0.8, "-")
    assert out is None
    assert lint_recipe(g) == []  # the recipe's fallback is each step's


def test_every_step_without_a_fallback_is_refused_on_each_step() -> None:
    g = graph(step("plain"), validation={"every_step": True})
    assert any(e.startswith("steps[0].validation.fallback: required") for e in lint_errors(g))


@pytest.mark.parametrize(
    ("settings", "recipe_settings", "error"),
    [
        ({"threshold": 1.5}, None, "steps[0].validation.threshold: must be a number from 0 to 1"),
        ({"threshold": "high"}, None, "steps[0].validation.threshold: must be a number from 0"),
        ({"rule_weight": -0.1}, None, "steps[0].validation.rule_weight: must be a number from 0"),
        ({"judge_weight": True}, None, "steps[0].validation.judge_weight: must be a number"),
        ({"rule_base": 2}, None, "steps[0].validation.rule_base: must be a number from 0 to 1"),
        ({"max_attempts": 2.5}, None, "steps[0].validation.max_attempts: must be a whole number"),
        ({"max_attempts": 10**9}, None, "steps[0].validation.max_attempts: must be a whole number"),
        (
            {"rule_weight": 0.5, "judge_weight": 0.7},
            None,
            "steps[0].validation: rule_weight 0.5 and judge_weight 0.7 add up to 1.2; at most 1,"
            " so that a confidence stays from 0 to 1",
        ),
        (
            {"rule_weight": 0.5},
            None,
            "steps[0].validation: rule_weight 0.5 and judge_weight 0.7 add up to 1.2; at most 1,"
            " so that a confidence stays from 0 to 1 (judge_weight is inherited: set it here too)",
        ),
        (
            {"rule_weight": 0, "judge_weight": 0},
            None,
            "steps[0].validation: rule_weight and judge_weight are both 0: every answer would"
            " score 0",
        ),
        ({}, {"threshold": -1}, "validation.threshold: must be a number from 0 to 1, got -1"),
        (
            {},
            {"rule_weight": 0.6, "judge_weight": 0.6},
            "validation: rule_weight 0.6 and judge_weight 0.6 add up to 1.2; at most 1",
        ),
        ({}, {"judge": "oracle"}, "validation.judge: unknown actor alias 'oracle'"),
        ({}, {"every_step": "yes"}, "validation.every_step: must be true or false, got 'yes'"),
    ],
)
def test_it_refuses_bad_settings_at_their_path(
    settings: dict[str, Any], recipe_settings: dict[str, Any] | None, error: str
) -> None:
    fields = {} if recipe_settings is None else {"validation": recipe_settings}
    with pytest.raises(RecipeInvalid) as raised:
        validated(settings, **fields)
    assert any(e.startswith(error) for e in raised.value.errors), raised.value.errors


def test_weights_adding_up_to_one_with_float_noise_are_accepted() -> None:
    assert validated({"rule_weight": 0.1, "judge_weight": 0.9})["judge_weight"] == 0.9


def test_lint_warns_of_a_threshold_no_answer_can_reach() -> None:
    g = graph(step("a", validation={"threshold": 0.9, "fallback": "-"}))
    assert times(
        "steps[0].validation.threshold: 0.9 is never reached: a perfect answer scores "
        "0.3 x 0.50 + 0.7 x 1.00 = 0.85 < 0.9, so every answer is replaced by the fallback"
    ) in lint_recipe(g)
    reachable = graph(step("a", validation={"threshold": 0.85, "fallback": "-"}))
    assert not [w for w in lint_recipe(reachable) if "never reached" in w]
