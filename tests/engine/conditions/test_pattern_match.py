"""`pattern_match`: regexes, substrings and equality over the response."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.engine.builders import condition
from tests.engine.conditions.cases import CASE_FIELDS, TEXT, Case, evaluated, pattern, uncovered
from workflows.engine import EvalContext, evaluate_condition
from workflows.engine.conditions.pattern_match import CONDITION_TYPE
from workflows.engine.regex import MAX_TEXT_CHARS

CASES: list[Case] = [
    (
        pattern("regex_match", "(error|failed)"),
        "it failed at step 2",
        {},
        True,
        'regex matched "failed" at 3',
    ),
    (pattern("regex_match", "error"), "all good", {}, False, "regex did not match"),
    (
        pattern("regex_match", "ERROR", flags="i"),
        "an error",
        {},
        True,
        'regex matched "error" at 3',
    ),
    (
        pattern("regex_match", "^two$", flags="m"),
        "one\ntwo\nthree",
        {},
        True,
        'regex matched "two" at 4',
    ),
    (pattern("regex_match", "^two$"), "one\ntwo\nthree", {}, False, "regex did not match"),
    (pattern("regex_match", "a.b", flags="s"), "a\nb", {}, True, 'regex matched "a\\nb" at 0'),
    (pattern("regex_match", "b+"), "ééé bbb", {}, True, 'regex matched "bbb" at 4'),
    (pattern("regex_not_match", "error"), "all good", {}, True, "regex did not match"),
    (pattern("regex_not_match", "good"), "all good", {}, False, 'regex matched "good" at 4'),
    (pattern("contains", "fox"), TEXT, {}, True, 'response contains "fox"'),
    (pattern("contains", "cat"), TEXT, {}, False, 'response does not contain "cat"'),
    (pattern("contains", "FOX", flags="i"), TEXT, {}, True, 'response contains "fox"'),
    (pattern("not_contains", "cat"), TEXT, {}, True, 'response does not contain "cat"'),
    (pattern("not_contains", "fox"), TEXT, {}, False, 'response contains "fox"'),
    (pattern("equals", "approved"), "  approved\n", {}, True, 'response equals "approved"'),
    (
        pattern("equals", "approved"),
        "not approved",
        {},
        False,
        'response does not equal "approved"',
    ),
    (pattern("equals", "APPROVED", flags="i"), "Approved", {}, True, 'response equals "approved"'),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_evaluates_each_operator_with_its_reason(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    assert uncovered(CONDITION_TYPE, CASES) == []


def test_it_runs_a_catastrophic_pattern_in_linear_time() -> None:
    parsed = condition(pattern("regex_match", "^(a+)+$"))
    text = "a" * 40 + "!"
    began = time.perf_counter()
    result = evaluate_condition(parsed, EvalContext(text=text))
    elapsed = time.perf_counter() - began
    assert result == (False, "regex did not match")
    assert elapsed < 0.01  # Python's backtracking `re` would take hours on this input


def test_it_quotes_matched_text_that_holds_quotes_as_json_does() -> None:
    parsed = condition(pattern("regex_match", '"[a-z]+"'))
    assert evaluate_condition(parsed, EvalContext(text='say "hi"')) == (
        True,
        'regex matched "\\"hi\\"" at 4',
    )


def test_it_shortens_long_matched_text_in_the_reason() -> None:
    parsed = condition(pattern("regex_match", "x+"))
    matched, reason = evaluate_condition(parsed, EvalContext(text="x" * 100))
    assert matched
    assert reason == f'regex matched "{"x" * 39}…" at 0'


LONG = "x" * MAX_TEXT_CHARS
CUT = f" (in the first {MAX_TEXT_CHARS} of {MAX_TEXT_CHARS + 6} characters)"


@pytest.mark.parametrize(
    ("when", "text", "matched", "reason"),
    [
        (pattern("regex_match", "needle"), LONG + "needle", False, f"regex did not match{CUT}"),
        # Not found in what was read is no proof of absence: a safety branch is not bypassed.
        (
            pattern("regex_not_match", "needle"),
            LONG + "needle",
            False,
            f"regex did not match{CUT}; the rest was not read, so not proven",
        ),
        (
            pattern("regex_match", "x{3}"),
            LONG + "needle",
            True,
            f'regex matched "xxx" at 0{CUT}',
        ),
        # A substring search is linear: it reads the whole text.
        (pattern("contains", "needle"), LONG + "needle", True, 'response contains "needle"'),
        (
            pattern("not_contains", "NEEDLE", flags="i"),
            LONG + "needle",
            False,
            'response contains "needle"',
        ),
        # `equals` compares the whole text: a cut one would equal what the response is not.
        (
            pattern("equals", LONG),
            LONG + "needle",
            False,
            f'response does not equal "{LONG[:39]}…"',
        ),
        (
            pattern("regex_match", "needle$"),
            LONG[6:] + "needle",
            True,
            f'regex matched "needle" at {MAX_TEXT_CHARS - 6}',
        ),
    ],
)
def test_regexes_read_the_first_characters_of_a_long_text_and_say_so(
    when: dict[str, Any], text: str, matched: bool, reason: str
) -> None:
    assert evaluate_condition(condition(when), EvalContext(text=text)) == (matched, reason)
