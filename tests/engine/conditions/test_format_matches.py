"""`format_matches`: the answer has the form named, or the one an intent step expects."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import branch, graph, recipe, step
from tests.engine.conditions.cases import uncovered
from workflows.engine import (
    Condition,
    EvalContext,
    RecipeInvalid,
    condition_summary,
    evaluate_condition,
    parse_recipe,
)
from workflows.engine.conditions.format_matches import CONDITION_TYPE, format_named
from workflows.engine.intent import Intent

PRIMES = "2, 3, 5, 7, 11, 13"
CODE = "```python\ndef primes(n):\n    return [p for p in range(n)]\n```"
TABLE = "| n | prime |\n|---|---|\n| 1 | 2 |\n| 2 | 3 |"


def when(fmt: str | None = None, op: str = "is", **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"type": "format_matches", "operator": op, **fields}
    if fmt is not None:
        doc["format"] = fmt
    return doc


def parsed(condition_doc: dict[str, Any]) -> Condition:
    recipe_graph = graph(
        step("understand", kind="intent", prompt="{topic}"),
        step("answer", branch("b", 1, condition_doc)),
    )
    return recipe_graph.step("answer").branches[0].when


def evaluated(condition_doc: dict[str, Any], text: str, expected: str = "") -> tuple[bool, str]:
    intent = Intent("List primes", "numbers", ("first six",), expected)
    ctx = EvalContext(text=text, answer_of={"understand": intent.response()}.get)
    return evaluate_condition(parsed(condition_doc), ctx)


CASES: list[tuple[dict[str, Any], str, bool, str]] = [
    (when("numbers"), PRIMES, True, "the answer is numbers"),
    (when("numbers"), CODE, False, "the answer is code, not numbers"),
    (when("code", "is_not"), PRIMES, True, "the answer is numbers, not code"),
    (when("code", "is_not"), CODE, False, "the answer is code"),
    (when("json"), '```json\n{"primes": [2, 3]}\n```', True, "the answer is json"),
    (when("list"), "- two\n- three\n- five", True, "the answer is list"),
    (when("list"), "[2, 3, 5]", True, "the answer is json"),
    (when("list"), "Two, then three.", False, "the answer is prose, not a list"),
    (when("number"), "  42. ", True, "the answer is one number"),
    (when("number"), PRIMES, False, "the answer is numbers, not a number"),
    (when("table"), TABLE, True, "the answer is a table of 2 rows"),
    (when("table"), "n,prime\n1,2\n2,3", True, "the answer is a table of 2 rows"),
    (when("table"), PRIMES, False, "the answer is numbers, not a table of 2 rows or more"),
    (when("raw_data"), PRIMES, True, "the answer is numbers, raw data"),
    (
        when("raw_data"),
        CODE,
        False,
        "the answer is code, not raw data (numbers, a list, a table or JSON)",
    ),
    (when("prose"), "Primes are numbers.", True, "the answer is prose"),
    (
        when("regex", pattern=r"\d+(, \d+)*"),
        PRIMES,
        True,
        "the answer matches the pattern as a whole",
    ),
    (
        when("regex", pattern=r"\d+"),
        PRIMES,
        False,
        "the answer does not match the pattern as a whole",
    ),
]


@pytest.mark.parametrize(("condition_doc", "text", "matched", "reason"), CASES)
def test_it_checks_the_answer_against_the_format_named(
    condition_doc: dict[str, Any], text: str, matched: bool, reason: str
) -> None:
    assert evaluated(condition_doc, text) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    cases = [(doc, "", {}, matched, "") for doc, _, matched, _ in CASES]
    assert uncovered(CONDITION_TYPE, cases) == []


def test_it_checks_the_format_the_intent_expects() -> None:
    by_intent = when(intent_step="understand")
    assert evaluated(by_intent, PRIMES, "raw_data") == (
        True,
        "the answer is numbers, raw data (expected by 'understand': \"raw_data\")",
    )
    assert evaluated(by_intent, CODE, "raw data") == (
        False,
        "the answer is code, not raw data (numbers, a list, a table or JSON) "
        "(expected by 'understand': \"raw data\")",
    )
    assert evaluated(by_intent, TABLE, "a Markdown table")[0] is True


def test_it_is_false_with_why_when_the_intent_expects_no_known_format() -> None:
    by_intent = when(intent_step="understand")
    assert evaluated(by_intent, PRIMES, "") == (
        False,
        "intent step 'understand' expects no particular format",
    )
    matched, why = evaluated(by_intent, PRIMES, "haiku")
    assert not matched
    assert why.startswith("intent step 'understand' expects \"haiku\", not a format")
    ctx = EvalContext(text=PRIMES, answer_of={}.get)
    assert evaluate_condition(parsed(by_intent), ctx) == (
        False,
        "intent step 'understand' has not answered yet",
    )


@pytest.mark.parametrize(
    ("words", "fmt"),
    [
        ("raw_data", "raw_data"),
        ("Raw data", "raw_data"),
        ("JSON object", "json"),
        ("comma-separated numbers", "numbers"),
        ("a single number", "number"),
        ("Python code", "code"),
        ("CSV", "table"),
        ("formatted", "prose"),
        ("bullet list", "list"),
        ("haiku", None),
    ],
)
def test_it_maps_an_intents_words_to_a_format(words: str, fmt: str | None) -> None:
    assert format_named(words) == fmt


@pytest.mark.parametrize(
    ("condition_doc", "error"),
    [
        (when(), "name either a format (`format`) or the intent step"),
        (when("json", intent_step="understand"), "name either a format"),
        (when("yaml"), "format: unknown format 'yaml'; expected one of: json, list"),
        (when("regex"), "pattern: the regex format needs a non-empty pattern"),
        (when("regex", pattern="("), "pattern: invalid regex"),
        (when("json", pattern="x"), "pattern: only the regex format takes a pattern"),
        (when(intent_step="answer"), "step 'answer' is not an intent step"),
        (when(intent_step="nope"), "there is no step 'nope'; intent steps: understand"),
        ({**when("json"), "value": "json"}, "format_matches takes no value"),
    ],
)
def test_it_refuses_a_bad_format_matches(condition_doc: dict[str, Any], error: str) -> None:
    doc = recipe(
        step("understand", kind="intent", prompt="{topic}"),
        step("answer", branch("b", 1, condition_doc)),
    )
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(doc)
    assert error in str(caught.value)


def test_its_summary_names_the_format_or_the_intent_step() -> None:
    assert condition_summary(when("json")) == "format = json"
    assert condition_summary(when("code", "is_not")) == "format ≠ code"
    assert condition_summary(when(intent_step="understand")) == "format = understand"
