"""Reading model answers: thinking blocks and embedded JSON, in time linear in the answer."""

from __future__ import annotations

import re

import pytest

from workflows.engine import detect_content_type
from workflows.engine.answers import MAX_JSON_SCAN_CHARS, json_object, json_objects, strip_thinking


@pytest.mark.parametrize(
    ("answer", "stripped"),
    [
        ("a <think>x</think> b", "a   b"),
        ("<THINK>1\n2</Think>3", " 3"),
        ("<think>a<think>b</think>c</think>d", " c</think>d"),
        ("</think>x<think>y", "</think>x<think>y"),
        ("<think>unclosed", "<think>unclosed"),
        ("<think></think><think>q</think>z", "  z"),
        ("a<think>1</think>b<think>2", "a b<think>2"),
        ("no thinking", "no thinking"),
    ],
)
def test_it_strips_thinking_blocks_as_the_non_greedy_pattern_did(
    answer: str, stripped: str
) -> None:
    assert strip_thinking(answer) == stripped
    assert stripped == re.sub(r"(?is)<think>.*?</think>", " ", answer)


def test_it_strips_thinking_from_an_answer_of_unclosed_tags() -> None:
    # The pattern searched from each of these 30,000 tags to the end (22 s at 200,000 chars).
    answer = "<think>" * 30_000 + "</think>Score: 7"
    assert strip_thinking(answer) == " Score: 7"


@pytest.mark.parametrize(
    "answer",
    ['{"a":' * 50_000, "[" * 50_000, "{" * 200_000, '{"a": 1, ' * 30_000],
    ids=["deep objects", "deep arrays", "braces", "unclosed objects"],
)
def test_it_finds_no_json_in_a_hostile_answer_without_crashing(answer: str) -> None:
    assert json_objects(answer) == []
    assert json_object(answer) is None
    assert detect_content_type(answer) != "json"


def test_it_finds_json_only_within_the_first_characters_of_an_answer() -> None:
    verdict = '{"selected": true}'
    assert json_objects(" " * (MAX_JSON_SCAN_CHARS - len(verdict)) + verdict) == [
        {"selected": True}
    ]
    assert json_objects(" " * MAX_JSON_SCAN_CHARS + verdict) == []
