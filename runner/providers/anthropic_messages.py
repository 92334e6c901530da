"""Anthropic's Messages API (``POST /v1/messages``), through the official SDK.

The SDK builds the request and decodes the answer and its event stream (its ``MessageStream``
puts the events together into the message); ``http_calls.HTTPProvider`` gives the time budget,
the retries and the errors every HTTP provider shares. The SDK runs on httpx2, so its client
is the guard's httpx2 client (``guarded_httpx2_client``): the same SSRF guard, deadline cuts,
byte ceiling and connection pools as the OpenAI-compatible provider's.

What the Messages API does its own way, translated here:

- the system prompt is the body's ``system``, not a message;
- ``max_tokens`` is required: an actor that sets none gets DEFAULT_MAX_TOKENS;
- the common params ``temperature``, ``top_p`` and ``max_tokens`` have their names, ``stop``
  is ``stop_sequences``; every other param goes into the body as written (``top_k``,
  ``metadata``...), for the API to check;
- a tool loop's conversation (the OpenAI chat format) becomes ``tool_use`` blocks in the
  assistant's turn and ``tool_result`` blocks in the user's next one; a conversation with tool
  blocks must declare its tools, so a last turn offered none declares those it used, with
  ``tool_choice`` none;
- the input tokens are the server's ``input_tokens`` plus the prompt tokens it wrote to or read
  from its cache (``cache_creation_input_tokens``, ``cache_read_input_tokens``): all of them
  are the prompt's, as OpenAI's ``prompt_tokens`` count them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

import anthropic
import httpx2
from anthropic.lib.streaming import MessageStream

from workflows.guarded_http import call_deadline, guarded_httpx2_client

from .base import ChatRequest, ImagePart, TokenCallback, ToolCallRequest
from .http_calls import (
    TRANSPORT_ERRORS,
    Answer,
    Failure,
    HTTPProvider,
    count,
    excerpt,
    field,
    message_text,
    status_failure,
    transport_failure,
    within_deadline,
)
from .urls import connect_addresses

_T = TypeVar("_T")

DEFAULT_ANTHROPIC_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 4096
# The SDK's own OpenTelemetry spans and trace headers: the runner traces its calls itself
# (runner/tracing.py), and sends no trace context to model servers.
_NO_TELEMETRY: anthropic.OpenTelemetryOptions = {"traces": False, "propagation": False}


class AnthropicProvider(HTTPProvider):
    """Call Anthropic's Messages API, with retries inside one time budget."""

    name = "anthropic"

    def __init__(self, base_url: str | None, api_key: str | None, **options: Any) -> None:
        super().__init__(_root(base_url or DEFAULT_ANTHROPIC_URL), api_key, **options)

    def _attempt(
        self,
        request: ChatRequest,
        *,
        on_token: TokenCallback | None,
        deadline: float,
        emitted: list[int],
    ) -> Answer:
        remaining = self._time_left(deadline)
        timeout = httpx2.Timeout(
            remaining, connect=min(self.connect_timeout, remaining), read=remaining
        )
        # A call that offers tools is not streamed: its answer may be tool calls, not text.
        streaming = on_token is not None and not request.tools
        api_key = self._api_key.reveal() if self._api_key else ""
        client = anthropic.Anthropic(
            # Given, so that the SDK reads no ANTHROPIC_API_KEY, profile or token of the host.
            api_key=api_key,
            base_url=self.base_url,
            max_retries=0,
            timeout=timeout,
            http_client=guarded_httpx2_client(
                self._allowlist, max_body_bytes=self.max_body_bytes, connect_check=connect_addresses
            ),
            default_headers=_no_ambient_headers(api_key),
            open_telemetry=_NO_TELEMETRY,
        )
        body = _body(request)
        with call_deadline(deadline):
            if streaming:
                raw = self._sent(
                    lambda: client.messages.create(**body, stream=True, timeout=timeout)
                )
                with MessageStream(raw, output_format=anthropic.not_given) as stream:
                    return self._read_stream(stream, on_token, deadline, emitted)
            message = self._sent(lambda: client.messages.create(**body, timeout=timeout))
        answer = _message_answer(message)
        self._check_size(len(answer.text))
        if on_token is not None and answer.text:
            emitted[0] += len(answer.text)
            on_token(answer.text)
        return answer

    def _sent(self, send: Callable[[], _T]) -> _T:
        """Return what the SDK's ``send`` returns (the message, or its stream of events once the
        server accepted the request), every way it can fail turned into a Failure."""
        try:
            return send()
        except anthropic.APIStatusError as exc:
            raise status_failure(
                exc.status_code, exc.response.headers, _status_detail(exc.body)
            ) from exc
        except anthropic.APIConnectionError as exc:
            raise transport_failure(exc, self.connect_timeout) from exc
        except TRANSPORT_ERRORS as exc:
            # Reading an error answer's body, which the SDK does outside its own guard.
            raise transport_failure(exc, self.connect_timeout) from exc
        except (anthropic.APIResponseValidationError, ValueError) as exc:
            raise Failure("answered with a body that is not valid JSON", retryable=False) from exc
        except anthropic.AnthropicError as exc:
            raise Failure("failed", retryable=False, detail=str(exc)) from exc

    def _read_stream(
        self,
        stream: MessageStream[Any],
        on_token: TokenCallback | None,
        deadline: float,
        emitted: list[int],
    ) -> Answer:
        total = 0
        started = stopped = False
        for event in _events(stream, deadline, self.connect_timeout):
            if event.type == "message_start":
                started = True
            elif event.type == "text":
                total += len(event.text)
                self._check_size(total)
                if on_token is not None and event.text:
                    emitted[0] += len(event.text)
                    on_token(event.text)
            elif event.type == "message_stop":
                stopped = True
        if not started:
            raise Failure("answered with a stream that carried no message_start", retryable=False)
        if not stopped:
            raise Failure("ended its stream before message_stop", retryable=True)
        return _message_answer(stream.current_message_snapshot)


