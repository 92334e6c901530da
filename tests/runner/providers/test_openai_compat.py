"""The OpenAI-compatible provider (and Ollama, its subclass) against the stub server."""

from __future__ import annotations

import json
import re
import socket
import time
from typing import Any

import httpx
import pytest

from runner.providers import (
    ChatRequest,
    ProviderConfigError,
    ProviderError,
    ProviderTimeoutError,
)
from runner.providers.http_calls import BASE_BACKOFF_S, MAX_RESPONSE_CHARS, MAX_RETRY_AFTER_S
from runner.providers.ollama import DEFAULT_OLLAMA_URL, OllamaProvider
from runner.providers.openai_compat import OpenAICompatibleProvider
from tests.resolver import fake_resolver
from tests.runner.providers.conftest import API_KEY, MakeProvider
from tests.runner.providers.stub_server import (
    StubServer,
    error,
    hang_up,
    rate_limited,
    raw,
    redirect,
    reply,
    sse,
)

# Deadline tests allow this much past timeout_s for scheduling and teardown.
MARGIN_S = 0.35


def ask(prompt: str = "Write a story about a fox", **options: Any) -> ChatRequest:
    options.setdefault("model", "llama3.2:latest")
    return ChatRequest(prompt=prompt, **options)


# -- the wire format, both providers ------------------------------------------------------


def test_it_returns_a_plain_answer_with_its_usage(
    any_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply("Once upon a time.", usage=(12, 5), model="llama3.2:3b"))

    result = any_provider().complete(ask(system="You write fables."))

    assert (result.text, result.tokens_in, result.tokens_out) == ("Once upon a time.", 12, 5)
    assert result.model == "llama3.2:3b"
    assert result.latency_ms >= 0
    [sent] = stub_server.chat_requests
    assert sent.model == "llama3.2:latest"
    assert sent.prompt == "Write a story about a fox"
    assert sent.json["messages"][0] == {"role": "system", "content": "You write fables."}
    assert not sent.json.get("stream")


