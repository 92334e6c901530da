"""The Anthropic and Gemini providers, through their SDKs, against the stub server speaking
each API's wire format (Messages API events; generateContent and its SSE chunks)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest

from runner.providers import ChatRequest, ProviderConfigError, ProviderError, ProviderTimeoutError
from runner.providers.anthropic_messages import DEFAULT_MAX_TOKENS, AnthropicProvider
from tests.runner.providers.conftest import API_KEY, MakeNative
from tests.runner.providers.stub_server import (
    RecordedRequest,
    StubServer,
    error,
    hang_up,
    raw,
    reply,
    sse,
    tool_calls,
)
from tests.runner.providers.wire_formats import GEMINI_RETRY_INFO, gemini_signature

# Deadline tests allow this much past timeout_s for scheduling, a new SDK client and teardown on
# a busy machine: well short of the 5 s the stub takes to answer.
MARGIN_S = 1.5
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def ask(prompt: str = "Write a story about a fox", **options: Any) -> ChatRequest:
    options.setdefault("model", "model-1")
    return ChatRequest(prompt=prompt, **options)


def is_gemini(sent: RecordedRequest) -> bool:
    return sent.path.startswith("/v1beta/")


def system_of(sent: RecordedRequest) -> str | None:
    if is_gemini(sent):
        instruction = sent.json.get("systemInstruction")
        return instruction["parts"][0]["text"] if instruction else None
    return sent.json.get("system")


def streamed(sent: RecordedRequest) -> bool:
    if is_gemini(sent):
        return sent.path.endswith(":streamGenerateContent?alt=sse")
    return sent.json.get("stream") is True


# -- answers, plain and streamed ----------------------------------------------------------


def test_it_returns_a_plain_answer_with_the_servers_usage_and_model(
    native_provider: MakeNative, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply("Once upon a time.", usage=(12, 5), model="model-1-0509"))

    result = native_provider().complete(ask(system="You write fables."))

    assert (result.text, result.tokens_in, result.tokens_out) == ("Once upon a time.", 12, 5)
    assert result.model == "model-1-0509"
    [sent] = stub_server.chat_requests
    assert (sent.model, sent.prompt) == ("model-1", "Write a story about a fox")
    assert system_of(sent) == "You write fables."  # the API's own place, not a message
    assert not streamed(sent)


def test_it_streams_several_tokens_whose_join_is_the_answer(
    native_provider: MakeNative, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply(chunks=["Once", " upon", " a", " time."], usage=(9, 4)))
    tokens: list[str] = []

    result = native_provider().complete(ask(), on_token=tokens.append)

    assert tokens == ["Once", " upon", " a", " time."]
    assert "".join(tokens) == result.text == "Once upon a time."
    assert (result.tokens_in, result.tokens_out) == (9, 4)
    [sent] = stub_server.chat_requests
    assert streamed(sent)


def test_gemini_leaves_usage_empty_when_the_server_reports_none(
    gemini_provider: MakeNative, stub_server: StubServer
) -> None:
    # (The Messages API always reports usage: its message_delta events need it.)
    provider = gemini_provider()
    stub_server.enqueue(reply("plain", usage=None), reply(chunks=["str", "eam"], usage=None))

    plain = provider.complete(ask())
    stream = provider.complete(ask(), on_token=lambda _: None)

    assert (plain.tokens_in, plain.tokens_out) == (None, None)
    assert (stream.text, stream.tokens_in, stream.tokens_out) == ("stream", None, None)


def test_calls_to_a_server_go_on_over_the_connection_the_first_one_opened(
    native_provider: MakeNative, stub_server: StubServer
) -> None:
    stub_server.keep_alive = True
    provider = native_provider()

    answers = [provider.complete(ask()).text for _ in range(3)]

    assert answers == ["stub answer"] * 3
    assert len({sent.client_port for sent in stub_server.chat_requests}) == 1


# -- retries ------------------------------------------------------------------------------


def test_it_retries_a_429_honouring_retry_after(
    native_provider: MakeNative, stub_server: StubServer, sleeps: list[float]
) -> None:
    stub_server.enqueue(error(429, "Rate limited", headers={"Retry-After": "1"}), reply("finally"))

    assert native_provider().complete(ask()).text == "finally"
    assert sleeps == [pytest.approx(1.0)]
    assert len(stub_server.chat_requests) == 2


@pytest.mark.parametrize("status", [500, 503, 529])
def test_it_retries_a_server_error_then_succeeds(
    native_provider: MakeNative, stub_server: StubServer, sleeps: list[float], status: int
) -> None:
    stub_server.enqueue(error(status, "Overloaded"), reply("ready now"))

    assert native_provider().complete(ask()).text == "ready now"
    assert len(sleeps) == 1
    assert len(stub_server.chat_requests) == 2


def test_it_gives_up_after_its_retries_with_the_servers_reason(
    native_provider: MakeNative, stub_server: StubServer, sleeps: list[float]
) -> None:
    stub_server.default = error(503, "The model is overloaded.")
    provider = native_provider()

    with pytest.raises(ProviderError) as caught:
        provider.complete(ask())

    assert (caught.value.retryable, caught.value.status_code) == (True, 503)
    assert str(caught.value).startswith(
        f"{provider.name} at {provider.base_url} answered 503 after 4 attempts: "
    )
    assert str(caught.value).endswith("The model is overloaded.")
    assert len(stub_server.chat_requests) == 4
    assert len(sleeps) == 3


@pytest.mark.parametrize(
    ("status", "message"),
    [(400, "max_tokens: Field required"), (403, "no access"), (404, "model: model-9")],
)
def test_it_does_not_retry_statuses_a_retry_cannot_fix(
    native_provider: MakeNative,
    stub_server: StubServer,
    sleeps: list[float],
    status: int,
    message: str,
) -> None:
    stub_server.enqueue(error(status, message))

    with pytest.raises(ProviderError) as caught:
        native_provider().complete(ask())

    assert (caught.value.retryable, caught.value.status_code) == (False, status)
    assert f"answered {status}: " in str(caught.value)
    assert str(caught.value).endswith(message)
    assert len(stub_server.chat_requests) == 1
    assert sleeps == []


def test_it_retries_a_dropped_connection(
    native_provider: MakeNative, stub_server: StubServer
) -> None:
    stub_server.enqueue(hang_up(), reply("second time lucky"))

    assert native_provider().complete(ask()).text == "second time lucky"


# -- the time budget ----------------------------------------------------------------------


@pytest.mark.timeout(10)
def test_it_gives_up_on_a_slow_answer_within_the_timeout(
    native_provider: MakeNative, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply("too late", delay_s=5))
    provider = native_provider()
    started = time.monotonic()

    with pytest.raises(ProviderTimeoutError) as caught:
        provider.complete(ask(timeout_s=0.5))

    assert time.monotonic() - started < 0.5 + MARGIN_S
    assert (
        str(caught.value) == f"{provider.name} at {provider.base_url} did not answer within 0.5 s"
    )


@pytest.mark.timeout(10)
def test_it_stops_a_trickling_stream_at_the_deadline(
    native_provider: MakeNative, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply(chunks=["tick "] * 100, interval_s=0.05))
    tokens: list[str] = []
    started = time.monotonic()

    with pytest.raises(ProviderTimeoutError, match="characters had been streamed"):
        native_provider().complete(ask(timeout_s=0.5), on_token=tokens.append)

    assert time.monotonic() - started < 0.5 + MARGIN_S
    assert 0 < len(tokens) < 100


@pytest.mark.timeout(10)
def test_it_cuts_a_stream_that_stalls_before_its_end(
    native_provider: MakeNative, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply(chunks=["word "] * 5, stall_s=5))
    tokens: list[str] = []
    started = time.monotonic()

    with pytest.raises(ProviderTimeoutError):
        native_provider().complete(ask(timeout_s=1), on_token=tokens.append)

    assert time.monotonic() - started < 1 + MARGIN_S
    assert tokens == ["word "] * 5


# -- broken streams -----------------------------------------------------------------------


def test_a_stream_cut_halfway_fails_clearly_and_is_not_replayed(
    native_provider: MakeNative, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply(chunks=["Half", " of", " an", " answer"], cut_after=2))
    tokens: list[str] = []

    with pytest.raises(ProviderError) as caught:
        native_provider().complete(ask(), on_token=tokens.append)

    assert tokens == ["Half", " of"]
    assert "broke the connection" in str(caught.value)
    assert str(caught.value).endswith("7 characters had been streamed")
    assert len(stub_server.chat_requests) == 1


def test_a_stream_cut_before_any_token_is_retried(
    native_provider: MakeNative, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply(chunks=["lost"], cut_after=0), reply(chunks=["kept"]))

    assert native_provider().complete(ask(), on_token=lambda _: None).text == "kept"
    assert len(stub_server.chat_requests) == 2


def test_anthropic_reports_an_error_event_mid_stream(
    anthropic_provider: MakeNative, stub_server: StubServer
) -> None:
    provider = anthropic_provider()
    start = {"type": "message_start", "message": _message_start()}
    delta = {"index": 0, "delta": {"type": "text_delta", "text": "Half a"}}
    stub_server.enqueue(
        sse(
            f"event: message_start\ndata: {json.dumps(start)}\n\n",
            'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
            '"content_block": {"type": "text", "text": ""}}\n\n',
            "event: content_block_delta\ndata: "
            + json.dumps({"type": "content_block_delta", **delta})
            + "\n\n",
            'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
            '"message": "Overloaded"}}\n\n',
        )
    )
    tokens: list[str] = []

    with pytest.raises(ProviderError) as caught:
        provider.complete(ask(), on_token=tokens.append)

    assert tokens == ["Half a"]
    assert caught.value.retryable is True
    assert str(caught.value).endswith(
        "reported an error mid-stream: overloaded_error: Overloaded: 6 characters had been streamed"
    )


def test_gemini_reports_an_error_chunk_mid_stream(
    gemini_provider: MakeNative, stub_server: StubServer
) -> None:
    provider = gemini_provider()
    chunk = {"candidates": [{"content": {"parts": [{"text": "Half a"}], "role": "model"}}]}
    failure = {
        "error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}
    }
    stub_server.enqueue(
        sse(f"data: {json.dumps(chunk)}\r\n\r\n", f"data: {json.dumps(failure)}\r\n\r\n")
    )
    tokens: list[str] = []

    with pytest.raises(ProviderError) as caught:
        provider.complete(ask(), on_token=tokens.append)

    assert tokens == ["Half a"]
    assert str(caught.value).endswith(
        "reported an error mid-stream: UNAVAILABLE: The model is overloaded.: "
        "6 characters had been streamed"
    )


def test_an_anthropic_stream_that_ends_before_message_stop_is_an_error(
    anthropic_provider: MakeNative, stub_server: StubServer
) -> None:
    start = {"type": "message_start", "message": _message_start()}
    stub_server.default = sse(f"event: message_start\ndata: {json.dumps(start)}\n\n")

    with pytest.raises(ProviderError, match="ended its stream before message_stop") as caught:
        anthropic_provider().complete(ask(), on_token=lambda _: None)

    assert caught.value.retryable is True


def test_a_gemini_stream_that_ends_before_a_finish_reason_is_an_error(
    gemini_provider: MakeNative, stub_server: StubServer
) -> None:
    chunk = {"candidates": [{"content": {"parts": [{"text": "so far"}], "role": "model"}}]}
    stub_server.enqueue(sse(f"data: {json.dumps(chunk)}\r\n\r\n"))

    with pytest.raises(ProviderError, match="ended its stream before a finish reason") as caught:
        gemini_provider().complete(ask(), on_token=lambda _: None)

    assert caught.value.retryable is True


@pytest.mark.parametrize(
    "body",
    ["{not json", "[1, 2]", '{"id": "x"}'],
)
def test_it_reports_a_malformed_body_clearly(
    native_provider: MakeNative, stub_server: StubServer, body: str
) -> None:
    stub_server.enqueue(raw(body))

    with pytest.raises(ProviderError) as caught:
        native_provider().complete(ask())

    assert caught.value.retryable is False
    assert "answered" in str(caught.value)
    assert len(stub_server.chat_requests) == 1


def test_an_exception_from_on_token_propagates_unchanged_and_unretried(
    native_provider: MakeNative, stub_server: StubServer
) -> None:
    class Cancelled(ValueError):  # a ValueError, which the providers read as a bad body
        pass

    def cancel(token: str) -> None:
        raise Cancelled(token)

    stub_server.enqueue(reply(chunks=["one", "two"]))

    with pytest.raises(Cancelled, match="one"):
        native_provider().complete(ask(), on_token=cancel)
    assert len(stub_server.chat_requests) == 1


# -- keys and the host's environment ------------------------------------------------------


def assert_key_nowhere(
    caught: pytest.ExceptionInfo[ProviderError], provider: Any, caplog: pytest.LogCaptureFixture
) -> None:
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for text in (str(caught.value), repr(caught.value), repr(provider), repr(vars(provider))):
        assert API_KEY not in text
    assert API_KEY not in logged


def test_anthropic_refuses_a_bad_key_clearly_and_the_key_is_in_no_error_or_log(
    anthropic_provider: MakeNative, stub_server: StubServer, caplog: pytest.LogCaptureFixture
) -> None:
    stub_server.enqueue(error(401, f"invalid x-api-key {API_KEY}"))
    caplog.set_level(logging.DEBUG)  # the SDKs' own debug logs too
    provider = anthropic_provider()

    with pytest.raises(ProviderError) as caught:
        provider.complete(ask())

    assert (caught.value.status_code, caught.value.retryable) == (401, False)
    assert str(caught.value) == (
        f"anthropic at {provider.base_url} answered 401: "
        "authentication_error: invalid x-api-key ***"
    )
    assert_key_nowhere(caught, provider, caplog)
    assert len(stub_server.chat_requests) == 1


@pytest.mark.parametrize("status", [400, 401])
def test_gemini_refuses_a_bad_key_clearly_and_the_key_is_in_no_error_or_log(
    gemini_provider: MakeNative,
    stub_server: StubServer,
    caplog: pytest.LogCaptureFixture,
    status: int,
) -> None:
    # What Gemini answers a key it does not know: a 400, its reason in the details.
    reason = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}
    stub_server.enqueue(error(status, f"API key not valid: {API_KEY}", details=[reason]))
    caplog.set_level(logging.DEBUG)
    provider = gemini_provider()

    with pytest.raises(ProviderError) as caught:
        provider.complete(ask())

    assert (caught.value.status_code, caught.value.retryable) == (status, False)
    code = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED"}[status]
    assert str(caught.value) == (
        f"gemini at {provider.base_url} answered {status}: {code}: API key not valid: ***"
    )
    assert_key_nowhere(caught, provider, caplog)
    assert len(stub_server.chat_requests) == 1


def test_it_sends_the_actors_key_and_none_of_the_hosts_credentials(
    native_provider: MakeNative, stub_server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(name, "sk-the-hosts-own-key")
    monkeypatch.setenv(
        "ANTHROPIC_CUSTOM_HEADERS",
        "X-Host-Proxy-Auth: the-hosts-secret\nAuthorization: Bearer the-hosts-token",
    )
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")

    native_provider().complete(ask())

    [sent] = stub_server.chat_requests
    headers = " ".join(f"{k}: {v}" for k, v in sent.headers.items())
    assert "the-hosts" not in headers
    assert API_KEY in headers
    assert "x-host-proxy-auth" not in sent.headers


# -- params -------------------------------------------------------------------------------


def test_it_sends_the_common_params_under_the_apis_names(
    native_provider: MakeNative, stub_server: StubServer
) -> None:
    params = {"temperature": 0.2, "top_p": 0.9, "max_tokens": 50, "stop": "THE END", "top_k": 5}

    native_provider().complete(ask(params=params))

    [sent] = stub_server.chat_requests
    if is_gemini(sent):
        assert sent.json["generationConfig"] == {
            "temperature": 0.2,
            "topP": 0.9,
            "maxOutputTokens": 50,
            "stopSequences": ["THE END"],
            "topK": 5,
        }
    else:
        assert {k: sent.json[k] for k in ("temperature", "top_p", "max_tokens", "top_k")} == {
            "temperature": 0.2,
            "top_p": 0.9,
            "max_tokens": 50,
            "top_k": 5,
        }
        assert sent.json["stop_sequences"] == ["THE END"]


def test_anthropic_asks_for_its_default_max_tokens_when_the_actor_sets_none(
    anthropic_provider: MakeNative, stub_server: StubServer
) -> None:
    provider = anthropic_provider()

    provider.complete(ask())

    assert stub_server.chat_requests[0].json["max_tokens"] == DEFAULT_MAX_TOKENS


@pytest.mark.parametrize("param", ["system", "tools", "stream", "model"])
def test_anthropic_refuses_params_that_would_override_its_own(
    anthropic_provider: MakeNative, stub_server: StubServer, param: str
) -> None:
    with pytest.raises(ProviderConfigError, match=f"params may not set {param}"):
        anthropic_provider().complete(ask(params={param: "x"}))
    assert stub_server.chat_requests == []


@pytest.mark.parametrize(
    "param", ["system_instruction", "systemInstruction", "tools", "http_options", "model"]
)
def test_gemini_refuses_params_that_would_override_its_own(
    gemini_provider: MakeNative, stub_server: StubServer, param: str
) -> None:
    with pytest.raises(ProviderConfigError, match=f"params may not set {param}"):
        gemini_provider().complete(ask(params={param: "x"}))
    assert stub_server.chat_requests == []


def test_gemini_refuses_a_param_its_config_does_not_have_without_a_call(
    gemini_provider: MakeNative, stub_server: StubServer
) -> None:
    provider = gemini_provider()

    with pytest.raises(
        ProviderConfigError, match=r"params\.temprature: Extra inputs are not permitted"
    ):
        provider.complete(ask(params={"temprature": 0.3}))
    assert stub_server.chat_requests == []


# -- tool calls ---------------------------------------------------------------------------


def test_it_offers_tools_in_its_apis_form_and_returns_the_calls(
    native_provider: MakeNative, stub_server: StubServer
) -> None:
    stub_server.enqueue(tool_calls(("get_weather", {"city": "Paris"}), usage=(20, 8)))
    tokens: list[str] = []

    result = native_provider().complete(ask(tools=(WEATHER,)), on_token=tokens.append)

    [call] = result.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
    assert call.id
    assert (result.text, result.tokens_in, result.tokens_out, tokens) == ("", 20, 8, [])
    [sent] = stub_server.chat_requests
    assert not streamed(sent)  # a call that offers tools may get calls, not text
    if is_gemini(sent):
        assert call.extra_content == {"google": {"thought_signature": gemini_signature(0)}}
        assert sent.json["tools"] == [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "description": "The weather in a city.",
                        # The SDK writes declarations with their proto field names,
                        # which the API reads as well as the camel-case ones.
                        "parameters_json_schema": WEATHER["function"]["parameters"],
                    }
                ]
            }
        ]
    else:
        assert sent.json["tools"] == [
            {
                "name": "get_weather",
                "description": "The weather in a city.",
                "input_schema": WEATHER["function"]["parameters"],
            }
        ]


def conversation(call_id: str, extra: dict[str, Any] | None) -> tuple[dict[str, Any], ...]:
    """A tool loop's conversation (the OpenAI chat format), as runner/steps/tool_loop.py
    builds it: the prompt, the model's call, the tool's result."""
    call: dict[str, Any] = {
        "id": call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    if extra:
        call["extra_content"] = extra
    return (
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": "sunny, 21 C"},
    )


def test_a_tool_loop_goes_round_with_its_calls_and_results(
    native_provider: MakeNative, stub_server: StubServer
) -> None:
    stub_server.enqueue(tool_calls(("get_weather", {"city": "Paris"})), reply("It is sunny."))
    provider = native_provider()
    first = provider.complete(ask("Weather in Paris?", tools=(WEATHER,)))
    [call] = first.tool_calls

    answer = provider.complete(
        ask(
            "Weather in Paris?",
            tools=(WEATHER,),
            messages=conversation(call.id, call.extra_content),
        )
    )

    assert answer.text == "It is sunny."
    sent = stub_server.chat_requests[-1]
    if is_gemini(sent):
        assert sent.json["contents"] == [
            {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
            {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {
                            "id": call.id,
                            "name": "get_weather",
                            "args": {"city": "Paris"},
                        },
                        # Sent back as it came: Gemini 3 refuses a call without it.
                        "thoughtSignature": gemini_signature(0),
                    }
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "id": call.id,
                            "name": "get_weather",
                            "response": {"output": "sunny, 21 C"},
                        }
                    }
                ],
            },
        ]
    else:
        assert sent.json["messages"] == [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": call.id,
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call.id, "content": "sunny, 21 C"}
                ],
            },
        ]


def test_a_last_turn_offered_no_tools_declares_those_used_with_calling_off(
    native_provider: MakeNative, stub_server: StubServer
) -> None:
    provider = native_provider()

    provider.complete(ask("Weather in Paris?", messages=conversation("toolu_1", None)))

    [sent] = stub_server.chat_requests
    if is_gemini(sent):
        assert sent.json["tools"] == [{"functionDeclarations": [{"name": "get_weather"}]}]
        assert sent.json["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}
    else:
        assert sent.json["tools"] == [{"name": "get_weather", "input_schema": {"type": "object"}}]
        assert sent.json["tool_choice"] == {"type": "none"}


def test_a_tool_loops_system_messages_go_where_the_api_wants_them(
    native_provider: MakeNative, stub_server: StubServer
) -> None:
    messages = ({"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"})

    native_provider().complete(ask("Hi", messages=messages))

    [sent] = stub_server.chat_requests
    assert system_of(sent) == "Be terse."
    assert sent.prompt == "Hi"


# -- what each API counts its own way -----------------------------------------------------


def test_anthropics_cached_prompt_tokens_count_as_input(
    anthropic_provider: MakeNative, stub_server: StubServer
) -> None:
    provider = anthropic_provider()
    message = {
        "type": "message",
        "role": "assistant",
        "model": "model-1",
        "content": [{"type": "text", "text": "cached"}],
        "usage": {
            "input_tokens": 10,
            "cache_creation_input_tokens": 200,
            "cache_read_input_tokens": 1000,
            "output_tokens": 7,
        },
    }
    stub_server.enqueue(raw(json.dumps(message)))

    result = provider.complete(ask())

    assert (result.tokens_in, result.tokens_out) == (1210, 7)


def test_an_anthropic_refusal_is_a_failed_call(
    anthropic_provider: MakeNative, stub_server: StubServer
) -> None:
    message = {
        "type": "message",
        "role": "assistant",
        "model": "model-1",
        "content": [],
        "stop_reason": "refusal",
        "usage": {"input_tokens": 10, "output_tokens": 0},
    }
    stub_server.enqueue(raw(json.dumps(message)))

    with pytest.raises(ProviderError, match=r"refused to answer$") as caught:
        anthropic_provider().complete(ask())

    assert caught.value.retryable is False


def test_geminis_thinking_tokens_count_as_output_and_its_429_wait_is_read_from_its_body(
    gemini_provider: MakeNative, stub_server: StubServer, sleeps: list[float]
) -> None:
    provider = gemini_provider()
    answer = {
        "candidates": [
            {
                "content": {
                    "parts": [{"text": "planning...", "thought": True}, {"text": "42"}],
                    "role": "model",
                },
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 11,
            "candidatesTokenCount": 2,
            "thoughtsTokenCount": 30,
            "totalTokenCount": 43,
        },
        "modelVersion": "model-1",
    }
    retry = {"@type": GEMINI_RETRY_INFO, "retryDelay": "2s"}
    stub_server.enqueue(error(429, "Quota exceeded.", details=[retry]), raw(json.dumps(answer)))

    result = provider.complete(ask())

    assert (result.text, result.tokens_in, result.tokens_out) == ("42", 11, 32)
    assert sleeps == [pytest.approx(2.0)]


def test_gemini_says_why_it_gave_no_answer(
    gemini_provider: MakeNative, stub_server: StubServer
) -> None:
    provider = gemini_provider()
    blocked = {"candidates": [{"content": {"role": "model"}, "finishReason": "SAFETY"}]}
    refused = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}
    stub_server.enqueue(raw(json.dumps(blocked)), raw(json.dumps(refused)))

    with pytest.raises(ProviderError, match="stopped without an answer: SAFETY") as caught:
        provider.complete(ask())
    assert caught.value.retryable is False
    with pytest.raises(ProviderError, match="refused the prompt: PROHIBITED_CONTENT"):
        provider.complete(ask())


def test_anthropic_takes_a_base_url_written_with_v1(stub_server: StubServer) -> None:
    provider = AnthropicProvider(f"{stub_server.url}/v1/", API_KEY, allowlist=[stub_server.address])

    assert provider.complete(ask()).text == "stub answer"
    assert provider.base_url == stub_server.url
    assert [r.path for r in stub_server.requests] == ["/v1/messages"]


def _message_start() -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "model-1",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
