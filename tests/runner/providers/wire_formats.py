"""The wire formats the stub server speaks: OpenAI's chat completions, Anthropic's Messages API
and Google's Gemini API, each answering a scripted behaviour as its real server would.

Each format renders a behaviour (``stub_server.Behaviour``) as a JSON answer, as the pieces
of its event stream, and as its error body. A stream's pieces are bytes, or marks where the
stub pauses: ``STALL`` (silence for ``stall_s``), ``HOLD`` (until the test sets ``hold``),
``CUT`` (the connection is dropped mid-body, as a server that dies does).

The shapes follow the vendors' references and the SDKs' own types (``anthropic.types.Message``
and ``RawMessageStreamEvent``; ``google.genai.types.GenerateContentResponse``).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .stub_server import Behaviour


class Mark:
    """A place in a streamed body where the stub does something other than write."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


STALL, HOLD, CUT = Mark("STALL"), Mark("HOLD"), Mark("CUT")
Piece = bytes | Mark

CHAT_PATH = "/v1/chat/completions"
MESSAGES_PATH = "/v1/messages"
_GEMINI_PATH = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):(?P<method>\w+)$")
GEMINI_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


def words(text: str) -> list[str]:
    """Return ``text`` cut into words, each but the last with its space."""
    parts = text.split(" ")
    return [w + " " for w in parts[:-1]] + [parts[-1]] if text else []


def _pieces(behaviour: Behaviour) -> list[str]:
    return list(behaviour.chunks) if behaviour.chunks is not None else words(behaviour.text)


def _texts(behaviour: Behaviour, event: Any) -> Iterator[Piece]:
    """Yield each text chunk's event, with HOLD before the last and CUT where asked."""
    pieces = _pieces(behaviour)
    for index, piece in enumerate(pieces):
        if behaviour.cut_after is not None and index == behaviour.cut_after:
            yield CUT
            return
        if index and index == len(pieces) - 1:
            yield HOLD
        yield event(index, piece)
    if behaviour.cut_after is not None:
        yield CUT


class OpenAIWire:
    """``POST /v1/chat/completions``: a chat completion, or its ``data:`` chunks."""

    name = "openai"

    def matches(self, path: str) -> bool:
        return path == CHAT_PATH

    def streaming(self, path: str, query: str, payload: Any) -> bool:
        return bool(isinstance(payload, dict) and payload.get("stream"))

    def model(self, path: str, payload: Any) -> str | None:
        return (payload or {}).get("model") if isinstance(payload, dict) else None

    def answer(self, behaviour: Behaviour, model: str) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": behaviour.text},
                    "finish_reason": "stop",
                }
            ],
        }
        if behaviour.tool_calls:
            data["choices"][0]["message"]["tool_calls"] = [
                {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                for i, (n, a) in enumerate(behaviour.tool_calls)
            ]
            data["choices"][0]["message"]["content"] = None
            data["choices"][0]["finish_reason"] = "tool_calls"
        if behaviour.usage is not None:
            data["usage"] = openai_usage(behaviour.usage)
        return data

    def stream(self, behaviour: Behaviour, model: str, payload: Any) -> Iterator[Piece]:
        def event(data: dict[str, Any]) -> bytes:
            return f"data: {json.dumps(data)}\n\n".encode()

        base = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 0}
        base["model"] = model
        role = {"index": 0, "delta": {"role": "assistant", "content": ""}}
        # The role rides with the first text chunk so interval_s paces text chunks only.
        yield from _texts(
            behaviour,
            lambda index, piece: (event({**base, "choices": [role]}) if index == 0 else b"")
            + event({**base, "choices": [{"index": 0, "delta": {"content": piece}}]}),
        )
        if behaviour.cut_after is not None:
            return
        if not _pieces(behaviour):
            yield event({**base, "choices": [role]})
        yield STALL
        yield event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        include_usage = ((payload or {}).get("stream_options") or {}).get("include_usage")
        if include_usage and behaviour.usage is not None:
            yield event({**base, "choices": [], "usage": openai_usage(behaviour.usage)})
        yield b"data: [DONE]\n\n"

    def error(self, behaviour: Behaviour) -> dict[str, Any]:
        return {"error": {"message": behaviour.text, "type": "stub_error", "code": None}}


def openai_usage(usage: tuple[int, int]) -> dict[str, int]:
    return {
        "prompt_tokens": usage[0],
        "completion_tokens": usage[1],
        "total_tokens": usage[0] + usage[1],
    }


# Anthropic's error types by status (its "Errors" reference).
_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


