from __future__ import annotations

import time
from typing import Any

import pytest

from tests.engine.builders import condition
from workflows.engine import Condition, EngineError, EvalContext, evaluate_condition
from workflows.engine.regex import MAX_TEXT_CHARS

TEXT = "The quick brown fox jumps over the lazy dog"
FACTS = {"image_count": 3, "doc": {"pages": 12}, "status": "done", "tags": ["a", "b"]}


def _pattern(op: str, value: str, **fields: Any) -> dict[str, Any]:
    return {"type": "pattern_match", "operator": op, "value": value, **fields}


def _length(op: str, value: object, **fields: Any) -> dict[str, Any]:
    return {"type": "length_check", "operator": op, "value": value, **fields}


def _field(
    op: str, value: object, name: str = "image_count", kind: str = "field_compare"
) -> dict[str, Any]:
    return {"type": kind, "operator": op, "value": value, "field": name}


# (when, text, context fields, matched, reason)
CASES: list[tuple[dict[str, Any], str, dict[str, Any], bool, str]] = [
    # pattern_match
    (
        _pattern("regex_match", "(error|failed)"),
        "it failed at step 2",
        {},
        True,
        'regex matched "failed" at 3',
    ),
    (_pattern("regex_match", "error"), "all good", {}, False, "regex did not match"),
    (
        _pattern("regex_match", "ERROR", flags="i"),
        "an error",
        {},
        True,
        'regex matched "error" at 3',
    ),
    (
        _pattern("regex_match", "^two$", flags="m"),
        "one\ntwo\nthree",
        {},
        True,
        'regex matched "two" at 4',
    ),
    (_pattern("regex_match", "^two$"), "one\ntwo\nthree", {}, False, "regex did not match"),
    (_pattern("regex_match", "a.b", flags="s"), "a\nb", {}, True, 'regex matched "a\\nb" at 0'),
    (_pattern("regex_match", "b+"), "ééé bbb", {}, True, 'regex matched "bbb" at 4'),
    (_pattern("regex_not_match", "error"), "all good", {}, True, "regex did not match"),
    (_pattern("regex_not_match", "good"), "all good", {}, False, 'regex matched "good" at 4'),
    (_pattern("contains", "fox"), TEXT, {}, True, 'response contains "fox"'),
    (_pattern("contains", "cat"), TEXT, {}, False, 'response does not contain "cat"'),
    (_pattern("contains", "FOX", flags="i"), TEXT, {}, True, 'response contains "fox"'),
    (_pattern("not_contains", "cat"), TEXT, {}, True, 'response does not contain "cat"'),
    (_pattern("not_contains", "fox"), TEXT, {}, False, 'response contains "fox"'),
    (_pattern("equals", "approved"), "  approved\n", {}, True, 'response equals "approved"'),
    (
        _pattern("equals", "approved"),
        "not approved",
        {},
        False,
        'response does not equal "approved"',
    ),
    (_pattern("equals", "APPROVED", flags="i"), "Approved", {}, True, 'response equals "approved"'),
    # length_check, every operator and alias
    (_length("less_than", 200), "x" * 143, {}, True, "length 143 < 200"),
    (_length("less_than", 200), "x" * 250, {}, False, "length 250 not < 200"),
    (_length("less_than", "200"), "x" * 143, {}, True, "length 143 < 200"),
    (_length("less_equal", 5), "hello", {}, True, "length 5 <= 5"),
    (_length("less_equal", 4), "hello", {}, False, "length 5 not <= 4"),
    (_length("greater_than", 3), "hello", {}, True, "length 5 > 3"),
    (_length("greater_than", 5), "hello", {}, False, "length 5 not > 5"),
    (_length("greater_equal", 5), "hello", {}, True, "length 5 >= 5"),
    (_length("greater_equal", 6), "hello", {}, False, "length 5 not >= 6"),
    (_length("equals", 5), "hello", {}, True, "length 5 == 5"),
    (_length("equals", 4), "hello", {}, False, "length 5 != 4"),
    (_length("not_equals", 4), "hello", {}, True, "length 5 != 4"),
    (_length("not_equals", 5), "hello", {}, False, "length 5 == 5"),
    (_length("greater_than_or_equal", 5), "hello", {}, True, "length 5 >= 5"),
    (_length("greater_than_or_equal", 6), "hello", {}, False, "length 5 not >= 6"),
    (_length("less_than_or_equal", 5), "hello", {}, True, "length 5 <= 5"),
    (_length("less_than_or_equal", 4), "hello", {}, False, "length 5 not <= 4"),
    (_length("less_than", 5, unit="words"), "one two three", {}, True, "length 3 words < 5"),
    (
        _length("greater_than", 5, unit="words"),
        "one two three",
        {},
        False,
        "length 3 words not > 5",
    ),
    (_length("greater_than", 2.5, unit="chars"), "abc", {}, True, "length 3 > 2.5"),
    # human_decision
    (
        {"type": "human_decision", "operator": "user_choice", "value": "approve"},
        "",
        {"decision": "approve"},
        True,
        "reviewer chose approve",
    ),
    (
        {"type": "human_decision", "operator": "user_choice", "value": "approve|revise"},
        "",
        {"decision": "revise"},
        True,
        "reviewer chose revise",
    ),
    (
        {"type": "human_decision", "value": "approve"},
        "",
        {"decision": " Approve "},
        True,
        "reviewer chose approve",
    ),
    (
        {"type": "human_decision", "operator": "user_choice", "value": "approve"},
        "",
        {"decision": "reject"},
        False,
        "reviewer chose reject, not approve",
    ),
    (
        {"type": "human_decision", "operator": "user_choice", "value": "approve"},
        "",
        {},
        False,
        "no reviewer decision",
    ),
    # execution_timeout
    (
        {"type": "execution_timeout", "operator": "equals", "value": True},
        "",
        {"timed_out": True},
        True,
        "step timed out",
    ),
    (
        {"type": "execution_timeout", "operator": "equals", "value": "true"},
        "",
        {},
        False,
        "step did not time out",
    ),
    (
        {"type": "execution_timeout", "operator": "equals", "value": False},
        "",
        {},
        True,
        "step did not time out",
    ),
    (
        {"type": "execution_timeout", "value": False},
        "",
        {"timed_out": True},
        False,
        "step timed out",
    ),
    # execution_error
    (
        {"type": "execution_error", "operator": "equals", "value": True},
        "",
        {"error": "HTTP 500"},
        True,
        "step failed: HTTP 500",
    ),
    (
        {"type": "execution_error", "operator": "equals", "value": True},
        "",
        {},
        False,
        "step did not fail",
    ),
    (
        {"type": "execution_error", "operator": "equals", "value": "false"},
        "",
        {},
        True,
        "step did not fail",
    ),
    (
        {"type": "execution_error", "operator": "equals", "value": False},
        "",
        {"error": "boom"},
        False,
        "step failed: boom",
    ),
    (
        {"type": "execution_error", "operator": "contains", "value": "429"},
        "",
        {"error": "HTTP 429 Too Many"},
        True,
        'error contains "429"',
    ),
    (
        {"type": "execution_error", "operator": "contains", "value": "Timeout"},
        "",
        {"error": "read timeout"},
        True,
        'error contains "timeout"',
    ),
    (
        {"type": "execution_error", "operator": "contains", "value": "quota"},
        "",
        {"error": "HTTP 500"},
        False,
        'error does not contain "quota"',
    ),
    (
        {"type": "execution_error", "operator": "contains", "value": "quota"},
        "",
        {},
        False,
        "step did not fail",
    ),
    # field_compare and its alias check_count, every numeric operator
    (_field("greater_than", 0), "", {"facts": FACTS}, True, "field image_count 3 > 0"),
    (_field("greater_than", 3), "", {"facts": FACTS}, False, "field image_count 3 not > 3"),
    (_field("greater_equal", 3), "", {"facts": FACTS}, True, "field image_count 3 >= 3"),
    (_field("less_than", 2), "", {"facts": FACTS}, False, "field image_count 3 not < 2"),
    (_field("less_equal", 3), "", {"facts": FACTS}, True, "field image_count 3 <= 3"),
    (_field("equals", 3), "", {"facts": FACTS}, True, "field image_count 3 == 3"),
    (_field("not_equals", 3), "", {"facts": FACTS}, False, "field image_count 3 == 3"),
    (
        _field("greater_than_or_equal", 4),
        "",
        {"facts": FACTS},
        False,
        "field image_count 3 not >= 4",
    ),
    (_field("less_than_or_equal", 3), "", {"facts": FACTS}, True, "field image_count 3 <= 3"),
    (
        _field("greater_than", 0, kind="check_count"),
        "",
        {"facts": FACTS},
        True,
        "field image_count 3 > 0",
    ),
    (_field("less_equal", 12, "doc.pages"), "", {"facts": FACTS}, True, "field doc.pages 12 <= 12"),
    (_field("equals", 2, "tags"), "", {"facts": FACTS}, True, "field tags 2 == 2"),
    (_field("greater_than", 0), "", {"facts": {}}, False, "field image_count missing"),
    (
        _field("greater_than", 0, "doc.words"),
        "",
        {"facts": FACTS},
        False,
        "field doc.words missing",
    ),
    (
        _field("equals", "done", "status"),
        "",
        {"facts": FACTS},
        True,
        'field status "done" == "done"',
    ),
    (
        _field("not_equals", "done", "status"),
        "",
        {"facts": FACTS},
        False,
        'field status "done" == "done"',
    ),
    (
        _field("not_equals", "open", "status"),
        "",
        {"facts": FACTS},
        True,
        'field status "done" != "open"',
    ),
    (
        _field("greater_than", 1, "status"),
        "",
        {"facts": FACTS},
        False,
        "field status is not a number: 'done'",
    ),
    (
        _field("greater_than", 1),
        "",
        {"facts": {"image_count": "4"}},
        True,
        "field image_count 4 > 1",
    ),
    # content_type
    (
        {"type": "content_type", "operator": "is", "value": "code"},
        "```python\nprint(1)\n```",
        {},
        True,
        "content type is code",
    ),
    (
        {"type": "content_type", "operator": "is", "value": "json"},
        '{"a": 1}',
        {},
        True,
        "content type is json",
    ),
    (
        {"type": "content_type", "operator": "is", "value": "list"},
        "- a\n- b\n- c",
        {},
        True,
        "content type is list",
    ),
    (
        {"type": "content_type", "operator": "is", "value": "numbers"},
        "2, 3, 5, 7, 11",
        {},
        True,
        "content type is numbers",
    ),
    (
        {"type": "content_type", "operator": "is", "value": "prose"},
        TEXT,
        {},
        True,
        "content type is prose",
    ),
    (
        {"type": "content_type", "operator": "is", "value": "code"},
        TEXT,
        {},
        False,
        "content type is prose, not code",
    ),
    (
        {"type": "content_type", "operator": "is_not", "value": "code"},
        TEXT,
        {},
        True,
        "content type is prose, not code",
    ),
    (
        {"type": "content_type", "operator": "is_not", "value": "prose"},
        TEXT,
        {},
        False,
        "content type is prose",
    ),
    # route_selected
    (
        {"type": "route_selected", "operator": "includes", "value": "billing"},
        "",
        {"route_selection": ("billing", "respond")},
        True,
        "route billing selected",
    ),
    (
        {"type": "route_selected", "value": "billing"},
        "",
        {"route_selection": ("respond",)},
        False,
        "route billing not selected (selected: respond)",
    ),
    ({"type": "route_selected", "value": "billing"}, "", {}, False, "no route selection yet"),
    # and / or / not, in both forms
    (
        {
            "type": "and",
            "conditions": [_length("less_than", 200), _pattern("regex_match", "error")],
        },
        "an error",
        {},
        True,
        'and: [length 8 < 200; regex matched "error" at 3]',
    ),
    (
        {
            "type": "and",
            "conditions": [_length("greater_than", 100), _pattern("regex_match", "error")],
        },
        "an error",
        {},
        False,
        "and: [length 8 not > 100]",
    ),
    (
        {
            "type": "or",
            "conditions": [_length("greater_than", 100), _pattern("regex_match", "error")],
        },
        "an error",
        {},
        True,
        'or: [length 8 not > 100; regex matched "error" at 3]',
    ),
    (
        {"type": "or", "conditions": [_length("greater_than", 100), _pattern("contains", "x")]},
        "an error",
        {},
        False,
        'or: [length 8 not > 100; response does not contain "x"]',
    ),
    (
        {"type": "not", "conditions": [_length("greater_than", 100)]},
        "an error",
        {},
        True,
        "not: [length 8 not > 100]",
    ),
    (
        {"type": "not", "conditions": [_length("less_than", 100)]},
        "an error",
        {},
        False,
        "not: [length 8 < 100]",
    ),
    (
        {
            "type": "check_size_and_error",
            "operator": "and",
            "conditions": [_length("less_than", 200), _pattern("contains", "error")],
        },
        "an error",
        {},
        True,
        'and: [length 8 < 200; response contains "error"]',
    ),
    (
        {"type": "anything", "operator": "not", "conditions": [_pattern("contains", "error")]},
        "an error",
        {},
        False,
        'not: [response contains "error"]',
    ),
    # default
    ({"type": "default"}, "", {}, True, "default"),
    ({"type": "default", "operator": "always", "value": "true"}, "", {}, True, "default"),
]


