"""A provider for any server that speaks the OpenAI chat completions API (OpenAI, vLLM, Ollama...).

The openai SDK does the HTTP and the SSE decoding; this module owns what the SDK leaves to
its caller and the runner cannot do without:

- one time budget per call (``ChatRequest.timeout_s``) covering every attempt and backoff,
  enforced between chunks and, through a watchdog on the socket, during a stalled read;
- our own retry loop (the SDK's is off) so backoff honours ``Retry-After`` within that
  budget and never replays a stream whose tokens were already handed out;
- a cap on response size, and clear errors for bodies that are not what the API promises;
- the SSRF guard of ``urls.py`` applied to every connection, not only to the configured URL.

The connection guard, the watchdog and the byte ceiling are the transport of
``workflows/guarded_http.py``, given this package's address check (``urls.py``).

The response bodies are parsed here rather than by the SDK's lenient model construction,
so a malformed body becomes a clear ProviderError instead of an AttributeError later.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn, cast

import httpx
import openai

from workflows.actor_spec import RESERVED_PARAMS
from workflows.guarded_http import BodyTooLarge, DeadlinePassed, call_deadline, guarded_client

from .base import (
    ChatRequest,
    ChatResult,
    ProviderConfigError,
    ProviderError,
    ProviderTimeoutError,
    TokenCallback,
    ToolCallRequest,
)
from .urls import DEFAULT_ALLOWLIST, check_base_url, connect_addresses, parse_allowlist

MAX_RESPONSE_CHARS = 200_000
# Hard ceiling on any body, streamed or not: SSE wraps every few characters in a JSON
# envelope, so a legitimate long stream is many times larger than its text.
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_RETRY_AFTER_S = 30.0
BASE_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
_RETRYABLE_STATUSES = frozenset({408, 425, 429})
_EXCERPT_CHARS = 200
_MIN_SECRET_CHARS = 8
_NO_AMBIENT_HEADERS = cast(
    "dict[str, str]", {"OpenAI-Organization": openai.Omit(), "OpenAI-Project": openai.Omit()}
)


class _Secret:
    """Keep an API key out of reprs, tracebacks' locals and logs."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """Return the secret, for the one place that sends it."""
        return self._value

    def __repr__(self) -> str:
        return "'***'"