def _root(base_url: str) -> str:
    """Return the API's root: the SDK adds ``/v1/messages``, so a URL written with ``/v1``
    (as OpenAI's are) loses it."""
    return base_url.strip().rstrip("/").removesuffix("/v1")


def _no_ambient_headers(api_key: str) -> dict[str, str]:
    """Remove the headers the host's ANTHROPIC_CUSTOM_HEADERS adds to every client: they are
    for whoever runs the server, not for the server an actor names; an Authorization among
    them is the actor's own again. ``omit`` removes a default header; the SDK's annotation
    only admits text."""
    lines = os.environ.get("ANTHROPIC_CUSTOM_HEADERS", "").split("\n")
    names = {line.partition(":")[0].strip() for line in lines if ":" in line} - {""}
    headers = {
        name: f"Bearer {api_key}" if name.lower() == "authorization" else anthropic.omit
        for name in names
    }
    return cast("dict[str, str]", headers)


def _body(request: ChatRequest) -> dict[str, Any]:
    """Return the keyword arguments of ``messages.create`` for ``request``."""
    params = dict(request.params)
    max_tokens = params.pop("max_tokens", DEFAULT_MAX_TOKENS)
    if "stop" in params:
        stop = params.pop("stop")
        params["stop_sequences"] = [stop] if isinstance(stop, str) else stop
    system, messages = _conversation(request)
    body: dict[str, Any] = {"model": request.model, "max_tokens": max_tokens, "messages": messages}
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [_tool(tool) for tool in request.tools]
    else:
        used = sorted(_tools_used(messages))
        if used:
            body["tools"] = [{"name": name, "input_schema": {"type": "object"}} for name in used]
            params["tool_choice"] = {"type": "none"}
    # The rest as written, for the API to check: the SDK's arguments are typed, its body not.
    if params:
        body["extra_body"] = params
    return body


def _conversation(request: ChatRequest) -> tuple[str, list[dict[str, Any]]]:
    """Return the system prompt and the messages of ``request`` in the Messages API's form."""
    if request.messages is None:
        content = _user_content(request.prompt, request.images)
        return request.system or "", [{"role": "user", "content": content}]
    system = [request.system] if request.system else []
    messages: list[dict[str, Any]] = []
    images = request.images  # with the first user message: the prompt
    for message in request.messages:
        role = message.get("role")
        text = message_text(message.get("content"))
        if role == "system":
            system.append(text)
        elif role == "tool":
            result = {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id") or ""),
                "content": text,
            }
            # The results of one turn's calls go together, in the user's next message.
            last = messages[-1] if messages else None
            if last and last["role"] == "user" and isinstance(last["content"], list):
                last["content"].append(result)
            else:
                messages.append({"role": "user", "content": [result]})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            for call in message.get("tool_calls") or ():
                function = field(call, "function")
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": str(field(call, "id") or ""),
                        "name": str(field(function, "name") or ""),
                        "input": _arguments(field(function, "arguments")),
                    }
                )
            if blocks:
                messages.append({"role": "assistant", "content": blocks})
        else:
            messages.append({"role": "user", "content": _user_content(text, images)})
            images = ()
    return "\n\n".join(part for part in system if part), messages