@pytest.mark.parametrize(("when", "text", "context", "matched", "reason"), CASES)
def test_it_evaluates_every_condition_type_and_operator_with_its_reason(
    when: dict[str, Any], text: str, context: dict[str, Any], matched: bool, reason: str
) -> None:
    ctx = EvalContext(text=text, **context)
    assert evaluate_condition(condition(when), ctx) == (matched, reason)


def test_every_operator_of_the_vocabulary_is_covered_by_the_table() -> None:
    from workflows.engine.vocabulary import (
        CONDITION_OPERATORS,
        NUMERIC_OPERATOR_ALIASES,
        NUMERIC_TYPES,
    )

    covered = {(w["type"], w.get("operator")) for w, *_ in CASES}
    covered |= {(k, None) for k in ("human_decision", "default")}
    for kind, operators in CONDITION_OPERATORS.items():
        names = list(operators)
        if kind in NUMERIC_TYPES and kind != "ai_evaluation":  # ai_evaluation: its own test
            names += list(NUMERIC_OPERATOR_ALIASES)
        if kind == "ai_evaluation":
            continue
        for op in names:
            if kind in ("human_decision", "route_selected", "default") and (kind, None) in covered:
                continue
            assert (kind, op) in covered, (kind, op)


AI_CASES = [
    ("greater_equal", 8, "Score: 9", True, "judge scored 9 >= 8"),
    ("greater_equal", 8, "6", False, "judge scored 6, needs >= 8"),
    ("greater_than", 7, "**7.5**", True, "judge scored 7.5 > 7"),
    ("greater_than", 7, "7 out of 10", False, "judge scored 7, needs > 7"),
    ("less_than", 6, "5/10", True, "judge scored 5 < 6"),
    ("less_than", 6, "6/10", False, "judge scored 6, needs < 6"),
    ("less_equal", 6, "6", True, "judge scored 6 <= 6"),
    ("equals", 9, "Rating: 9", True, "judge scored 9 == 9"),
    ("not_equals", 9, "Rating: 9", False, "judge scored 9, needs != 9"),
    ("greater_than_or_equal", 8, "8", True, "judge scored 8 >= 8"),
    ("less_than_or_equal", 3, "8", False, "judge scored 8, needs <= 3"),
    ("greater_equal", 8, "no idea", False, "judge answer had no score: 'no idea'"),
]


