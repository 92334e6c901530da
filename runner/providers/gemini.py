"""Google's Gemini API (``models/{model}:generateContent`` and ``:streamGenerateContent``),
through the official SDK (``google-genai``).

The SDK builds the request from its typed config and decodes the answers and the stream's
chunks; ``http_calls.HTTPProvider`` gives the time budget, the retries and the errors every
HTTP provider shares. Its HTTP client is the guard's (``guarded_client``): the same SSRF
guard, deadline cuts, byte ceiling and connection pools as the OpenAI-compatible provider's.

What the Gemini API does its own way, translated here:

- the system prompt is the config's ``system_instruction``, not a message;
- an actor's params are GenerateContentConfig's fields (``temperature``, ``top_k``,
  ``thinking_config``...; the SDK refuses an unknown one), with the common ``max_tokens`` as
  ``max_output_tokens`` and ``stop`` as ``stop_sequences``;
- a tool loop's conversation (the OpenAI chat format) becomes the model's ``function_call``
  parts and the user's ``function_response`` parts; each call keeps its thought signature
  (``ToolCallRequest.extra_content``) to send back, which Gemini 3 requires; a last turn
  offered no tools declares those the conversation used, with function calling off;
- a 429's wait is in its body (``RetryInfo.retryDelay``) rather than a header;
- the input tokens are ``promptTokenCount`` (with the tool-use prompt's), the output tokens
  ``candidatesTokenCount`` plus ``thoughtsTokenCount``, which Google bills as output.

Making a client costs the SDK tens of milliseconds (its TLS contexts), so one is kept per base
URL, key and guard, and a call passes its own timeout.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pydantic
from google import genai
from google.genai import errors, types

from workflows.guarded_http import call_deadline, guarded_client

from .base import ChatRequest, ImagePart, TokenCallback, ToolCallRequest
from .http_calls import (
    TRANSPORT_ERRORS,
    Answer,
    Failure,
    HTTPProvider,
    capped_wait,
    count,
    excerpt,
    field,
    message_text,
    status_failure,
    transport_failure,
    within_deadline,
)
from .urls import connect_addresses

DEFAULT_GEMINI_URL = "https://generativelanguage.googleapis.com"
API_VERSION = "v1beta"
# The common params under the names GenerateContentConfig gives them.
_PARAM_NAMES = {"max_tokens": "max_output_tokens", "stop": "stop_sequences"}
# The finish reasons of a candidate that answered; any other (SAFETY, RECITATION...) without
# text is a refusal, said as such.
_ANSWERED = frozenset({"STOP", "MAX_TOKENS", "FINISH_REASON_UNSPECIFIED"})
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?)s\s*$")


class GeminiProvider(HTTPProvider):
    """Call the Gemini API, with retries inside one time budget."""

    name = "gemini"

    def __init__(self, base_url: str | None, api_key: str | None, **options: Any) -> None:
        super().__init__(base_url or DEFAULT_GEMINI_URL, api_key, **options)

    def _attempt(
        self,
        request: ChatRequest,
        *,
        on_token: TokenCallback | None,
        deadline: float,
        emitted: list[int],
    ) -> Answer:
        remaining = self._time_left(deadline)
        # A call that offers tools is not streamed: its answer may be tool calls, not text.
        streaming = on_token is not None and not request.tools
        client = self._client()
        contents, config = _request_parts(request, timeout_ms=max(1, int(remaining * 1000)))
        with call_deadline(deadline):
            if streaming:
                stream = self._sent(
                    lambda: client.models.generate_content_stream(
                        model=request.model, contents=contents, config=config
                    )
                )
                try:
                    return self._read_stream(stream, on_token, deadline, emitted)
                finally:
                    stream.close()
            response = self._sent(
                lambda: client.models.generate_content(
                    model=request.model, contents=contents, config=config
                )
            )
        answer = _answer(response)
        self._check_size(len(answer.text))
        if on_token is not None and answer.text:
            emitted[0] += len(answer.text)
            on_token(answer.text)
        return answer

    def _client(self) -> genai.Client:
        http_client = guarded_client(
            self._allowlist, max_body_bytes=self.max_body_bytes, connect_check=connect_addresses
        )
        key = self._api_key.reveal() if self._api_key else ""
        return _shared_client(self.base_url, key, http_client)

    def _sent(self, send: Callable[[], Any]) -> Any:
        """Return what the SDK's ``send`` returns, every way it can fail turned into a
        Failure. A stream's generator sends its request on its first chunk, so it is started
        here, its first chunk kept for the reader."""
        try:
            result = send()
            if isinstance(result, Iterator):
                return _Started(result)
            return result
        except errors.APIError as exc:
            raise _status_failure(exc) from exc
        except TRANSPORT_ERRORS as exc:
            raise transport_failure(exc, self.connect_timeout) from exc
        except pydantic.ValidationError as exc:
            raise _config_failure(exc) from exc
        except ValueError as exc:
            raise Failure(
                "answered with a body that is not what the API promises",
                retryable=False,
                detail=excerpt(str(exc)),
            ) from exc

    def _read_stream(
        self,
        stream: _Started,
        on_token: TokenCallback | None,
        deadline: float,
        emitted: list[int],
    ) -> Answer:
        parts: list[str] = []
        total = 0
        usage: object = None
        model: str | None = None
        finished = False
        for chunk in _chunks(stream, deadline, self.connect_timeout):
            usage = field(chunk, "usage_metadata") or usage
            chunk_model = field(chunk, "model_version")
            model = chunk_model if isinstance(chunk_model, str) and chunk_model else model
            candidate = _first_candidate(chunk, streamed=True)
            if candidate is None:
                continue
            text, _ = _parts(candidate)
            reason = _finish_reason(candidate)
            if reason is not None:
                finished = True
                if reason not in _ANSWERED and not parts and not text:
                    raise _refusal(reason, candidate)
            if not text:
                continue
            total += len(text)
            self._check_size(total)
            parts.append(text)
            if on_token is not None:
                emitted[0] += len(text)
                on_token(text)
        if not finished:
            raise Failure("ended its stream before a finish reason", retryable=True)
        tokens_in, tokens_out = _usage(usage)
        return Answer("".join(parts), tokens_in, tokens_out, model)


class _Started:
    """A stream whose first chunk was read, to send its request (the SDK sends it then)."""

    def __init__(self, chunks: Iterator[Any]) -> None:
        self._chunks = chunks
        self._first = list(itertools.islice(chunks, 1))

    def __iter__(self) -> Iterator[Any]:
        yield from self._first
        self._first.clear()
        yield from self._chunks

    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()


# The SDK's clients of this process, the least recently used first (a key rotated, a URL
# changed: the old ones go once past MAX_CLIENTS).
MAX_CLIENTS = 64
_clients: OrderedDict[tuple[str, str, httpx.Client], genai.Client] = OrderedDict()
_clients_lock = threading.Lock()


def _forget_clients_in_child() -> None:
    """A forked child makes its own clients, on its own guarded HTTP clients."""
    global _clients_lock
    _clients.clear()
    _clients_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_clients_in_child)


def _shared_client(base_url: str, api_key: str, http_client: httpx.Client) -> genai.Client:
    """Return the process's SDK client for this server, key and guarded HTTP client."""
    key = (base_url, api_key, http_client)
    with _clients_lock:
        client = _clients.pop(key, None)
        if client is None:
            client = genai.Client(
                # Given, so that the SDK reads no GOOGLE_API_KEY, GEMINI_API_KEY, project or
                # Vertex AI setting of the host.
                api_key=api_key,
                vertexai=False,
                http_options=types.HttpOptions(
                    base_url=base_url, api_version=API_VERSION, httpx_client=http_client
                ),
            )
        _clients[key] = client  # the most recently used, last
        while len(_clients) > MAX_CLIENTS:
            _clients.popitem(last=False)
        return client