def _user_content(text: str, images: tuple[ImagePart, ...]) -> str | list[dict[str, Any]]:
    """Return a user message's content: its text, or its text and base64 image blocks."""
    if not images:
        return text
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for image in images:
        source = {"type": "base64", "media_type": image.media_type, "data": image.base64()}
        blocks.append({"type": "image", "source": source})
    return blocks


def _arguments(value: object) -> dict[str, Any]:
    """Return a tool call's arguments as the object ``tool_use`` holds; text that is not a JSON
    object (the tool loop told the model so) is sent as no arguments."""
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value) if isinstance(value, str) and value.strip() else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    """Return an offered function (OpenAI's form) as a Messages API tool."""
    function = tool.get("function") or {}
    spec: dict[str, Any] = {
        "name": function.get("name", ""),
        "input_schema": function.get("parameters") or {"type": "object"},
    }
    if function.get("description"):
        spec["description"] = function["description"]
    return spec


def _tools_used(messages: list[dict[str, Any]]) -> set[str]:
    return {
        block["name"]
        for message in messages
        if message["role"] == "assistant"
        for block in message["content"]
        if block["type"] == "tool_use"
    }


def _events(stream: MessageStream[Any], deadline: float, connect_timeout: float) -> Iterator[Any]:
    """Yield the stream's events, turning every way it can fail into a Failure."""
    return within_deadline(stream, deadline, connect_timeout, _stream_failure)


def _stream_failure(exc: Exception) -> Failure | None:
    if isinstance(exc, anthropic.APIStatusError):
        # An `error` event (overloaded_error, api_error) in a stream that began well.
        return Failure(
            "reported an error mid-stream", retryable=True, detail=_status_detail(exc.body)
        )
    if isinstance(exc, ValueError):
        return Failure(
            "sent a stream event that is not valid JSON", retryable=False, detail=str(exc)
        )
    if isinstance(exc, LookupError | TypeError | AttributeError | RuntimeError):
        # Events out of the API's order (a delta to a block that never started).
        return Failure(
            "sent a stream out of the Messages API's order",
            retryable=False,
            detail=excerpt(str(exc)),
        )
    return None


def _message_answer(message: object) -> Answer:
    """Return a message's text, usage, model and tool calls, or raise a Failure saying what is
    off (the SDK builds its models from the body without checking it)."""
    content = field(message, "content")
    if not isinstance(content, list):
        raise Failure("answered without a message's content", retryable=False)
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    for i, block in enumerate(content):
        kind = field(block, "type")
        if kind == "text":
            text = field(block, "text")
            if not isinstance(text, str):
                raise Failure(f"answered with content[{i}] whose text is not text", retryable=False)
            texts.append(text)
        elif kind == "tool_use":
            name = field(block, "name")
            if not isinstance(name, str) or not name:
                raise Failure(f"answered with content[{i}] without a name", retryable=False)
            call_id = field(block, "id")
            arguments = field(block, "input")
            calls.append(
                ToolCallRequest(
                    id=call_id if isinstance(call_id, str) and call_id else f"call_{i}",
                    name=name,
                    arguments=json.dumps(arguments if arguments is not None else {}),
                )
            )
        # Thinking and the server's own tools' blocks are not the answer.
    if field(message, "stop_reason") == "refusal":
        # The API's safety classifiers stopped the answer: what came, if any, is not one.
        detail = f"after {excerpt(''.join(texts))!r}" if texts else ""
        raise Failure("refused to answer", retryable=False, detail=detail)
    usage = field(message, "usage")
    tokens_in = count(field(usage, "input_tokens"))
    if tokens_in is not None:
        for cached in ("cache_creation_input_tokens", "cache_read_input_tokens"):
            tokens_in += count(field(usage, cached)) or 0
    model = field(message, "model")
    return Answer(
        "".join(texts),
        tokens_in,
        count(field(usage, "output_tokens")),
        model if isinstance(model, str) and model else None,
        tuple(calls),
    )


def _status_detail(body: object) -> str:
    """Return the message of an error body (``{"type": "error", "error": {"type", "message"}}``)."""
    error = field(body, "error")
    message = field(error, "message")
    if isinstance(message, str):
        kind = field(error, "type")
        return excerpt(f"{kind}: {message}" if isinstance(kind, str) else message)
    if isinstance(body, str):
        return excerpt(body)
    return excerpt(json.dumps(body)) if body is not None else ""