@pytest.mark.parametrize(("op", "threshold", "answer", "matched", "reason"), AI_CASES)
def test_it_compares_the_judges_score_with_every_numeric_operator(
    op: str, threshold: int, answer: str, matched: bool, reason: str
) -> None:
    asked: list[tuple[str, str, str]] = []

    def judge(evaluator: str, prompt: str, text: str) -> str:
        asked.append((evaluator, prompt, text))
        return answer

    when = {
        "type": "ai_evaluation",
        "operator": op,
        "value": threshold,
        "evaluator": "judge",
        "prompt": "Rate it",
    }
    ctx = EvalContext(text="a story", judge=judge)
    assert evaluate_condition(condition(when), ctx) == (matched, reason)
    assert asked == [("judge", "Rate it", "a story")]


def test_it_reports_a_judge_that_raises_as_an_unmatched_condition() -> None:
    def judge(evaluator: str, prompt: str, text: str) -> str:
        raise RuntimeError("model down")

    when = {"type": "ai_evaluation", "operator": "greater_equal", "value": 8, "evaluator": "judge"}
    result = evaluate_condition(condition(when), EvalContext(text="x", judge=judge))
    assert result == (False, "judge 'judge' failed: RuntimeError: model down")


def test_it_asks_a_judge_once_per_evaluator_and_prompt() -> None:
    calls: list[str] = []

    def judge(evaluator: str, prompt: str, text: str) -> str:
        calls.append(f"{evaluator}:{prompt}")
        return "7"

    ctx = EvalContext(text="x", judge=judge)
    for op, value, prompt in [
        ("greater_equal", 8, "Rate"),
        ("less_than", 6, "Rate"),
        ("equals", 7, "Other"),
    ]:
        when = {
            "type": "ai_evaluation",
            "operator": op,
            "value": value,
            "evaluator": "judge",
            "prompt": prompt,
        }
        evaluate_condition(condition(when), ctx)
    assert calls == ["judge:Rate", "judge:Other"]


