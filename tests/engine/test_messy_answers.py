"""The answer parsers on answers as real models write them: each kind is read, or refused with
a reason; and, whatever the text, they return a value or a reason, never raise anything else
and never hand on a number JSON has not (property tests).

The same kinds through real runs: tests/runner/test_messy_answers.py; a stream cut halfway:
tests/runner/providers/test_stream_cut.py.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workflows.engine import AnswerUnreadable, parse_classifier_answer, parse_judge_answer
from workflows.engine.answers import json_object, json_objects
from workflows.engine.scoring import Scale, read_score, scale_of
from workflows.engine.tools import json_data

ONE_TO_TEN = Scale(1, 10)


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ("This story is filled with vivid details and a haunting end... 7", 7),  # prose
        ("7/10", 7),
        ("Score: 7.5", 7.5),
        ("Score: 7.5/10", 7.5),
        ("4/5", 8),  # another scale, converted
        ("85 out of 100", 8.5),
        ('```json\n{"score": 8, "why": "vivid"}\n```', 8),  # JSON in a fence
        ('{"score": 6}\nI hope this helps!', 6),  # commentary after the JSON
        ("7. A vivid story with 3 twists.", 7),  # the number first, as asked
        ("<think>3? 4?</think>**9**", 9),
    ],
)
def test_a_score_is_read_as_judges_write_it(answer: str, score: float) -> None:
    assert read_score(answer, ONE_TO_TEN) == (score, "")


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("Score: 15", "judge score 15 is outside the scale 1-10"),
        ("-3", "judge score -3 is outside the scale 1-10"),
        ("12/10", "judge score 12 is outside the scale 1-10"),
        ('{"score": NaN, "verdict": "ok"}', "judge gave a score that is not a number: NaN"),
        ('{"score": Infinity}', "judge gave a score that is not a number: Infinity"),
        ("The 3 owls and 2 mice: I'd say 8", "judge answer has several numbers (2, 3, 8)"),
        ("1. Vivid.\n2. Short.", "judge answer has several numbers (1, 2)"),
        ("", "judge answered nothing"),
        ("<think>7</think>", "judge answered nothing"),
        ("I'm sorry, but I can't rate this.", "judge refused to score"),
        ("A lovely story.", "judge answer had no score: 'A lovely story.'"),
    ],
)
def test_no_score_is_read_where_the_answer_gives_none_and_the_reason_says_why(
    answer: str, reason: str
) -> None:
    score, why = read_score(answer, ONE_TO_TEN)
    assert score is None
    assert why.startswith(reason), why


@pytest.mark.parametrize(
    ("instruction", "scale"),
    [
        ("Rate the quality of this text from 1 to 10.", Scale(1, 10)),
        ("Rate story quality 1-10", Scale(1, 10)),
        ("Give a score from 0 to 100", Scale(0, 100)),
        ("Is it good?", None),
    ],
)
def test_the_scale_is_the_one_the_instruction_asks_for(
    instruction: str, scale: Scale | None
) -> None:
    assert scale_of(instruction) == scale


def test_without_a_scale_any_marked_number_is_the_score() -> None:
    assert read_score("Score: 70") == (70, "")


@pytest.mark.parametrize(
    ("answer", "facts"),
    [
        ('{"score": 8}', {"score": 8}),
        ('```json\n{"score": 8}\n```', {"score": 8}),
        ('```\n{"score": 8}\n```\nThat is my answer.', {"score": 8}),
        ('{"score": 8} -- hope this helps!', {"score": 8}),
        ('{"score": NaN, "verdict": "ok"}', None),
        ('{"total": -Infinity}', None),
        ('{"total": 1e999}', None),  # past a float: Infinity
        ('Here is the JSON: {"score": 8}', None),  # prose first: an answer, not data
    ],
)
def test_an_answers_json_object_is_read_as_json_has_it(
    answer: str, facts: dict[str, Any] | None
) -> None:
    assert json_object(answer) == facts


def test_objects_with_nan_are_skipped_in_prose() -> None:
    text = 'First {"score": NaN} then {"score": 7, "ok": true} at last.'
    assert json_objects(text) == [{"score": 7, "ok": True}]


@pytest.mark.parametrize(
    "text", ['{"total": NaN}', "[1, Infinity]", '{"total": -Infinity}', '{"n": 1e400}']
)
def test_a_tools_result_with_nan_is_text_not_json(text: str) -> None:
    assert json_data(text) is None


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("Invoices and payments.", 'neither JSON with a boolean "selected" nor YES/NO'),
        ("billing, support", 'neither JSON with a boolean "selected" nor YES/NO'),
        ("Yes and no.", "the answer said both yes and no"),
        ("", "the answer was empty"),
        ("As an AI, I cannot classify this.", "the classifier refused to answer"),
        ('{"selected": NaN}', 'neither JSON with a boolean "selected" nor YES/NO'),
    ],
)
def test_a_classifier_answer_without_a_yes_or_no_is_unreadable_with_the_reason(
    answer: str, problem: str
) -> None:
    with pytest.raises(AnswerUnreadable) as caught:
        parse_classifier_answer(answer)
    assert problem in str(caught.value)


# -- whatever the text -----------------------------------------------------------------------

MESSY = st.one_of(
    st.text(max_size=300),
    st.lists(
        st.sampled_from(
            [
                "Score:",
                "7",
                "/10",
                "NaN",
                "{",
                "}",
                '"score":',
                "```json\n",
                "```",
                " ",
                "\n",
                "yes",
                "no",
                "true",
                "-",
                "1e999",
                "Infinity",
                "<think>",
                "</think>",
                ".",
                "out of",
            ]
        ),
        max_size=40,
    ).map("".join),
)


def finite_everywhere(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite_everywhere(v) for v in value.values())
    if isinstance(value, list):
        return all(finite_everywhere(v) for v in value)
    return True


@given(MESSY)
def test_a_score_is_on_its_scale_or_absent_with_a_reason(answer: str) -> None:
    score, reason = read_score(answer, ONE_TO_TEN)
    if score is None:
        assert reason
    else:
        assert 1 <= score <= 10 and math.isfinite(score) and not reason


@given(MESSY)
def test_json_read_from_an_answer_is_an_object_with_finite_numbers_or_nothing(answer: str) -> None:
    facts = json_object(answer)
    assert facts is None or (isinstance(facts, dict) and finite_everywhere(facts))
    assert all(finite_everywhere(found) for found in json_objects(answer))
    assert finite_everywhere(json_data(answer))


@given(MESSY)
def test_a_classifier_answer_is_a_yes_or_no_or_unreadable(answer: str) -> None:
    try:
        selected, reason = parse_classifier_answer(answer)
    except AnswerUnreadable as exc:
        assert str(exc)
    else:
        assert isinstance(selected, bool) and isinstance(reason, str)


@given(MESSY)
def test_a_judges_verdict_is_four_scores_on_the_scale_or_unreadable(answer: str) -> None:
    try:
        scores = parse_judge_answer(answer)
    except AnswerUnreadable as exc:
        assert str(exc)
    else:
        values = (scores.relevance, scores.helpfulness, scores.accuracy, scores.completeness)
        assert all(0 <= v <= 25 for v in values)
