"""What a model server should not have sent, read as such: a stream cut halfway (the connection
closed cleanly, with no finish_reason), a refusal instead of an answer, token counts no column
can hold."""

from __future__ import annotations

import json

import pytest

from runner.providers import ChatRequest, ProviderError
from tests.runner.providers.conftest import MakeProvider
from tests.runner.providers.stub_server import StubServer, raw, reply, sse

HALF = 'data: {"choices": [{"index": 0, "delta": {"content": "Once upon a"}}]}\n\n'


def ask() -> ChatRequest:
    return ChatRequest(prompt="Write a story about a fox", model="stub-1", timeout_s=5)


def test_a_stream_that_ends_without_a_finish_reason_is_a_failed_call_not_an_answer(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(sse(HALF))
    tokens: list[str] = []

    with pytest.raises(ProviderError) as caught:
        openai_provider().complete(ask(), on_token=tokens.append)

    assert tokens == ["Once upon a"]
    assert "stopped mid-answer: its stream ended without a finish_reason" in str(caught.value)
    assert "11 characters had been streamed" in str(caught.value)
    assert len(stub_server.chat_requests) == 1  # what was shown is not asked for again


def test_a_stream_cut_before_any_text_is_asked_again(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    opened = 'data: {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}\n\n'
    stub_server.enqueue(sse(opened), reply(chunks=["Once ", "upon a time."]))

    result = openai_provider().complete(ask(), on_token=lambda _: None)

    assert result.text == "Once upon a time."
    assert len(stub_server.chat_requests) == 2


def test_a_stream_that_finishes_is_whole_with_or_without_done(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    end = 'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
    stub_server.enqueue(sse(HALF, end))  # some servers close without "data: [DONE]"

    assert openai_provider().complete(ask(), on_token=lambda _: None).text == "Once upon a"


def test_a_refusal_is_a_failed_call_with_the_models_words(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    body = {
        "model": "stub-1",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "refusal": "I can't help."},
                "finish_reason": "stop",
            }
        ],
    }
    stub_server.enqueue(raw(json.dumps(body)))

    with pytest.raises(ProviderError, match=r"refused to answer: I can't help\.") as caught:
        openai_provider().complete(ask())

    assert caught.value.retryable is False


@pytest.mark.parametrize("count", [-5, 2**31, 10**30])
def test_token_counts_no_column_can_hold_are_not_the_servers_counts(
    openai_provider: MakeProvider, stub_server: StubServer, count: int
) -> None:
    body = {
        "model": "stub-1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi."}}],
        "usage": {"prompt_tokens": count, "completion_tokens": 3},
    }
    stub_server.enqueue(raw(json.dumps(body)))

    result = openai_provider().complete(ask())

    assert (result.tokens_in, result.tokens_out) == (None, 3)  # counted by the runner instead


def test_a_streamed_refusal_is_a_failed_call_with_the_models_words(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    refused = 'data: {"choices": [{"index": 0, "delta": {"refusal": "I can%s help."}}]}\n\n'
    end = 'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
    stub_server.enqueue(sse(refused % "'t", end))

    with pytest.raises(ProviderError, match=r"refused to answer: I can't help\.") as caught:
        openai_provider().complete(ask(), on_token=lambda _: None)

    assert caught.value.retryable is False
