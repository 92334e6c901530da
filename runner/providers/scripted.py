"""Scripted actors: canned answers for dry runs, demos and tests, with no model behind them."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from workflows.actor_spec import SpecError, parse_scripted_config
from workflows.connections import release

from .base import (
    ChatRequest,
    ChatResult,
    ProviderConfigError,
    ProviderError,
    ProviderTimeoutError,
    TokenCallback,
    ToolCallRequest,
)

# Word pieces that join back into the exact reply, whitespace included.
_WORDS = re.compile(r"\S+\s*|\s+")


def wait(seconds: float) -> None:
    """Sleep through a scripted delay as a model call waits: without a database connection."""
    release()
    time.sleep(seconds)


class ScriptedProvider:
    """Answer from a script: ``{"replies": [...], "rules": [{"match", "reply"}], "delay_ms": N}``.

    The first rule whose RE2 pattern matches the prompt answers; otherwise reply number
    ``call_index`` does, the last reply repeating once the list is used up. The config is
    read by ``workflows.actor_spec`` (the rules the actor was checked against when written);
    rules see the first ``MAX_TEXT_CHARS`` characters of the prompt, as branch patterns do.
    """

    name = "scripted"

    def __init__(self, config: Mapping[str, Any], *, sleep: Callable[[float], None] = wait) -> None:
        try:
            script = parse_scripted_config(config)
        except SpecError as exc:
            raise ProviderConfigError(f"scripted config: {exc}") from None
        self.replies = list(script.replies)
        self.rules = list(script.rules)
        self.delay_ms = script.delay_ms
        self._sleep = sleep

    def __repr__(self) -> str:
        return (
            f"ScriptedProvider(replies={len(self.replies)}, rules={len(self.rules)}, "
            f"delay_ms={self.delay_ms:g})"
        )

    def reply_for(self, request: ChatRequest) -> str:
        """Return the scripted reply to ``request``, or raise ProviderError when there is none."""
        for pattern, reply in self.rules:
            if pattern.search(request.prompt) is not None:
                return reply
        if self.replies:
            return self.replies[min(request.call_index, len(self.replies) - 1)]
        raise ProviderError(
            "scripted actor has no reply: no rule matched the prompt and it has no replies",
            retryable=False,
        )

    def complete(
        self, request: ChatRequest, *, on_token: TokenCallback | None = None
    ) -> ChatResult:
        """Return the scripted reply after ``delay_ms``, streaming it word by word to ``on_token``.

        A delay longer than the request's timeout sleeps for the timeout and then raises
        ProviderTimeoutError, so dry runs can walk ``execution_timeout`` branches too.
        """
        started = time.monotonic()
        text = self.reply_for(request)
        # Dry runs walk failure branches too: "@error: why" fails the call, "@timeout" times out.
        if text.startswith(FAIL_PREFIX):
            raise ProviderError(
                text.removeprefix(FAIL_PREFIX).lstrip(": ") or "scripted failure", retryable=False
            )
        if text.strip() == TIMEOUT_REPLY:
            raise ProviderTimeoutError(f"scripted timeout after {request.timeout_s:g} s")
        delay_s = self.delay_ms / 1000
        if delay_s > request.timeout_s:
            self._sleep(request.timeout_s)
            raise ProviderTimeoutError(
                f"scripted actor did not answer within {request.timeout_s:g} s "
                f"(its delay_ms is {self.delay_ms:g})"
            )
        if delay_s:
            self._sleep(delay_s)
        if text.startswith(TOOL_CALLS_PREFIX):
            calls = _tool_calls(text.removeprefix(TOOL_CALLS_PREFIX), request.call_index)
            latency_ms = int((time.monotonic() - started) * 1000)
            return ChatResult("", None, None, latency_ms, request.model or self.name, calls)
        if on_token is not None:
            for word in _WORDS.findall(text):
                on_token(word)
        latency_ms = int((time.monotonic() - started) * 1000)
        return ChatResult(text, None, None, latency_ms, request.model or self.name)


def _tool_calls(listed: str, call_index: int) -> tuple[ToolCallRequest, ...]:
    """Read a scripted reply's tool calls: a JSON list of {"name", "arguments"}."""
    try:
        data = json.loads(listed)
    except ValueError as exc:
        raise ProviderError(f"scripted tool calls are not JSON: {exc}", retryable=False) from None
    if not isinstance(data, list) or not all(
        isinstance(c, dict) and isinstance(c.get("name"), str) for c in data
    ):
        raise ProviderError(
            'scripted tool calls must be a JSON list of {"name", "arguments"}', retryable=False
        )
    return tuple(
        ToolCallRequest(
            id=f"call_{call_index}_{i}",
            name=c["name"],
            arguments=json.dumps(c.get("arguments") or {}),
        )
        for i, c in enumerate(data)
    )


FAIL_PREFIX = "@error"
# A reply that asks for tool calls: `@tool_calls: [{"name": "SERVER.TOOL", "arguments": {}}]`.
TOOL_CALLS_PREFIX = "@tool_calls:"
TIMEOUT_REPLY = "@timeout"