def _request_parts(
    request: ChatRequest, *, timeout_ms: int
) -> tuple[list[types.Content], types.GenerateContentConfig]:
    """Return the contents and the config of ``generate_content`` for ``request``."""
    system, contents, used = _conversation(request)
    settings: dict[str, Any] = {_PARAM_NAMES.get(k, k): v for k, v in request.params.items()}
    if isinstance(settings.get("stop_sequences"), str):
        settings["stop_sequences"] = [settings["stop_sequences"]]
    if system:
        settings["system_instruction"] = system
    offered = [_declaration(tool) for tool in request.tools or ()]
    if not offered and used:
        offered = [types.FunctionDeclaration(name=name) for name in sorted(used)]
        settings["tool_config"] = types.ToolConfig(
            function_calling_config=types.FunctionCallingConfig(
                mode=types.FunctionCallingConfigMode.NONE
            )
        )
    if offered:
        settings["tools"] = [types.Tool(function_declarations=offered)]
    settings["automatic_function_calling"] = types.AutomaticFunctionCallingConfig(disable=True)
    settings["http_options"] = types.HttpOptions(timeout=timeout_ms)
    try:
        config = types.GenerateContentConfig(**settings)
    except pydantic.ValidationError as exc:
        raise _config_failure(exc) from None
    return contents, config