def test_it_uses_the_default_evaluator_when_the_condition_names_none() -> None:
    seen: list[str] = []

    def judge(evaluator: str, prompt: str, text: str) -> str:
        seen.append(evaluator)
        return "9"

    when = {"type": "ai_evaluation", "operator": "greater_equal", "value": 8}
    ctx = EvalContext(text="x", judge=judge, default_evaluator="critic")
    assert evaluate_condition(condition(when), ctx) == (True, "judge scored 9 >= 8")
    assert seen == ["critic"]


def test_it_does_not_match_an_ai_evaluation_without_a_judge() -> None:
    when = {"type": "ai_evaluation", "operator": "greater_equal", "value": 8, "evaluator": "judge"}
    assert evaluate_condition(condition(when), EvalContext(text="x")) == (
        False,
        "no judge available to ask 'judge'",
    )


def test_it_runs_a_catastrophic_pattern_in_linear_time() -> None:
    when = condition(_pattern("regex_match", "^(a+)+$"))
    text = "a" * 40 + "!"
    began = time.perf_counter()
    result = evaluate_condition(when, EvalContext(text=text))
    elapsed = time.perf_counter() - began
    assert result == (False, "regex did not match")
    assert elapsed < 0.01  # Python's backtracking `re` would take hours on this input


