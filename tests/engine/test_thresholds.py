"""The threshold a judge branch would have agreed best with: the arithmetic."""

from __future__ import annotations

import pytest

from workflows.engine.thresholds import (
    MIN_RUNS,
    Observation,
    agreement,
    is_judge_condition,
    score_from_reason,
    suggest_threshold,
)


def seen(good: list[float], bad: list[float]) -> list[Observation]:
    return [Observation(s, True) for s in good] + [Observation(s, False) for s in bad]


# Reviewers approved stories the judge rated 6 and 7; a threshold of 8 sent them to review.
RUNS = seen(good=[9, 9, 8, 7, 7, 6], bad=[5, 5, 4, 3])


def test_agreement_counts_the_verdicts_the_branch_would_have_matched() -> None:
    assert agreement(RUNS, "greater_equal", 8) == 7  # 9, 9, 8 and the four bad ones
    assert agreement(RUNS, "greater_equal", 7) == 9
    assert agreement(RUNS, "greater_equal", 6) == 10
    assert agreement(RUNS, "greater_than", 5) == 10
    assert agreement(RUNS, "greater_than", 8) == 6


def test_a_less_than_branch_holds_for_the_bad_ones() -> None:
    # `low_quality < 6` sends a response to review: it agrees when the response proved bad.
    assert agreement(RUNS, "less_than", 6) == 10
    assert agreement(RUNS, "less_than", 8) == 7
    assert agreement(RUNS, "less_than_or_equal", 5) == 10


def test_it_suggests_the_threshold_that_agrees_with_the_most_verdicts() -> None:
    advice = suggest_threshold(RUNS, "greater_equal", 8)

    assert advice is not None
    assert (advice.runs, advice.agree_current, advice.suggested, advice.agree_suggested) == (
        10,
        7,
        6,
        10,
    )
    assert (advice.share_current, advice.share_suggested) == (70, 100)
    assert (advice.current_text, advice.suggested_text) == ("8", "6")


def test_among_equal_thresholds_it_suggests_the_nearest_to_the_current_one() -> None:
    # 9 and 5 each agree with 9 of the 10 verdicts (7 proved bad, 5 good).
    runs = seen(good=[9, 9, 9, 9, 9, 5], bad=[7, 2, 2, 2])

    advice = suggest_threshold(runs, "greater_equal", 6)
    assert advice is not None and advice.agree_current == 8
    assert advice.suggested == 5.0 and advice.agree_suggested == 9


def test_the_candidates_are_the_scores_seen() -> None:
    # Any threshold from 3 to 9 separates these: the lowest good score is suggested.
    advice = suggest_threshold(seen(good=[9] * 5, bad=[2] * 5), "greater_equal", 1)
    assert advice is not None and advice.suggested == 9.0 and advice.agree_suggested == 10


def test_it_suggests_nothing_when_the_current_threshold_is_as_good_as_any() -> None:
    advice = suggest_threshold(RUNS, "greater_equal", 6)

    assert advice is not None
    assert advice.suggested is None
    assert advice.agree_current == 10
    assert advice.suggested_text == ""


def test_too_few_runs_give_no_advice() -> None:
    assert MIN_RUNS == 10
    assert suggest_threshold(RUNS[:9], "greater_equal", 8) is None
    assert suggest_threshold(RUNS[:4], "greater_equal", 8, min_runs=4) is not None


def test_an_operator_that_is_no_comparison_is_refused() -> None:
    with pytest.raises(ValueError, match="not a comparison operator: equals"):
        suggest_threshold(RUNS, "equals", 8)


def test_it_reads_the_score_from_the_conditions_reason() -> None:
    assert score_from_reason("judge scored 7 >= 6") == 7.0
    assert score_from_reason("judge scored 7.5, needs >= 8") == 7.5
    assert score_from_reason("judge scored -2, needs >= 0") == -2.0
    assert score_from_reason("no score in the judge's answer") is None


def test_a_judge_condition_compares_a_score_with_a_number() -> None:
    judge = {"type": "ai_evaluation", "operator": "greater_equal", "value": 8}
    assert is_judge_condition(judge)
    assert is_judge_condition({**judge, "value": 7.5, "operator": "less_than"})
    assert not is_judge_condition({**judge, "operator": "equals"})
    assert not is_judge_condition({**judge, "value": "8"})
    assert not is_judge_condition({**judge, "value": True})
    assert not is_judge_condition({**judge, "type": "length_check"})
    assert not is_judge_condition(None)