def _conversation(request: ChatRequest) -> tuple[str, list[types.Content], set[str]]:
    """Return the system instruction, the contents of ``request`` in Gemini's form, and the
    names of the functions its conversation called."""
    if request.messages is None:
        prompt = types.Content(role="user", parts=_user_parts(request.prompt, request.images))
        return request.system or "", [prompt], set()
    system = [request.system] if request.system else []
    contents: list[types.Content] = []
    images = request.images  # with the first user message: the prompt
    names: dict[str, str] = {}  # tool call id -> function name, for the responses
    for message in request.messages:
        role = message.get("role")
        text = message_text(message.get("content"))
        if role == "system":
            system.append(text)
        elif role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            part = types.Part(
                function_response=types.FunctionResponse(
                    id=call_id or None,
                    name=names.get(call_id, call_id),
                    response={"output": text},
                )
            )
            # The responses to one turn's calls go together, in the user's next content.
            last = contents[-1] if contents else None
            if last and last.role == "user" and last.parts and last.parts[0].function_response:
                last.parts.append(part)
            else:
                contents.append(types.Content(role="user", parts=[part]))
        elif role == "assistant":
            parts = [types.Part(text=text)] if text else []
            for call in message.get("tool_calls") or ():
                function = field(call, "function")
                call_id = str(field(call, "id") or "")
                name = str(field(function, "name") or "")
                names[call_id] = name
                parts.append(
                    types.Part(
                        function_call=types.FunctionCall(
                            id=call_id or None,
                            name=name,
                            args=_arguments(field(function, "arguments")),
                        ),
                        thought_signature=_signature(field(call, "extra_content")),
                    )
                )
            if parts:
                contents.append(types.Content(role="model", parts=parts))
        else:
            contents.append(types.Content(role="user", parts=_user_parts(text, images)))
            images = ()
    return "\n\n".join(part for part in system if part), contents, set(names.values()) - {""}


def _user_parts(text: str, images: tuple[ImagePart, ...]) -> list[types.Part]:
    """Return a user content's parts: its text, then each image as inline data."""
    parts = [types.Part(text=text)]
    parts += [
        types.Part(inline_data=types.Blob(mime_type=image.media_type, data=image.data))
        for image in images
    ]
    return parts


def _arguments(value: object) -> dict[str, Any]:
    """Return a tool call's arguments as the object ``function_call.args`` holds; text that is
    not a JSON object (the tool loop told the model so) is sent as no arguments."""
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value) if isinstance(value, str) and value.strip() else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _signature(extra: object) -> bytes | None:
    """Return the thought signature a call carries (base64 text, as the API writes it)."""
    text = field(field(extra, "google"), "thought_signature")
    if not isinstance(text, str) or not text:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _declaration(tool: dict[str, Any]) -> types.FunctionDeclaration:
    """Return an offered function (OpenAI's form) as a Gemini function declaration; its
    parameters stay the JSON Schema they are."""
    function = tool.get("function") or {}
    return types.FunctionDeclaration(
        name=function.get("name", ""),
        description=function.get("description") or None,
        parameters_json_schema=function.get("parameters") or {"type": "object"},
    )


def _chunks(stream: _Started, deadline: float, connect_timeout: float) -> Iterator[Any]:
    """Yield the stream's chunks, turning every way it can fail into a Failure."""
    return within_deadline(stream, deadline, connect_timeout, _stream_failure)


def _stream_failure(exc: Exception) -> Failure | None:
    if isinstance(exc, errors.APIError):
        # An error chunk in a stream that began well.
        return Failure("reported an error mid-stream", retryable=True, detail=_status_detail(exc))
    if isinstance(exc, ValueError):
        return Failure(
            "sent a stream chunk that is not what the API promises",
            retryable=False,
            detail=excerpt(str(exc)),
        )
    return None


