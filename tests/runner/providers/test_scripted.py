"""Scripted actors: replies in order, rules first, delays, streaming and config checks."""

from __future__ import annotations

import time
from typing import Any

import pytest

from runner.providers import (
    ChatRequest,
    Provider,
    ProviderConfigError,
    ProviderError,
    ProviderTimeoutError,
)
from runner.providers.scripted import ScriptedProvider


def ask(prompt: str = "Write a story", call_index: int = 0, **options: Any) -> ChatRequest:
    return ChatRequest(prompt=prompt, model="script", call_index=call_index, **options)


def test_it_is_a_provider() -> None:
    assert isinstance(ScriptedProvider({"replies": ["hi"]}), Provider)


def test_it_replies_in_order_and_repeats_the_last_reply() -> None:
    provider = ScriptedProvider({"replies": ["first", "second", "third"]})

    answers = [provider.complete(ask(call_index=i)).text for i in range(5)]

    assert answers == ["first", "second", "third", "third", "third"]


def test_a_matching_rule_answers_before_the_replies() -> None:
    provider = ScriptedProvider(
        {
            "replies": ["a story"],
            "rules": [
                {"match": "(?i)rate .* 1-10", "reply": "9"},
                {"match": "rate", "reply": "never reached: the first match wins"},
            ],
        }
    )

    assert provider.complete(ask("Please RATE this story 1-10")).text == "9"
    assert provider.complete(ask("Write a story about a fox")).text == "a story"


def test_rules_alone_answer_what_they_match_and_refuse_the_rest() -> None:
    provider = ScriptedProvider({"rules": [{"match": r"\bdragon\b", "reply": "Roar."}]})

    assert provider.complete(ask("a dragon tale")).text == "Roar."
    with pytest.raises(
        ProviderError, match="no rule matched the prompt and it has no replies"
    ) as caught:
        provider.complete(ask("a fox tale"))
    assert caught.value.retryable is False


def test_it_waits_delay_ms_before_answering() -> None:
    slept: list[float] = []
    provider = ScriptedProvider({"replies": ["late"], "delay_ms": 250}, sleep=slept.append)

    assert provider.complete(ask()).text == "late"
    assert slept == [0.25]


def test_it_really_sleeps_by_default() -> None:
    started = time.monotonic()

    result = ScriptedProvider({"replies": ["ok"], "delay_ms": 30}).complete(ask())

    assert time.monotonic() - started >= 0.03
    assert result.latency_ms >= 30


def test_a_delay_past_the_timeout_times_out_after_the_timeout() -> None:
    slept: list[float] = []
    provider = ScriptedProvider({"replies": ["never"], "delay_ms": 5000}, sleep=slept.append)

    with pytest.raises(ProviderTimeoutError, match="did not answer within 2 s"):
        provider.complete(ask(timeout_s=2))
    assert slept == [2]


def test_it_streams_its_reply_word_by_word() -> None:
    tokens: list[str] = []
    provider = ScriptedProvider({"replies": ["Once upon  a time.\nThe end"]})

    result = provider.complete(ask(), on_token=tokens.append)

    assert tokens == ["Once ", "upon  ", "a ", "time.\n", "The ", "end"]
    assert "".join(tokens) == result.text


def test_it_reports_no_usage_and_the_requested_model() -> None:
    result = ScriptedProvider({"replies": ["x"]}).complete(ask())

    assert (result.tokens_in, result.tokens_out, result.model) == (None, None, "script")


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        (["a", "b"], "must be an object with replies, rules or delay_ms, not list"),
        ({"reply": ["a"]}, "unknown key 'reply'; expected replies, rules, delay_ms"),
        ({"replies": "a"}, "replies: must be a list of texts"),
        ({"replies": ["a", 2]}, r"replies\[1\]: must be text, not int"),
        ({"rules": {"match": "a", "reply": "b"}}, "rules: must be a list"),
        (
            {"rules": [{"match": "a"}]},
            r"rules\[0\]: must be an object with exactly match and reply",
        ),
        ({"rules": [{"match": "a", "reply": "b", "x": 1}]}, r"rules\[0\]: must be an object"),
        ({"rules": [{"match": 1, "reply": "b"}]}, r"rules\[0\]: match and reply must be text"),
        (
            {"rules": [{"match": "(a", "reply": "b"}]},
            r"rules\[0\].match: invalid regex: missing \)",
        ),
        ({"rules": [{"match": r"(a)\1", "reply": "b"}]}, "invalid regex: backreferences"),
        ({"rules": [{"match": "(?=a)", "reply": "b"}]}, "invalid regex: backreferences"),
        (
            {"rules": [{"match": "a" * 2001, "reply": "b"}]},
            r"rules\[0\].match: pattern is 2001 characters, at most 2000",
        ),
        ({"replies": ["a"], "delay_ms": -1}, "delay_ms: must be a number of milliseconds >= 0"),
        ({"replies": ["a"], "delay_ms": "10"}, "delay_ms: must be a number"),
        ({"replies": ["a"], "delay_ms": True}, "delay_ms: must be a number"),
    ],
)
def test_it_refuses_a_bad_config(config: Any, reason: str) -> None:
    with pytest.raises(ProviderConfigError, match=reason):
        ScriptedProvider(config)


def test_an_empty_config_is_valid_but_has_nothing_to_say() -> None:
    with pytest.raises(ProviderError, match="has no reply"):
        ScriptedProvider({}).complete(ask())
