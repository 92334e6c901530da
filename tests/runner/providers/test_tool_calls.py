"""Function calling: a request offers tools and carries the loop's messages; a model's
`tool_calls` come back on the result, from a real server (the stub) or a script."""

from __future__ import annotations

import pytest

from runner.providers import ChatRequest, ProviderError, ToolCallRequest
from runner.providers.scripted import ScriptedProvider
from tests.runner.providers.conftest import MakeProvider
from tests.runner.providers.stub_server import StubServer, raw, tool_calls

ADD = {
    "type": "function",
    "function": {
        "name": "demo__add",
        "description": "Add two numbers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}}},
    },
}
MESSAGES = (
    {"role": "user", "content": "What is 2 + 3?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "demo__add", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "5.0"},
)


def test_it_offers_tools_and_reads_the_tool_calls_without_streaming(
    any_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(tool_calls(("demo__add", {"a": 2, "b": 3}), ("demo__add", "{broken")))
    streamed: list[str] = []

    result = any_provider().complete(
        ChatRequest(prompt="What is 2 + 3?", model="m", tools=(ADD,)), on_token=streamed.append
    )

    assert result.text == "" and streamed == []
    assert result.tool_calls == (
        ToolCallRequest("call_0", "demo__add", '{"a": 2, "b": 3}'),
        ToolCallRequest("call_1", "demo__add", "{broken"),
    )
    sent = stub_server.chat_requests[-1].json
    assert sent["tools"] == [ADD] and sent["stream"] is False


def test_it_sends_the_loops_messages_in_place_of_the_prompt(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    openai_provider().complete(ChatRequest(prompt="ignored", model="m", messages=MESSAGES))

    sent = stub_server.chat_requests[-1].json
    assert sent["messages"] == list(MESSAGES)
    assert "tools" not in sent


@pytest.mark.parametrize(
    ("tool_calls_json", "error"),
    [
        ('"not a list"', "tool_calls that are not a list"),
        ('[{"id": "x", "function": {"arguments": "{}"}}]', "tool_calls[0] without a name"),
        ('[{"id": "x", "function": {"name": "f", "arguments": 3}}]', "arguments are not text"),
    ],
)
def test_malformed_tool_calls_are_a_clear_error(
    openai_provider: MakeProvider, stub_server: StubServer, tool_calls_json: str, error: str
) -> None:
    body = (
        '{"choices": [{"index": 0, "message": {"role": "assistant", "content": null, '
        f'"tool_calls": {tool_calls_json}}}}}]}}'
    )
    stub_server.enqueue(raw(body))

    with pytest.raises(ProviderError) as raised:
        openai_provider().complete(ChatRequest(prompt="p", model="m", tools=(ADD,)))

    assert error in str(raised.value)


def test_a_scripted_reply_asks_for_tool_calls() -> None:
    provider = ScriptedProvider(
        {"replies": ['@tool_calls: [{"name": "demo.add", "arguments": {"a": 1}}]', "done"]}
    )

    first = provider.complete(ChatRequest(prompt="p", model="script"))
    second = provider.complete(ChatRequest(prompt="p", model="script", call_index=1))

    assert first.tool_calls == (ToolCallRequest("call_0_0", "demo.add", '{"a": 1}'),)
    assert (second.text, second.tool_calls) == ("done", ())


@pytest.mark.parametrize("listed", ["not json", '{"name": "x"}', '[{"arguments": {}}]'])
def test_a_scripted_reply_with_bad_tool_calls_fails_clearly(listed: str) -> None:
    provider = ScriptedProvider({"replies": [f"@tool_calls: {listed}"]})

    with pytest.raises(ProviderError, match="scripted tool calls"):
        provider.complete(ChatRequest(prompt="p", model="script"))
