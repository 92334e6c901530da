"""Scripted actors: canned answers for dry runs, demos and tests, with no model behind them."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import re2  # type: ignore[import-untyped]

from .base import (
    ChatRequest,
    ChatResult,
    ProviderConfigError,
    ProviderError,
    ProviderTimeoutError,
    TokenCallback,
)

_KEYS = frozenset({"replies", "rules", "delay_ms"})
_RULE_KEYS = frozenset({"match", "reply"})
# Word pieces that join back into the exact reply, whitespace included.
_WORDS = re.compile(r"\S+\s*|\s+")


def _re2_options() -> Any:
    options = re2.Options()
    # A bad pattern is reported in the ProviderConfigError; RE2's own log would repeat it on stderr.
    options.log_errors = False
    return options


class ScriptedProvider:
    """Answer from a script: ``{"replies": [...], "rules": [{"match", "reply"}], "delay_ms": N}``.

    The first rule whose RE2 pattern matches the prompt answers; otherwise reply number
    ``call_index`` does, the last reply repeating once the list is used up.
    """

    name = "scripted"

    def __init__(
        self, config: Mapping[str, Any], *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        replies, rules, delay_ms = _parse_config(config)
        self.replies = replies
        self.rules = rules
        self.delay_ms = delay_ms
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
        if on_token is not None:
            for word in _WORDS.findall(text):
                on_token(word)
        latency_ms = int((time.monotonic() - started) * 1000)
        return ChatResult(text, None, None, latency_ms, request.model or self.name)


FAIL_PREFIX = "@error"
TIMEOUT_REPLY = "@timeout"


def _parse_config(config: object) -> tuple[list[str], list[tuple[Any, str]], float]:
    """Return replies, compiled rules and delay from ``config``, or raise saying what is wrong."""
    if not isinstance(config, Mapping):
        raise ProviderConfigError(
            f"scripted config must be an object with replies, rules or delay_ms, "
            f"not {type(config).__name__}"
        )
    unknown = sorted(str(key) for key in set(config) - _KEYS)
    if unknown:
        raise ProviderConfigError(
            f"scripted config: unknown key {', '.join(map(repr, unknown))}; "
            "expected replies, rules, delay_ms"
        )

    replies = config.get("replies", [])
    if not isinstance(replies, list):
        raise ProviderConfigError("scripted config: replies must be a list of texts")
    for index, reply in enumerate(replies):
        if not isinstance(reply, str):
            raise ProviderConfigError(
                f"scripted config: replies[{index}] must be text, not {type(reply).__name__}"
            )

    raw_rules = config.get("rules", [])
    if not isinstance(raw_rules, list):
        raise ProviderConfigError("scripted config: rules must be a list of {match, reply}")
    rules: list[tuple[Any, str]] = []
    for index, rule in enumerate(raw_rules):
        where = f"scripted config: rules[{index}]"
        if not isinstance(rule, Mapping) or set(rule) != _RULE_KEYS:
            raise ProviderConfigError(f"{where} must be an object with exactly match and reply")
        match, reply = rule["match"], rule["reply"]
        if not isinstance(match, str) or not isinstance(reply, str):
            raise ProviderConfigError(f"{where}: match and reply must be text")
        try:
            pattern = re2.compile(match, options=_re2_options())
        except re2.error as exc:
            reason = exc.args[0] if exc.args else exc
            if isinstance(reason, bytes):
                reason = reason.decode("utf-8", "replace")
            raise ProviderConfigError(
                f"{where}.match: not a valid RE2 pattern ({reason})"
            ) from None
        rules.append((pattern, reply))

    delay_ms = config.get("delay_ms", 0)
    if isinstance(delay_ms, bool) or not isinstance(delay_ms, int | float) or not delay_ms >= 0:
        raise ProviderConfigError("scripted config: delay_ms must be a number of milliseconds >= 0")
    return list(replies), rules, float(delay_ms)