def test_it_evaluates_a_hand_built_condition_without_a_parser() -> None:
    cond = Condition("pattern_match", "regex_match", r"\d+", {"flags": ""})
    assert evaluate_condition(cond, EvalContext(text="abc 42")) == (True, 'regex matched "42" at 4')
    both = Condition("and", "and", None, {}, (cond, Condition("length_check", "less_than", 10)))
    assert evaluate_condition(both, EvalContext(text="abc 42")) == (
        True,
        'and: [regex matched "42" at 4; length 6 < 10]',
    )


def test_it_refuses_an_unknown_condition_type_at_evaluation() -> None:
    with pytest.raises(EngineError, match="unknown condition type 'vibes'"):
        evaluate_condition(Condition("vibes"), EvalContext(text=""))


def test_it_quotes_matched_text_that_holds_quotes_as_json_does() -> None:
    cond = condition(_pattern("regex_match", '"[a-z]+"'))
    assert evaluate_condition(cond, EvalContext(text='say "hi"')) == (
        True,
        'regex matched "\\"hi\\"" at 4',
    )


def test_it_shortens_long_matched_text_in_the_reason() -> None:
    cond = condition(_pattern("regex_match", "x+"))
    matched, reason = evaluate_condition(cond, EvalContext(text="x" * 100))
    assert matched
    assert reason == f'regex matched "{"x" * 39}…" at 0'


LONG = "x" * MAX_TEXT_CHARS
CUT = f" (in the first {MAX_TEXT_CHARS} of {MAX_TEXT_CHARS + 6} characters)"


@pytest.mark.parametrize(
    ("when", "text", "matched", "reason"),
    [
        (_pattern("regex_match", "needle"), LONG + "needle", False, f"regex did not match{CUT}"),
        # Not found in what was read is no proof of absence: a safety branch is not bypassed.
        (
            _pattern("regex_not_match", "needle"),
            LONG + "needle",
            False,
            f"regex did not match{CUT}; the rest was not read, so not proven",
        ),
        (
            _pattern("regex_match", "x{3}"),
            LONG + "needle",
            True,
            f'regex matched "xxx" at 0{CUT}',
        ),
        # A substring search is linear: it reads the whole text.
        (_pattern("contains", "needle"), LONG + "needle", True, 'response contains "needle"'),
        (
            _pattern("not_contains", "NEEDLE", flags="i"),
            LONG + "needle",
            False,
            'response contains "needle"',
        ),
        # `equals` compares the whole text: a cut one would equal what the response is not.
        (
            _pattern("equals", LONG),
            LONG + "needle",
            False,
            f'response does not equal "{LONG[:39]}…"',
        ),
        (
            _pattern("regex_match", "needle$"),
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
