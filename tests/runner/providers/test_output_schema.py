"""Structured output on the wire: an OpenAI-compatible server and Ollama (through its
OpenAI-compatible API, which reads `response_format` as its native `format`) are sent the
schema, streamed or not, with the step's key as its name."""

from __future__ import annotations

import json

from runner.providers import ChatRequest, OutputSchema
from tests.runner.providers.conftest import MakeProvider
from tests.runner.providers.stub_server import StubServer, reply

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
ANSWER = json.dumps({"city": "Lyon"})


def test_the_schema_is_sent_as_the_response_format(
    any_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply(ANSWER))
    output = OutputSchema("where", SCHEMA, strict=True)

    result = any_provider().complete(ChatRequest(prompt="Where?", model="m", output_schema=output))

    assert result.text == ANSWER
    [sent] = stub_server.chat_requests
    assert sent.json["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "where", "schema": SCHEMA, "strict": True},
    }


def test_a_streamed_call_carries_it_too_and_wins_over_the_actors_params(
    any_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply(ANSWER))
    streamed: list[str] = []
    request = ChatRequest(
        prompt="Where?",
        model="m",
        params={"response_format": {"type": "json_object"}},
        output_schema=OutputSchema("where", SCHEMA),
    )

    result = any_provider().complete(request, on_token=streamed.append)

    assert "".join(streamed) == result.text == ANSWER
    sent = stub_server.chat_requests[-1].json
    assert sent["stream"] is True
    assert sent["response_format"]["json_schema"] == {
        "name": "where",
        "schema": SCHEMA,
        "strict": False,
    }


def test_a_call_without_a_schema_sends_no_response_format(
    any_provider: MakeProvider, stub_server: StubServer
) -> None:
    any_provider().complete(ChatRequest(prompt="Hello", model="m"))

    assert "response_format" not in stub_server.chat_requests[-1].json