def test_calls_to_a_server_go_on_over_the_connection_the_first_one_opened(
    any_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.keep_alive = True
    provider = any_provider()

    answers = [provider.complete(ask()).text for _ in range(3)]

    assert answers == ["stub answer"] * 3
    assert len({sent.client_port for sent in stub_server.chat_requests}) == 1


def test_a_cookie_one_call_is_given_reaches_no_later_call(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.keep_alive = True
    completion = {"choices": [{"message": {"role": "assistant", "content": "first"}}]}
    stub_server.enqueue(
        raw(json.dumps(completion), headers={"Set-Cookie": "session=theirs; Path=/"}), reply()
    )

    openai_provider().complete(ask())
    openai_provider(api_key="sk-another-actor-0123").complete(ask())

    assert [sent.headers.get("cookie") for sent in stub_server.chat_requests] == [None, None]


def test_a_finished_calls_deadline_does_not_cut_the_next_call_on_its_connection(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    # The first call's watchdog would shut the shared connection down at its deadline (1 s),
    # in the middle of the second call, had it not been stopped when the first body ended.
    stub_server.keep_alive = True
    stub_server.enqueue(reply("quick"), reply("slow", delay_s=1.5))
    provider = openai_provider()

    first = provider.complete(ask(timeout_s=1))
    second = provider.complete(ask(timeout_s=10))

    assert (first.text, second.text) == ("quick", "slow")
    assert len({sent.client_port for sent in stub_server.chat_requests}) == 1


def test_it_streams_tokens_in_order_and_returns_the_full_text(
    any_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply(chunks=["Once", " upon", " a", " time."], usage=(9, 4)))
    tokens: list[str] = []

    result = any_provider().complete(ask(), on_token=tokens.append)

    assert tokens == ["Once", " upon", " a", " time."]
    assert result.text == "Once upon a time."
    assert (result.tokens_in, result.tokens_out) == (9, 4)
    [sent] = stub_server.chat_requests
    assert sent.json["stream"] is True
    assert sent.json["stream_options"] == {"include_usage": True}


def test_it_leaves_usage_empty_when_the_server_sends_none(
    any_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply("plain", usage=None), reply(chunks=["str", "eam"], usage=None))
    provider = any_provider()

    plain = provider.complete(ask())
    streamed = provider.complete(ask(), on_token=lambda _: None)

    assert (plain.tokens_in, plain.tokens_out) == (None, None)
    assert (streamed.text, streamed.tokens_in, streamed.tokens_out) == ("stream", None, None)


def test_it_sends_the_actor_params_in_the_body(
    any_provider: MakeProvider, stub_server: StubServer
) -> None:
    any_provider().complete(ask(params={"temperature": 0.2, "max_tokens": 50, "seed": 7}))

    [sent] = stub_server.chat_requests
    assert (sent.json["temperature"], sent.json["max_tokens"], sent.json["seed"]) == (0.2, 50, 7)


@pytest.mark.parametrize("param", ["stream", "model", "messages", "n"])
def test_it_refuses_params_that_would_override_its_own(
    openai_provider: MakeProvider, stub_server: StubServer, param: str
) -> None:
    with pytest.raises(ProviderConfigError, match=f"params may not set {param}"):
        openai_provider().complete(ask(params={param: 2}))
    assert stub_server.chat_requests == []


def test_it_sends_the_api_key_as_a_bearer_token(
    any_provider: MakeProvider, stub_server: StubServer
) -> None:
    provider = any_provider()
    provider.complete(ask())

    [sent] = stub_server.chat_requests
    expected = "ollama" if isinstance(provider, OllamaProvider) else API_KEY
    assert sent.headers["authorization"] == f"Bearer {expected}"


def test_it_answers_on_token_in_one_piece_when_the_server_ignores_stream(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    body = '{"choices": [{"index": 0, "message": {"content": "all at once"}}], "model": "m"}'
    stub_server.enqueue(raw(body))
    tokens: list[str] = []

    result = openai_provider().complete(ask(), on_token=tokens.append)

    assert tokens == ["all at once"]
    assert result.text == "all at once"


# -- retries --------------------------------------------------------------------------------


def test_it_retries_a_429_honouring_retry_after(
    openai_provider: MakeProvider, stub_server: StubServer, sleeps: list[float]
) -> None:
    stub_server.enqueue(rate_limited("1"), reply("finally"))

    result = openai_provider().complete(ask())

    assert result.text == "finally"
    assert sleeps == [pytest.approx(1.0)]
    assert len(stub_server.chat_requests) == 2


@pytest.mark.parametrize(
    ("header", "value", "expected"),
    [
        ("Retry-After", "2", 2.0),
        ("Retry-After", "0.5", 0.5),
        ("retry-after-ms", "1500", 1.5),
        ("Retry-After", "3600", MAX_RETRY_AFTER_S),
        ("Retry-After", "-4", 0.0),
    ],
)
def test_it_reads_retry_after_in_its_forms_capped(
    openai_provider: MakeProvider,
    stub_server: StubServer,
    sleeps: list[float],
    header: str,
    value: str,
    expected: float,
) -> None:
    stub_server.enqueue(rate_limited(value, header=header), reply())

    openai_provider().complete(ask(timeout_s=120))

    assert sleeps == [pytest.approx(expected)]


def test_it_falls_back_to_backoff_when_retry_after_is_not_a_number(
    openai_provider: MakeProvider, stub_server: StubServer, sleeps: list[float]
) -> None:
    stub_server.enqueue(rate_limited("soon"), reply())

    openai_provider().complete(ask())

    assert BASE_BACKOFF_S / 2 <= sleeps[0] <= BASE_BACKOFF_S


def test_it_retries_a_503_then_succeeds(
    any_provider: MakeProvider, stub_server: StubServer, sleeps: list[float]
) -> None:
    stub_server.enqueue(error(503, "loading model"), reply("ready now"))

    assert any_provider().complete(ask()).text == "ready now"
    assert len(sleeps) == 1


def test_it_gives_up_after_exhausting_retries_on_500s_with_growing_backoff(
    any_provider: MakeProvider, stub_server: StubServer, sleeps: list[float]
) -> None:
    stub_server.default = error(500, "upstream exploded")
    provider = any_provider()

    with pytest.raises(ProviderError) as caught:
        provider.complete(ask())

    exc = caught.value
    assert exc.retryable is True
    assert exc.status_code == 500
    assert (
        str(exc)
        == f"{provider.name} at {provider.base_url} answered 500 after 4 attempts: upstream exploded"
    )
    assert len(stub_server.chat_requests) == 4
    for attempt, slept in enumerate(sleeps):
        full = BASE_BACKOFF_S * 2**attempt
        assert full / 2 <= slept <= full  # exponential, with jitter
    assert len(sleeps) == 3


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504])
def test_it_retries_statuses_a_retry_can_fix(
    openai_provider: MakeProvider, stub_server: StubServer, status: int
) -> None:
    stub_server.enqueue(error(status), reply("ok"))

    assert openai_provider().complete(ask()).text == "ok"
    assert len(stub_server.chat_requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_it_does_not_retry_statuses_a_retry_cannot_fix(
    openai_provider: MakeProvider, stub_server: StubServer, sleeps: list[float], status: int
) -> None:
    stub_server.enqueue(error(status, "model 'nope' not found"))

    with pytest.raises(ProviderError) as caught:
        openai_provider().complete(ask())

    assert caught.value.retryable is False
    assert caught.value.status_code == status
    assert str(caught.value).endswith(f"answered {status}: model 'nope' not found")
    assert len(stub_server.chat_requests) == 1
    assert sleeps == []


def test_it_gives_up_when_retry_after_does_not_fit_the_time_budget(
    openai_provider: MakeProvider, stub_server: StubServer, sleeps: list[float]
) -> None:
    stub_server.enqueue(rate_limited("20"))

    with pytest.raises(ProviderError) as caught:
        openai_provider().complete(ask(timeout_s=5))

    assert caught.value.retryable is True
    assert "answered 429" in str(caught.value)
    assert "no time left to retry within 5 s" in str(caught.value)
    assert sleeps == []


def test_it_honours_max_retries(openai_provider: MakeProvider, stub_server: StubServer) -> None:
    stub_server.default = error(502)

    with pytest.raises(ProviderError, match="after 2 attempts"):
        openai_provider(max_retries=1).complete(ask())
    assert len(stub_server.chat_requests) == 2


def test_it_retries_a_dropped_connection(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(hang_up(), reply("second time lucky"))

    assert openai_provider().complete(ask()).text == "second time lucky"


def test_it_reports_an_unreachable_server_as_retryable(sleeps: list[float]) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago, so nobody listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAICompatibleProvider(
        f"http://127.0.0.1:{port}/v1", None, allowlist=[f"127.0.0.1:{port}"], sleep=sleeps.append
    )

    with pytest.raises(ProviderError) as caught:
        provider.complete(ask())

    assert caught.value.retryable is True
    assert f"openai at http://127.0.0.1:{port}/v1 could not be reached after 4 attempts" in str(
        caught.value
    )


def test_it_does_not_retry_a_stream_that_broke_after_tokens_were_delivered(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(
        sse(
            'data: {"choices": [{"index": 0, "delta": {"content": "Half a"}}]}\n\n',
            'data: {"error": {"message": "server overloaded"}}\n\n',
        )
    )
    tokens: list[str] = []

    with pytest.raises(ProviderError) as caught:
        openai_provider().complete(ask(), on_token=tokens.append)

    assert tokens == ["Half a"]
    assert len(stub_server.chat_requests) == 1
    assert caught.value.retryable is True
    assert "reported an error mid-stream: server overloaded: 6 characters had been streamed" in str(
        caught.value
    )


def test_it_retries_a_connect_timeout(
    openai_provider: MakeProvider, stub_server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = httpx.HTTPTransport.handle_request
    calls: list[int] = []

    def first_times_out(self: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            raise httpx.ConnectTimeout("timed out", request=request)
        return real(self, request)

    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", first_times_out)

    assert openai_provider().complete(ask()).text == "stub answer"
    assert len(calls) == 2


def test_it_reports_connect_timeouts_as_such(
    openai_provider: MakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    def always_times_out(self: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("timed out", request=request)

    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", always_times_out)

    with pytest.raises(
        ProviderError, match="could not connect within 5 s after 4 attempts"
    ) as caught:
        openai_provider().complete(ask())
    assert caught.value.retryable is True
    assert not isinstance(caught.value, ProviderTimeoutError)


def test_an_exception_from_on_token_propagates_unchanged_and_unretried(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    class Cancelled(Exception):
        pass

    def cancel(token: str) -> None:
        raise Cancelled(token)

    stub_server.enqueue(reply(chunks=["one", "two"]))

    with pytest.raises(Cancelled, match="one"):
        openai_provider().complete(ask(), on_token=cancel)
    assert len(stub_server.chat_requests) == 1


# -- the time budget ----------------------------------------------------------------------


@pytest.mark.timeout(10)
def test_it_gives_up_on_a_slow_answer_within_the_timeout(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply("too late", delay_s=5))
    provider = openai_provider()
    started = time.monotonic()

    with pytest.raises(ProviderTimeoutError) as caught:
        provider.complete(ask(timeout_s=0.5))

    assert time.monotonic() - started < 0.5 + MARGIN_S
    assert caught.value.retryable is True
    assert str(caught.value) == f"openai at {provider.base_url} did not answer within 0.5 s"


@pytest.mark.timeout(10)
def test_it_stops_a_trickling_stream_at_the_deadline(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply(chunks=["tick "] * 100, interval_s=0.05))
    tokens: list[str] = []
    started = time.monotonic()

    with pytest.raises(ProviderTimeoutError, match="characters had been streamed"):
        openai_provider().complete(ask(timeout_s=0.5), on_token=tokens.append)

    assert time.monotonic() - started < 0.5 + MARGIN_S
    assert 0 < len(tokens) < 100


@pytest.mark.timeout(10)
def test_it_stops_a_trickling_plain_body_at_the_deadline(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply("a long answer " * 20, interval_s=0.05))
    started = time.monotonic()

    with pytest.raises(ProviderTimeoutError):
        openai_provider().complete(ask(timeout_s=0.5))

    assert time.monotonic() - started < 0.5 + MARGIN_S


@pytest.mark.timeout(10)
def test_it_cuts_a_stream_that_stalls_just_before_the_deadline(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    # Text for 0.8 s, then silence: each read may wait the full 1 s budget, so without
    # a cut at the deadline this call would last about 1.8 s.
    stub_server.enqueue(reply(chunks=["word "] * 9, interval_s=0.1, stall_s=5))
    tokens: list[str] = []
    started = time.monotonic()

    with pytest.raises(ProviderTimeoutError):
        openai_provider().complete(ask(timeout_s=1), on_token=tokens.append)

    assert time.monotonic() - started < 1 + MARGIN_S
    assert len(tokens) == 9


@pytest.mark.timeout(10)
def test_it_cuts_a_plain_body_that_stalls_just_before_the_deadline(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    # Pieces for about 0.8 s, then silence before the last one (see the test above).
    stub_server.enqueue(reply("a long answer", interval_s=0.05, stall_s=5))
    started = time.monotonic()

    with pytest.raises(ProviderTimeoutError):
        openai_provider().complete(ask(timeout_s=1))

    assert time.monotonic() - started < 1 + MARGIN_S


# -- malformed and oversized answers ------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        ("{not json", "application/json", "answered with a body that is not valid JSON"),
        ("<html>Bad gateway</html>", "text/html", "not valid JSON: Content-Type text/html: <html>"),
        (
            '{"id": "x", "object": "chat.completion"}',
            "application/json",
            "answered without choices",
        ),
        ('{"choices": []}', "application/json", "answered without choices"),
        ("[1, 2]", "application/json", "answered with JSON that is not an object"),
        ('{"choices": [{"index": 0}]}', "application/json", "without a text message in choices[0]"),
        (
            '{"choices": [{"message": {"content": 5}}]}',
            "application/json",
            "without a text message in choices[0]",
        ),
        (
            '{"error": {"message": "model is loading"}}',
            "application/json",
            "answered with an error: model is loading",
        ),
    ],
)
def test_it_reports_a_malformed_body_clearly(
    openai_provider: MakeProvider,
    stub_server: StubServer,
    body: str,
    content_type: str,
    message: str,
) -> None:
    stub_server.enqueue(raw(body, content_type=content_type))

    with pytest.raises(ProviderError) as caught:
        openai_provider().complete(ask())

    assert message in str(caught.value)
    assert caught.value.retryable is False
    assert len(stub_server.chat_requests) == 1


@pytest.mark.parametrize(
    ("events", "message"),
    [
        (["data: {not json\n\n"], "sent a stream event that is not valid JSON"),
        (
            ['data: {"id": "x"}\n\n', "data: [DONE]\n\n"],
            "answered with a stream that carried no choices",
        ),
        (
            ['data: {"choices": [{"index": 0, "delta": {"content": 42}}]}\n\n'],
            "sent a stream chunk whose content is not text",
        ),
    ],
)
def test_it_reports_a_malformed_stream_clearly(
    openai_provider: MakeProvider, stub_server: StubServer, events: list[str], message: str
) -> None:
    stub_server.enqueue(sse(*events))

    with pytest.raises(ProviderError, match=message) as caught:
        openai_provider().complete(ask(), on_token=lambda _: None)

    assert caught.value.retryable is False


def test_it_retries_a_stream_that_reports_an_error_before_any_token(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(sse('data: {"error": {"message": "overloaded"}}\n\n'), reply(chunks=["ok"]))

    assert openai_provider().complete(ask(), on_token=lambda _: None).text == "ok"


def test_it_refuses_a_plain_answer_past_the_size_cap(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply("x" * (MAX_RESPONSE_CHARS + 1)))

    with pytest.raises(
        ProviderError, match=f"response exceeded {MAX_RESPONSE_CHARS} characters"
    ) as caught:
        openai_provider().complete(ask())

    assert caught.value.retryable is False


def test_it_stops_a_stream_at_the_size_cap(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply(chunks=["x" * 1000] * 300))
    received: list[str] = []

    with pytest.raises(ProviderError, match=f"response exceeded {MAX_RESPONSE_CHARS} characters"):
        openai_provider().complete(ask(), on_token=received.append)

    assert len("".join(received)) == MAX_RESPONSE_CHARS


def test_it_stops_reading_a_body_past_the_byte_ceiling(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply("y" * 20_000))

    with pytest.raises(ProviderError, match="response body exceeded 10000 bytes") as caught:
        openai_provider(max_body_bytes=10_000).complete(ask())

    assert caught.value.retryable is False


def test_it_does_not_follow_a_redirect(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(redirect(f"{stub_server.url}/elsewhere"))

    with pytest.raises(ProviderError) as caught:
        openai_provider().complete(ask())

    assert caught.value.retryable is False
    assert f"answered 302: redirect to {stub_server.url}/elsewhere not followed" in str(
        caught.value
    )
    assert [r.path for r in stub_server.requests] == ["/v1/chat/completions"]


# -- secrets ------------------------------------------------------------------------------


def test_it_keeps_the_api_key_out_of_errors_and_reprs(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(error(401, f"Incorrect API key provided: {API_KEY}"))
    provider = openai_provider()

    with pytest.raises(ProviderError) as caught:
        provider.complete(ask())

    assert "Incorrect API key provided: ***" in str(caught.value)
    for text in (str(caught.value), repr(caught.value), repr(provider), repr(vars(provider))):
        assert API_KEY not in text
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_ollamas_placeholder_key_is_not_redacted_from_messages(
    stub_server: StubServer, sleeps: list[float]
) -> None:
    stub_server.enqueue(error(404, "model 'llama9' not found, try pulling it with ollama pull"))
    provider = OllamaProvider(stub_server.url, allowlist=[stub_server.address])

    with pytest.raises(ProviderError, match="try pulling it with ollama pull"):
        provider.complete(ask())


def test_it_sends_no_ambient_openai_credentials(
    openai_provider: MakeProvider, stub_server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-hosts-own-key")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-host")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-host")

    openai_provider(api_key=None).complete(ask())

    [sent] = stub_server.chat_requests
    assert "authorization" not in sent.headers
    assert "openai-organization" not in sent.headers
    assert "openai-project" not in sent.headers


# -- addresses at connect time ------------------------------------------------------------


def test_it_refuses_a_host_that_rebinds_to_a_private_address_after_validation(
    stub_server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_resolver(monkeypatch, {"rebind.example": [["8.8.8.8"], ["127.0.0.1"]]})
    provider = OpenAICompatibleProvider(
        f"http://rebind.example:{stub_server.port}/v1", None, allowlist=[]
    )

    with pytest.raises(ProviderConfigError) as caught:
        provider.complete(ask())

    assert "rebind.example now resolves to 127.0.0.1, a loopback address" in str(caught.value)
    assert stub_server.requests == []


def test_it_connects_to_the_address_it_checked_keeping_the_host_name(
    stub_server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = fake_resolver(monkeypatch, {"models.example": [["127.0.0.1"]]})
    provider = OpenAICompatibleProvider(
        f"http://models.example:{stub_server.port}/v1", None, allowlist=["127.0.0.0/8"]
    )

    assert provider.complete(ask()).text == "stub answer"

    # Once to validate, once to connect: the HTTP client never resolved the name itself.
    assert asked == ["models.example", "models.example"]
    [sent] = stub_server.chat_requests
    assert sent.headers["host"] == f"models.example:{stub_server.port}"


def test_two_names_on_one_address_never_share_a_connection(
    stub_server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A connection (its TLS session, on https) was made for one name: a request to another
    # name at the same address, a CDN's say, opens its own.
    stub_server.keep_alive = True
    fake_resolver(monkeypatch, {"a.example": [["127.0.0.1"]], "b.example": [["127.0.0.1"]]})

    def provider(name: str) -> OpenAICompatibleProvider:
        url = f"http://{name}:{stub_server.port}/v1"
        return OpenAICompatibleProvider(url, None, allowlist=["127.0.0.0/8"])

    for name in ["a.example", "b.example", "a.example", "b.example"]:
        provider(name).complete(ask())

    ports = {}
    for sent in stub_server.chat_requests:
        ports.setdefault(sent.headers["host"].partition(":")[0], set()).add(sent.client_port)
    assert [len(ports["a.example"]), len(ports["b.example"])] == [1, 1]
    assert ports["a.example"] != ports["b.example"]


# -- Ollama -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, DEFAULT_OLLAMA_URL),
        ("http://127.0.0.1:11434", "http://127.0.0.1:11434/v1"),
        ("http://127.0.0.1:11434/", "http://127.0.0.1:11434/v1"),
        ("http://127.0.0.1:11434/v1/", "http://127.0.0.1:11434/v1"),
        ("http://localhost:11434/proxy/ollama", "http://localhost:11434/proxy/ollama/v1"),
    ],
)
def test_ollama_speaks_the_v1_api_of_its_base_url(given: str | None, expected: str) -> None:
    assert OllamaProvider(given).base_url == expected


def test_ollama_refuses_an_address_off_the_allowlist() -> None:
    with pytest.raises(ProviderConfigError, match=re.escape("127.0.0.1, a loopback address")):
        OllamaProvider("http://127.0.0.1:8080")


def test_the_stub_lists_models_like_ollama(stub_server: StubServer) -> None:
    tags = httpx.get(f"{stub_server.url}/api/tags").json()
    models = httpx.get(f"{stub_server.base_url}/models").json()

    assert [m["name"] for m in tags["models"]] == stub_server.models
    assert [m["id"] for m in models["data"]] == stub_server.models