def _answer(response: object) -> Answer:
    """Return a response's text, usage, model and function calls, or raise a Failure saying
    what is off."""
    candidate = _first_candidate(response, streamed=False)
    assert candidate is not None
    text, calls = _parts(candidate)
    reason = _finish_reason(candidate)
    if reason is not None and reason not in _ANSWERED and not text and not calls:
        raise _refusal(reason, candidate)
    tokens_in, tokens_out = _usage(field(response, "usage_metadata"))
    model = field(response, "model_version")
    return Answer(
        text, tokens_in, tokens_out, model if isinstance(model, str) and model else None, calls
    )


def _first_candidate(response: object, *, streamed: bool) -> object | None:
    """Return the response's first candidate; a response without one is a prompt refused, or
    (in a stream) a chunk carrying only usage."""
    candidates = field(response, "candidates")
    if isinstance(candidates, list) and candidates:
        first: object = candidates[0]
        return first
    blocked = field(field(response, "prompt_feedback"), "block_reason")
    if blocked:
        raise Failure("refused the prompt", retryable=False, detail=_enum_name(blocked))
    if streamed:
        return None
    raise Failure("answered without candidates", retryable=False)


def _parts(candidate: object) -> tuple[str, tuple[ToolCallRequest, ...]]:
    """Return a candidate's text (its thoughts left out) and its function calls."""
    parts = field(field(candidate, "content"), "parts") or []
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    for i, part in enumerate(parts):
        call = field(part, "function_call")
        if call is not None:
            name = field(call, "name")
            if not isinstance(name, str) or not name:
                raise Failure(f"answered with parts[{i}] calling no function", retryable=False)
            call_id = field(call, "id")
            signature = field(part, "thought_signature")
            calls.append(
                ToolCallRequest(
                    id=call_id if isinstance(call_id, str) and call_id else f"call_{i}",
                    name=name,
                    arguments=json.dumps(field(call, "args") or {}),
                    extra_content=(
                        {"google": {"thought_signature": base64.b64encode(signature).decode()}}
                        if isinstance(signature, bytes) and signature
                        else None
                    ),
                )
            )
            continue
        text = field(part, "text")
        if isinstance(text, str) and not field(part, "thought"):
            texts.append(text)
    return "".join(texts), tuple(calls)


def _finish_reason(candidate: object) -> str | None:
    reason = field(candidate, "finish_reason")
    return _enum_name(reason) if reason is not None else None


def _enum_name(value: object) -> str:
    name = getattr(value, "value", value)
    return str(name)


def _refusal(reason: str, candidate: object) -> Failure:
    """Return the Failure of a candidate that stopped without an answer (SAFETY...)."""
    message = field(candidate, "finish_message")
    detail = f"{reason}: {message}" if isinstance(message, str) and message else reason
    return Failure("stopped without an answer", retryable=False, detail=excerpt(detail))


def _usage(usage: object) -> tuple[int | None, int | None]:
    tokens_in = count(field(usage, "prompt_token_count"))
    if tokens_in is not None:
        tokens_in += count(field(usage, "tool_use_prompt_token_count")) or 0
    tokens_out = count(field(usage, "candidates_token_count"))
    thoughts = count(field(usage, "thoughts_token_count"))
    if thoughts is not None:
        tokens_out = (tokens_out or 0) + thoughts
    return tokens_in, tokens_out


def _status_failure(exc: errors.APIError) -> Failure:
    response = exc.response
    headers = response.headers if isinstance(response, httpx.Response) else {}
    return status_failure(
        exc.code, headers, _status_detail(exc), retry_after=_retry_delay(exc.details)
    )


def _status_detail(exc: errors.APIError) -> str:
    """Return an error's message (``{"error": {"code", "message", "status"}}``)."""
    message = exc.message if isinstance(exc.message, str) else ""
    status = exc.status if isinstance(exc.status, str) else ""
    return excerpt(f"{status}: {message}" if status and message else message or status)


def _retry_delay(details: object) -> float | None:
    """Return the wait a 429's body asks for (``RetryInfo.retryDelay``, e.g. ``"22s"``)."""
    error = field(details, "error")
    for detail in field(error, "details") or ():
        if field(detail, "@type") == _RETRY_INFO:
            match = _DURATION.match(str(field(detail, "retryDelay") or ""))
            if match:
                return capped_wait(float(match.group(1)))
    return None


def _config_failure(exc: pydantic.ValidationError) -> Failure:
    """Return the Failure of params the SDK's config refuses (never retried)."""
    problems = [
        f"params.{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
        for error in exc.errors()
    ]
    return Failure("; ".join(problems[:3]) or "params refused", retryable=False, kind="config")
