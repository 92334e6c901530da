"""A provider for any server that speaks the OpenAI chat completions API (OpenAI, vLLM, Ollama...).

The openai SDK does the HTTP and the SSE decoding; ``http_calls.HTTPProvider`` the time budget,
the retries and the errors every HTTP provider shares; this module the OpenAI wire format:
the chat completions body, its answers and its stream chunks.

The connection guard, the watchdog and the byte ceiling are the transport of
``workflows/guarded_http.py``, given this package's address check (``urls.py``).

The response bodies are parsed here rather than by the SDK's lenient model construction,
so a malformed body becomes a clear ProviderError instead of an AttributeError later.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

import httpx
import openai

from workflows.guarded_http import call_deadline, guarded_client

from .base import ChatRequest, ImagePart, OutputSchema, TokenCallback, ToolCallRequest
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

_NO_AMBIENT_HEADERS = cast(
    "dict[str, str]", {"OpenAI-Organization": openai.Omit(), "OpenAI-Project": openai.Omit()}
)


class OpenAICompatibleProvider(HTTPProvider):
    """Call an OpenAI-compatible chat completions API, with retries inside one time budget."""

    name = "openai"

    # -- one attempt -------------------------------------------------------------------

    def _attempt(
        self,
        request: ChatRequest,
        *,
        on_token: TokenCallback | None,
        deadline: float,
        emitted: list[int],
    ) -> Answer:
        remaining = self._time_left(deadline)
        timeout = httpx.Timeout(
            remaining, connect=min(self.connect_timeout, remaining), read=remaining
        )
        # A call that offers tools is not streamed: its answer may be tool calls, not text.
        streaming = on_token is not None and not request.tools
        messages: list[dict[str, Any]] = []
        if request.messages is not None:
            messages = with_images(request.messages, request.images)
        else:
            if request.system:
                messages.append({"role": "system", "content": request.system})
            messages.append(
                {"role": "user", "content": user_content(request.prompt, request.images)}
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
            if request.output_schema is not None:
                # After the actor's params: the step's schema wins over a params' format.
                body["response_format"] = response_format(request.output_schema)
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
                raise status_failure(
                    exc.status_code, exc.response.headers, _status_detail(exc)
                ) from exc
            except openai.APIConnectionError as exc:
                raise transport_failure(exc, self.connect_timeout) from exc
            except TRANSPORT_ERRORS as exc:
                # Reading an error answer's body, which the SDK does outside its own guard.
                raise transport_failure(exc, self.connect_timeout) from exc
            except openai.OpenAIError as exc:
                raise Failure("failed", retryable=False, detail=str(exc)) from exc

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
                    return self._read_stream(stream, on_token, deadline, emitted)
                # Some compatible servers ignore "stream": read the plain answer, then hand it
                # over in one piece.
                answer = self._read_body(response, content_type)
                if on_token is not None and answer.text:
                    emitted[0] += len(answer.text)
                    on_token(answer.text)
                return answer
            finally:
                response.close()

    def _read_body(self, response: httpx.Response, content_type: str) -> Answer:
        try:
            body = response.read()
        except TRANSPORT_ERRORS as exc:
            raise transport_failure(exc, self.connect_timeout) from exc
        try:
            data = json.loads(body)
        except ValueError:
            raise Failure(
                "answered with a body that is not valid JSON",
                retryable=False,
                detail=f"Content-Type {content_type or 'missing'}: "
                + excerpt(body.decode("utf-8", "replace")),
            ) from None
        text, model, calls = _completion_text(data)
        tokens_in, tokens_out = _usage(data)
        self._check_size(len(text))
        return Answer(text, tokens_in, tokens_out, model, calls)

    def _read_stream(
        self,
        stream: openai.Stream[Any],
        on_token: TokenCallback | None,
        deadline: float,
        emitted: list[int],
    ) -> Answer:
        parts: list[str] = []
        total = 0
        tokens_in = tokens_out = None
        model: str | None = None
        saw_choices = finished = False
        refusal: list[str] = []
        try:
            for chunk in _chunks(stream, deadline, self.connect_timeout):
                chunk_model = field(chunk, "model")
                if isinstance(chunk_model, str) and chunk_model:
                    model = chunk_model
                usage_in, usage_out = _usage(chunk)
                tokens_in = usage_in if usage_in is not None else tokens_in
                tokens_out = usage_out if usage_out is not None else tokens_out
                choices = field(chunk, "choices")
                if not isinstance(choices, list):
                    continue
                saw_choices = True
                finished = finished or _finished(choices)
                refusal.append(_chunk_delta(choices, "refusal"))
                delta = _chunk_delta(choices)
                if not delta:
                    continue
                total += len(delta)
                self._check_size(total)
                parts.append(delta)
                if on_token is not None:
                    emitted[0] += len(delta)
                    on_token(delta)
        finally:
            stream.close()
        if not saw_choices:
            raise Failure("answered with a stream that carried no choices", retryable=False)
        refused = "".join(refusal)
        if refused and not parts:
            raise Failure("refused to answer", retryable=False, detail=excerpt(refused))
        if not finished:
            # The connection closed cleanly mid-answer: what came is not the whole answer.
            raise Failure(
                "stopped mid-answer: its stream ended without a finish_reason", retryable=True
            )
        return Answer("".join(parts), tokens_in, tokens_out, model)


def user_content(text: str, images: tuple[ImagePart, ...]) -> str | list[dict[str, Any]]:
    """Return a user message's content: its text, or its text and images as content parts
    (data URLs, which Ollama's OpenAI-compatible API reads as well)."""
    if not images:
        return text
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": image.data_url()}} for image in images]
    return parts


def with_images(
    messages: tuple[dict[str, Any], ...], images: tuple[ImagePart, ...]
) -> list[dict[str, Any]]:
    """Return a conversation with the images in its first user message (the prompt)."""
    result = list(messages)
    for i, message in enumerate(result):
        if images and message.get("role") == "user":
            text = message_text(message.get("content"))
            result[i] = {**message, "content": user_content(text, images)}
            break
    return result


def response_format(output: OutputSchema) -> dict[str, Any]:
    """Return the chat completions ``response_format`` that asks for the schema."""
    return {
        "type": "json_schema",
        "json_schema": {"name": output.name, "schema": output.schema, "strict": output.strict},
    }


def _chunks(stream: openai.Stream[Any], deadline: float, connect_timeout: float) -> Iterator[Any]:
    """Yield the stream's chunks, turning every way it can fail into a Failure."""
    return within_deadline(stream, deadline, connect_timeout, _stream_failure)


def _stream_failure(exc: Exception) -> Failure | None:
    if isinstance(exc, openai.APIError):
        return Failure("reported an error mid-stream", retryable=True, detail=excerpt(exc.message))
    if isinstance(exc, ValueError):
        return Failure(
            "sent a stream event that is not valid JSON", retryable=False, detail=str(exc)
        )
    return None


def _completion_text(data: object) -> tuple[str, str | None, tuple[ToolCallRequest, ...]]:
    """Return a completion body's text, model and tool calls, or raise a Failure saying
    what is off."""
    if not isinstance(data, dict):
        raise Failure("answered with JSON that is not an object", retryable=False)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        error = data.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else error
            raise Failure("answered with an error", retryable=False, detail=excerpt(str(message)))
        raise Failure("answered without choices", retryable=False)
    message = field(choices[0], "message")
    content = field(message, "content")
    if not isinstance(message, dict) or not (content is None or isinstance(content, str)):
        raise Failure("answered without a text message in choices[0]", retryable=False)
    model = data.get("model")
    calls = _tool_calls(message.get("tool_calls"))
    refusal = message.get("refusal")
    if not content and not calls and isinstance(refusal, str) and refusal:
        raise Failure("refused to answer", retryable=False, detail=excerpt(refusal))
    return content or "", model if isinstance(model, str) else None, calls


def _tool_calls(value: object) -> tuple[ToolCallRequest, ...]:
    """Read a message's `tool_calls` (OpenAI format); raise a Failure for a malformed one."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise Failure("answered with tool_calls that are not a list", retryable=False)
    calls: list[ToolCallRequest] = []
    for i, call in enumerate(value):
        function = field(call, "function")
        name = field(function, "name")
        arguments = field(function, "arguments")
        if not isinstance(name, str) or not name:
            raise Failure(f"answered with tool_calls[{i}] without a name", retryable=False)
        if isinstance(arguments, dict):  # some servers (Ollama) send an object
            arguments = json.dumps(arguments)
        if arguments is None:
            arguments = "{}"
        if not isinstance(arguments, str):
            raise Failure(
                f"answered with tool_calls[{i}] whose arguments are not text", retryable=False
            )
        call_id = field(call, "id")
        extra = field(call, "extra_content")  # Gemini's OpenAI-compatible API: its signature
        calls.append(
            ToolCallRequest(
                id=call_id if isinstance(call_id, str) and call_id else f"call_{i}",
                name=name,
                arguments=arguments,
                extra_content=extra if isinstance(extra, dict) and extra else None,
            )
        )
    return tuple(calls)


def _finished(choices: list[Any]) -> bool:
    """Tell whether a chunk ends the answer (its first choice has a finish_reason)."""
    return any(
        field(choice, "index") in (None, 0) and field(choice, "finish_reason") for choice in choices
    )


def _chunk_delta(choices: list[Any], part: str = "content") -> str:
    """Return the text a chunk adds to the first choice's `part` (its content, or refusal)."""
    text = ""
    for choice in choices:
        index = field(choice, "index")
        if index not in (None, 0):
            continue
        content = field(field(choice, "delta"), part)
        if content is None:
            continue
        if not isinstance(content, str):
            raise Failure(f"sent a stream chunk whose {part} is not text", retryable=False)
        text += content
    return text


def _usage(obj: object) -> tuple[int | None, int | None]:
    usage = field(obj, "usage")
    return count(field(usage, "prompt_tokens")), count(field(usage, "completion_tokens"))


def _status_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message")
        return excerpt(message if isinstance(message, str) else json.dumps(body))
    if isinstance(body, str):
        return excerpt(body)
    try:
        return excerpt(exc.response.text)
    except httpx.HTTPError:
        return ""
