"""Evaluating a condition built by hand, and refusing a type the registry lacks."""

from __future__ import annotations

import pytest

from workflows.engine import Condition, EngineError, EvalContext, evaluate_condition


def test_it_evaluates_a_hand_built_condition_without_a_parser() -> None:
    pattern = Condition("pattern_match", "regex_match", r"\d+", {"flags": ""})
    assert evaluate_condition(pattern, EvalContext(text="abc 42")) == (
        True,
        'regex matched "42" at 4',
    )
    both = Condition("and", "and", None, {}, (pattern, Condition("length_check", "less_than", 10)))
    assert evaluate_condition(both, EvalContext(text="abc 42")) == (
        True,
        'and: [regex matched "42" at 4; length 6 < 10]',
    )


def test_it_refuses_an_unknown_condition_type_at_evaluation() -> None:
    with pytest.raises(EngineError, match="unknown condition type 'vibes'"):
        evaluate_condition(Condition("vibes"), EvalContext(text=""))
