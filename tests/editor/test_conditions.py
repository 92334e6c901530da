"""Condition summaries: what edges and the step list show for each condition type."""

from __future__ import annotations

import pytest

from editor.conditions import canonical_action, condition_summary, logical_type

SUMMARIES = [
    ({"type": "length_check", "operator": "less_than", "value": 200}, "len < 200"),
    (
        {"type": "length_check", "operator": "greater_than_or_equal", "value": 3, "unit": "words"},
        "len ≥ 3 words",
    ),
    (
        {"type": "pattern_match", "operator": "regex_match", "value": "(error|failed)"},
        "/(error|failed)/",
    ),
    ({"type": "pattern_match", "operator": "regex_match", "value": "x", "flags": "i"}, "/x/i"),
    ({"type": "pattern_match", "operator": "not_contains", "value": "sorry"}, 'lacks "sorry"'),
    (
        {"type": "ai_evaluation", "operator": "greater_equal", "value": 8, "evaluator": "judge"},
        "judge ≥ 8",
    ),
    ({"type": "ai_evaluation", "operator": "less_than", "value": 6.0}, "judge < 6"),
    ({"type": "human_decision", "operator": "user_choice", "value": "approve"}, "human: approve"),
    ({"type": "execution_timeout", "operator": "equals", "value": True}, "timeout"),
    ({"type": "execution_timeout", "operator": "equals", "value": False}, "no timeout"),
    ({"type": "execution_error", "operator": "equals", "value": True}, "error"),
    ({"type": "execution_error", "operator": "contains", "value": "429"}, 'error has "429"'),
    (
        {"type": "field_compare", "operator": "greater_than", "field": "image_count", "value": 3},
        "image_count > 3",
    ),
    ({"type": "check_count", "operator": "equals", "field": "n", "value": 0}, "n = 0"),
    ({"type": "content_type", "operator": "is", "value": "code"}, "is code"),
    ({"type": "content_type", "operator": "is_not", "value": "json"}, "is not json"),
    ({"type": "route_selected", "operator": "includes", "value": "billing"}, "route: billing"),
    ({"type": "default"}, "default"),
    ({"type": "not", "conditions": [{"type": "default"}]}, "not (default)"),
    (
        {
            "type": "and",
            "conditions": [
                {"type": "length_check", "operator": "less_than", "value": 9},
                {"type": "or", "conditions": [{"type": "default"}, {"type": "default"}]},
            ],
        },
        "len < 9 and (default or default)",
    ),
    (
        {"type": "check_images", "operator": "or", "conditions": [{"type": "default"}]},
        "default",
    ),
]


@pytest.mark.parametrize(("when", "summary"), SUMMARIES)
def test_it_summarises_every_condition_type(when: dict, summary: str) -> None:
    assert condition_summary(when) == summary


def test_it_shortens_long_summaries() -> None:
    summary = condition_summary(
        {"type": "pattern_match", "operator": "contains", "value": "x" * 90}
    )
    assert len(summary) == 40
    assert summary.endswith("…")


@pytest.mark.parametrize("garbage", [None, "text", 3, [], {"type": 5}, {}])
def test_it_never_fails_on_a_condition_that_is_not_one(garbage: object) -> None:
    assert isinstance(condition_summary(garbage), str)


def test_it_recognises_both_spellings_of_logical_conditions() -> None:
    assert logical_type({"type": "and", "conditions": []}) == "and"
    assert logical_type({"type": "check_both", "operator": "and", "conditions": []}) == "and"
    assert logical_type({"type": "length_check", "operator": "and"}) is None


def test_it_resolves_action_aliases() -> None:
    assert canonical_action("retry_different_actor") == "RETRY_WITH_DIFFERENT_ACTOR"
    assert canonical_action("HUMAN_REVIEW_NEEDED") == "HUMAN_REVIEW"
    assert canonical_action("CONTINUE") == "CONTINUE"