class _Failure(Exception):
    """Describe one failed attempt; the retry loop turns the last one into a ProviderError."""

    def __init__(
        self,
        reason: str,
        *,
        retryable: bool,
        detail: str = "",
        kind: str = "error",
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail
        self.retryable = retryable
        self.kind = kind  # "error", "timeout" or "config"
        self.status_code = status_code
        self.retry_after = retry_after


class OpenAICompatibleProvider:
    """Call an OpenAI-compatible chat completions API, with retries inside one time budget."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        max_retries: int = 3,
        connect_timeout: float = 5,
        allowlist: Sequence[str] = DEFAULT_ALLOWLIST,
        sleep: Callable[[float], None] = time.sleep,
        max_response_chars: int = MAX_RESPONSE_CHARS,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        if max_retries < 0:
            raise ProviderConfigError(f"max_retries must not be negative, not {max_retries}")
        if not connect_timeout > 0:
            raise ProviderConfigError(f"connect_timeout must be positive, not {connect_timeout}")
        self._allowlist = parse_allowlist(allowlist)
        self.base_url = check_base_url(base_url, allowlist=self._allowlist).url
        self._api_key = _Secret(api_key) if api_key else None
        self.max_retries = max_retries
        self.connect_timeout = connect_timeout
        self.max_response_chars = max_response_chars
        self.max_body_bytes = max_body_bytes
        self._sleep = sleep

    def __repr__(self) -> str:
        key = "<set>" if self._api_key else None
        return f"{type(self).__name__}(base_url={self.base_url!r}, api_key={key})"

    def complete(
        self, request: ChatRequest, *, on_token: TokenCallback | None = None
    ) -> ChatResult:
        """Return the model's answer, streaming text deltas to ``on_token`` when given.

        Transient failures (connection, timeout before the budget ends, 408/425/429, 5xx)
        are retried up to ``max_retries`` times with exponential backoff and jitter, or
        after ``Retry-After``, as long as the wait fits in ``request.timeout_s``. A stream
        that fails after tokens were delivered is not retried here: the caller has already
        seen part of an answer, so it decides.
        """
        reserved = sorted(RESERVED_PARAMS.intersection(request.params))
        if reserved:
            raise ProviderConfigError(f"{self._who()}: params may not set {', '.join(reserved)}")
        started = time.monotonic()
        deadline = started + request.timeout_s
        attempts = 0
        while True:
            attempts += 1
            emitted = [0]
            try:
                text, tokens_in, tokens_out, model, calls = self._attempt(
                    request, on_token=on_token, deadline=deadline, emitted=emitted
                )
            except _Failure as failure:
                if emitted[0]:
                    failure.detail = _join(
                        failure.detail, f"{emitted[0]} characters had been streamed"
                    )
                    self._give_up(failure, attempts, request)
                if not failure.retryable or attempts > self.max_retries:
                    self._give_up(failure, attempts, request)
                delay = failure.retry_after
                if delay is None:
                    delay = min(MAX_BACKOFF_S, BASE_BACKOFF_S * 2 ** (attempts - 1))
                    delay *= 0.5 + random.random() / 2
                remaining = deadline - time.monotonic()
                if delay >= remaining:
                    if failure.kind != "timeout":
                        failure.detail = _join(
                            failure.detail,
                            f"no time left to retry within {request.timeout_s:g} s",
                        )
                    self._give_up(failure, attempts, request)
                self._sleep(delay)
                continue
            latency_ms = int((time.monotonic() - started) * 1000)
            return ChatResult(
                text, tokens_in, tokens_out, latency_ms, model or request.model, calls
            )

    # -- one attempt -------------------------------------------------------------------

    def _attempt(
        self,
        request: ChatRequest,
        *,
        on_token: TokenCallback | None,
        deadline: float,
        emitted: list[int],
    ) -> tuple[str, int | None, int | None, str | None, tuple[ToolCallRequest, ...]]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Failure("did not answer", retryable=True, kind="timeout")
        # A call that offers tools is not streamed: its answer may be tool calls, not text.
        streaming = on_token is not None and not request.tools
        messages: list[dict[str, Any]] = []
        if request.messages is not None:
            messages = list(request.messages)
        else:
            if request.system:
                messages.append({"role": "system", "content": request.system})
            messages.append({"role": "user", "content": request.prompt})
        timeout = httpx.Timeout(
            remaining, connect=min(self.connect_timeout, remaining), read=remaining
        )
        client = openai.OpenAI(
            base_url=self.base_url,
            # An empty key makes the SDK send no Authorization header at all, and a non-None
            # value stops it from reading OPENAI_API_KEY, which belongs to whoever runs the
            # server, not to this actor.
            api_key=self._api_key.reveal() if self._api_key else "",
            max_retries=0,
            timeout=timeout,
            http_client=guarded_client(
                self._allowlist, max_body_bytes=self.max_body_bytes, connect_check=connect_addresses
            ),
            # Nor should the host's OPENAI_ORG_ID / OPENAI_PROJECT_ID reach this server.
            # Omit removes a default header; the SDK's annotation only admits str.
            default_headers=_NO_AMBIENT_HEADERS,
        )
        with call_deadline(deadline):
            body: dict[str, Any] = {"model": request.model, "messages": messages}
            body["stream"] = streaming
            if streaming:
                body["stream_options"] = {"include_usage": True}
            if request.tools:
                body["tools"] = list(request.tools)
            body.update(request.params)  # none of them reserved (checked in `complete`)
            try:
                # The SDK's plain POST, not `chat.completions.create`: the body is built here
                # either way, and the typed method's walk over it (its TypedDicts) cost 1.3 ms
                # of CPU a call, a fifth of the call's.
                response = client.post(
                    "/chat/completions",
                    cast_to=httpx.Response,
                    body=body,
                    options={"timeout": timeout},
                    stream=streaming,
                )
            except openai.APIStatusError as exc:
                raise self._status_failure(exc) from exc
            except openai.APIConnectionError as exc:
                raise _transport_failure(exc, self.connect_timeout) from exc
            except (httpx.HTTPError, BodyTooLarge, DeadlinePassed) as exc:
                # Reading an error answer's body, which the SDK does outside its own guard.
                raise _transport_failure(exc, self.connect_timeout) from exc
            except openai.OpenAIError as exc:
                raise _Failure("failed", retryable=False, detail=str(exc)) from exc

            # Closed however it ends: its connection goes back to the shared pool, its
            # watchdog is stopped.
            try:
                content_type = response.headers.get("content-type", "")
                if streaming and "event-stream" in content_type:
                    # Chunks as the JSON they came in (the SDK's own decoder and its error
                    # events), not as its models: building one costs ~90 µs, and a model
                    # streams hundreds per answer. `_read_stream` reads them as untrusted data
                    # either way.
                    stream = openai.Stream(cast_to=object, response=response, client=client)
                    return (*self._read_stream(stream, on_token, deadline, emitted), ())
                # Some compatible servers ignore "stream": read the plain answer, then hand it
                # over in one piece.
                text, tokens_in, tokens_out, model, calls = self._read_body(response, content_type)
                if on_token is not None and text:
                    emitted[0] += len(text)
                    on_token(text)
                return text, tokens_in, tokens_out, model, calls
            finally:
                response.close()

    def _read_body(
        self, response: httpx.Response, content_type: str
    ) -> tuple[str, int | None, int | None, str | None, tuple[ToolCallRequest, ...]]:
        try:
            body = response.read()
        except (httpx.HTTPError, BodyTooLarge, DeadlinePassed, ProviderError) as exc:
            raise _transport_failure(exc, self.connect_timeout) from exc
        try:
            data = json.loads(body)
        except ValueError:
            raise _Failure(
                "answered with a body that is not valid JSON",
                retryable=False,
                detail=f"Content-Type {content_type or 'missing'}: "
                + _excerpt(body.decode("utf-8", "replace")),
            ) from None
        text, model, calls = _completion_text(data)
        if len(text) > self.max_response_chars:
            raise _Failure(
                f"response exceeded {self.max_response_chars} characters", retryable=False
            )
        tokens_in, tokens_out = _usage(data)
        return text, tokens_in, tokens_out, model, calls

    def _read_stream(
        self,
        stream: openai.Stream[Any],
        on_token: TokenCallback | None,
        deadline: float,
        emitted: list[int],
    ) -> tuple[str, int | None, int | None, str | None]:
        parts: list[str] = []
        total = 0
        tokens_in = tokens_out = None
        model: str | None = None
        saw_choices = finished = False
        try:
            for chunk in _chunks(stream, deadline, self.connect_timeout):
                chunk_model = _field(chunk, "model")
                if isinstance(chunk_model, str) and chunk_model:
                    model = chunk_model
                usage_in, usage_out = _usage(chunk)
                tokens_in = usage_in if usage_in is not None else tokens_in
                tokens_out = usage_out if usage_out is not None else tokens_out
                choices = _field(chunk, "choices")
                if not isinstance(choices, list):
                    continue
                saw_choices = True
                finished = finished or _finished(choices)
                delta = _chunk_delta(choices)
                if not delta:
                    continue
                total += len(delta)
                if total > self.max_response_chars:
                    raise _Failure(
                        f"response exceeded {self.max_response_chars} characters",
                        retryable=False,
                    )
                parts.append(delta)
                if on_token is not None:
                    emitted[0] += len(delta)
                    on_token(delta)
        finally:
            stream.close()
        if not saw_choices:
            raise _Failure("answered with a stream that carried no choices", retryable=False)
        if not finished:
            # The connection closed cleanly mid-answer: what came is not the whole answer.
            raise _Failure(
                "stopped mid-answer: its stream ended without a finish_reason", retryable=True
            )
        return "".join(parts), tokens_in, tokens_out, model

    # -- errors ------------------------------------------------------------------------

    def _status_failure(self, exc: openai.APIStatusError) -> _Failure:
        status = exc.status_code
        detail = _status_detail(exc)
        if 300 <= status < 400:
            location = exc.response.headers.get("location", "nowhere")
            return _Failure(
                f"answered {status}",
                retryable=False,
                detail=f"redirect to {_excerpt(location)} not followed; fix the base URL",
                status_code=status,
            )
        retryable = status in _RETRYABLE_STATUSES or status >= 500
        return _Failure(
            f"answered {status}",
            retryable=retryable,
            detail=detail,
            status_code=status,
            retry_after=_retry_after(exc.response.headers) if retryable else None,
        )

    def _who(self) -> str:
        return f"{self.name} at {self.base_url}"

    def _give_up(self, failure: _Failure, attempts: int, request: ChatRequest) -> NoReturn:
        """Raise the ProviderError for the last failed attempt.

        Raised ``from None``: the SDK's exceptions quote raw server bodies, which may echo
        the credentials, while this message carries what matters, redacted.
        """
        after = f" after {attempts} attempts" if attempts > 1 else ""
        detail = self._redact(failure.detail)
        if failure.kind == "timeout":
            message = f"{self._who()} did not answer within {request.timeout_s:g} s{after}"
            raise ProviderTimeoutError(_join(message, detail)) from None
        message = _join(f"{self._who()} {self._redact(failure.reason)}{after}", detail)
        if failure.kind == "config":
            raise ProviderConfigError(message) from None
        raise ProviderError(
            message, retryable=failure.retryable, status_code=failure.status_code
        ) from None

    def _redact(self, text: str) -> str:
        # Servers sometimes echo the credentials they rejected. Values too short to be real
        # keys (Ollama's placeholder "ollama") are left alone: replacing them would garble
        # ordinary words in the message and hide nothing.
        key = self._api_key.reveal() if self._api_key else ""
        if len(key) >= _MIN_SECRET_CHARS and key in text:
            return text.replace(key, "***")
        return text


def _chunks(stream: openai.Stream[Any], deadline: float, connect_timeout: float) -> Iterator[Any]:
    """Yield the stream's chunks, turning every way it can fail into a _Failure."""
    iterator = iter(stream)
    while True:
        try:
            chunk = next(iterator)
        except StopIteration:
            return
        except openai.APIError as exc:
            raise _Failure(
                "reported an error mid-stream", retryable=True, detail=_excerpt(exc.message)
            ) from exc
        except ValueError as exc:
            raise _Failure(
                "sent a stream event that is not valid JSON", retryable=False, detail=str(exc)
            ) from exc
        except (httpx.HTTPError, BodyTooLarge, DeadlinePassed, ProviderError) as exc:
            raise _transport_failure(exc, connect_timeout) from exc
        if time.monotonic() > deadline:
            raise _Failure("did not answer", retryable=True, kind="timeout")
        yield chunk


def _transport_failure(exc: BaseException, connect_timeout: float) -> _Failure:
    """Classify a failure below HTTP status level: connection, timeout, size, SSRF refusal."""
    for cause in _causes(exc):
        if isinstance(cause, DeadlinePassed):
            return _Failure("did not answer", retryable=True, kind="timeout")
        if isinstance(cause, BodyTooLarge):
            return _Failure(str(cause), retryable=False)
        if isinstance(cause, ProviderConfigError):
            return _Failure(str(cause), retryable=False, kind="config")
        if isinstance(cause, ProviderError):
            return _Failure("failed", retryable=cause.retryable, detail=str(cause))
        if isinstance(cause, httpx.ConnectTimeout):
            return _Failure(f"could not connect within {connect_timeout:g} s", retryable=True)
        if isinstance(cause, httpx.TimeoutException):
            return _Failure("did not answer", retryable=True, kind="timeout")
        if isinstance(cause, httpx.ConnectError):
            return _Failure("could not be reached", retryable=True, detail=str(cause))
        if isinstance(cause, httpx.HTTPError):
            return _Failure("broke the connection", retryable=True, detail=str(cause))
    return _Failure("could not be reached", retryable=True, detail=str(exc))


def _causes(exc: BaseException) -> Iterator[BaseException]:
    # The SDK wraps transport exceptions in APIConnectionError; what matters is underneath.
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _completion_text(data: object) -> tuple[str, str | None, tuple[ToolCallRequest, ...]]:
    """Return a completion body's text, model and tool calls, or raise a _Failure saying
    what is off."""
    if not isinstance(data, dict):
        raise _Failure("answered with JSON that is not an object", retryable=False)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        error = data.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else error
            raise _Failure("answered with an error", retryable=False, detail=_excerpt(str(message)))
        raise _Failure("answered without choices", retryable=False)
    message = _field(choices[0], "message")
    content = _field(message, "content")
    if not isinstance(message, dict) or not (content is None or isinstance(content, str)):
        raise _Failure("answered without a text message in choices[0]", retryable=False)
    model = data.get("model")
    calls = _tool_calls(message.get("tool_calls"))
    refusal = message.get("refusal")
    if not content and not calls and isinstance(refusal, str) and refusal:
        raise _Failure("refused to answer", retryable=False, detail=_excerpt(refusal))
    return content or "", model if isinstance(model, str) else None, calls


def _tool_calls(value: object) -> tuple[ToolCallRequest, ...]:
    """Read a message's `tool_calls` (OpenAI format); raise a _Failure for a malformed one."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _Failure("answered with tool_calls that are not a list", retryable=False)
    calls: list[ToolCallRequest] = []
    for i, call in enumerate(value):
        function = _field(call, "function")
        name = _field(function, "name")
        arguments = _field(function, "arguments")
        if not isinstance(name, str) or not name:
            raise _Failure(f"answered with tool_calls[{i}] without a name", retryable=False)
        if isinstance(arguments, dict):  # some servers (Ollama) send an object
            arguments = json.dumps(arguments)
        if arguments is None:
            arguments = "{}"
        if not isinstance(arguments, str):
            raise _Failure(
                f"answered with tool_calls[{i}] whose arguments are not text", retryable=False
            )
        call_id = _field(call, "id")
        calls.append(
            ToolCallRequest(
                id=call_id if isinstance(call_id, str) and call_id else f"call_{i}",
                name=name,
                arguments=arguments,
            )
        )
    return tuple(calls)


def _finished(choices: list[Any]) -> bool:
    """Tell whether a chunk ends the answer (its first choice has a finish_reason)."""
    return any(
        _field(choice, "index") in (None, 0) and _field(choice, "finish_reason")
        for choice in choices
    )


def _chunk_delta(choices: list[Any]) -> str:
    text = ""
    for choice in choices:
        index = _field(choice, "index")
        if index not in (None, 0):
            continue
        content = _field(_field(choice, "delta"), "content")
        if content is None:
            continue
        if not isinstance(content, str):
            raise _Failure("sent a stream chunk whose content is not text", retryable=False)
        text += content
    return text


def _usage(obj: object) -> tuple[int | None, int | None]:
    usage = _field(obj, "usage")
    return _count(_field(usage, "prompt_tokens")), _count(_field(usage, "completion_tokens"))


# The most tokens a call's counts may say (its columns' range): more is a server's mistake.
MAX_TOKEN_COUNT = 2**31 - 1


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT:
        return value
    return None


def _field(obj: object, name: str) -> Any:
    """Read ``name`` from a dict or an SDK model, None when absent; bodies are untrusted."""
    if isinstance(obj, dict):
        return obj.get(name)
    if obj is None or isinstance(obj, str | int | float | list):
        return None
    return getattr(obj, name, None)


def _retry_after(headers: httpx.Headers) -> float | None:
    """Return the wait the server asked for, in seconds, capped at MAX_RETRY_AFTER_S."""
    seconds: float | None = None
    try:
        if "retry-after-ms" in headers:
            seconds = float(headers["retry-after-ms"]) / 1000
        elif "retry-after" in headers:
            value = headers["retry-after"]
            try:
                seconds = float(value)
            except ValueError:
                when = email.utils.parsedate_to_datetime(value)
                seconds = when.timestamp() - time.time()
    except (ValueError, TypeError, OverflowError):
        return None
    if seconds is None or seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _status_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message")
        return _excerpt(message if isinstance(message, str) else json.dumps(body))
    if isinstance(body, str):
        return _excerpt(body)
    try:
        return _excerpt(exc.response.text)
    except httpx.HTTPError:
        return ""


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > _EXCERPT_CHARS:
        return text[:_EXCERPT_CHARS] + "…"
    return text


def _join(message: str, detail: str) -> str:
    return f"{message}: {detail}" if detail else message