class AnthropicWire:
    """``POST /v1/messages``: a message, or its named SSE events (``event:`` and ``data:``)."""

    name = "anthropic"

    def matches(self, path: str) -> bool:
        return path == MESSAGES_PATH

    def streaming(self, path: str, query: str, payload: Any) -> bool:
        return bool(isinstance(payload, dict) and payload.get("stream"))

    def model(self, path: str, payload: Any) -> str | None:
        return (payload or {}).get("model") if isinstance(payload, dict) else None

    def _message(self, behaviour: Behaviour, model: str) -> dict[str, Any]:
        tokens_in, tokens_out = behaviour.usage or (0, 0)
        return {
            "id": "msg_stub",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": tokens_in,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": tokens_out,
                "service_tier": "standard",
            },
        }

    def answer(self, behaviour: Behaviour, model: str) -> dict[str, Any]:
        message = self._message(behaviour, model)
        if behaviour.text:
            message["content"].append({"type": "text", "text": behaviour.text})
        for i, (name, arguments) in enumerate(behaviour.tool_calls):
            message["content"].append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{i}",
                    "name": name,
                    "input": json.loads(arguments),
                }
            )
        message["stop_reason"] = "tool_use" if behaviour.tool_calls else "end_turn"
        if behaviour.usage is None:
            del message["usage"]
        return message

    def stream(self, behaviour: Behaviour, model: str, payload: Any) -> Iterator[Piece]:
        def event(kind: str, data: dict[str, Any]) -> bytes:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

        start = self._message(behaviour, model)
        if behaviour.usage is not None:
            start["usage"]["output_tokens"] = 1  # the count so far, as the API sends it
        block = {"index": 0, "content_block": {"type": "text", "text": ""}}
        # The opening events ride with the first text chunk so interval_s paces text only.
        opening = (
            event("message_start", {"message": start})
            + event("content_block_start", block)
            + event("ping", {})
        )
        yield from _texts(
            behaviour,
            lambda index, piece: (opening if index == 0 else b"")
            + event(
                "content_block_delta",
                {"index": 0, "delta": {"type": "text_delta", "text": piece}},
            ),
        )
        if behaviour.cut_after is not None:
            return
        if not _pieces(behaviour):
            yield opening
        yield event("content_block_stop", {"index": 0})
        yield STALL
        # The API's message_delta always has its usage: 0 stands for a stub told of none.
        tokens_out = behaviour.usage[1] if behaviour.usage is not None else 0
        delta = {
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": tokens_out},
        }
        yield event("message_delta", delta)
        yield event("message_stop", {})

    def error(self, behaviour: Behaviour) -> dict[str, Any]:
        status = behaviour.status
        kind = _ANTHROPIC_ERRORS.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        return {
            "type": "error",
            "error": {"type": kind, "message": behaviour.text},
            "request_id": "req_stub",
        }


# google.rpc.Code names by HTTP status (the Gemini API's troubleshooting reference).
_GEMINI_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


class GeminiWire:
    """``POST /v1beta/models/{model}:generateContent``, and ``:streamGenerateContent?alt=sse``
    whose every ``data:`` chunk is a GenerateContentResponse."""

    name = "gemini"

    def matches(self, path: str) -> bool:
        match = _GEMINI_PATH.match(path)
        return bool(match and match["method"] in ("generateContent", "streamGenerateContent"))

    def streaming(self, path: str, query: str, payload: Any) -> bool:
        match = _GEMINI_PATH.match(path)
        return bool(match and match["method"] == "streamGenerateContent")

    def model(self, path: str, payload: Any) -> str | None:
        match = _GEMINI_PATH.match(path.partition("?")[0])
        return match["model"] if match else None

    def _usage(self, behaviour: Behaviour, *, final: bool) -> dict[str, Any] | None:
        if behaviour.usage is None:
            return None
        tokens_in, tokens_out = behaviour.usage
        if not final:
            return {"promptTokenCount": tokens_in, "totalTokenCount": tokens_in}
        return {
            "promptTokenCount": tokens_in,
            "candidatesTokenCount": tokens_out,
            "totalTokenCount": tokens_in + tokens_out,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": tokens_in}],
        }

    def _response(
        self, parts: list[dict[str, Any]], model: str, usage: dict[str, Any] | None, finish: bool
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            candidate["finishReason"] = "STOP"
        data: dict[str, Any] = {
            "candidates": [candidate],
            "modelVersion": model,
            "responseId": "stub-response",
        }
        if usage is not None:
            data["usageMetadata"] = usage
        return data

    def answer(self, behaviour: Behaviour, model: str) -> dict[str, Any]:
        parts: list[dict[str, Any]] = [{"text": behaviour.text}] if behaviour.text else []
        for i, (name, arguments) in enumerate(behaviour.tool_calls):
            parts.append(
                {
                    "functionCall": {"name": name, "args": json.loads(arguments)},
                    # Gemini 3 signs its calls, and refuses them sent back unsigned.
                    "thoughtSignature": gemini_signature(i),
                }
            )
        return self._response(parts, model, self._usage(behaviour, final=True), finish=True)

    def stream(self, behaviour: Behaviour, model: str, payload: Any) -> Iterator[Piece]:
        def event(data: dict[str, Any]) -> bytes:
            return f"data: {json.dumps(data)}\r\n\r\n".encode()

        usage = self._usage(behaviour, final=False)
        yield from _texts(
            behaviour,
            lambda index, piece: event(self._response([{"text": piece}], model, usage, False)),
        )
        if behaviour.cut_after is not None:
            return
        yield STALL
        final = self._usage(behaviour, final=True)
        yield event(self._response([{"text": ""}], model, final, finish=True))

    def error(self, behaviour: Behaviour) -> dict[str, Any]:
        status = behaviour.status
        error: dict[str, Any] = {
            "code": status,
            "message": behaviour.text,
            "status": _GEMINI_STATUSES.get(status, "INTERNAL" if status >= 500 else "UNKNOWN"),
        }
        if behaviour.details:
            error["details"] = list(behaviour.details)
        return {"error": error}


def gemini_signature(index: int) -> str:
    """Return the thought signature the stub gives its ``index``-th function call."""
    return base64.b64encode(f"stub-signature-{index}".encode()).decode()


WIRES = (OpenAIWire(), AnthropicWire(), GeminiWire())
