"""What every provider that calls a model server over HTTP shares, whatever its API.

- one time budget per call (``ChatRequest.timeout_s``) covering every attempt and backoff,
  enforced between chunks and, through the guarded transport's watchdog, during a stalled read;
- our own retry loop (the SDKs' are off) so backoff honours the server's wait within that
  budget and never replays a stream whose tokens were already handed out;
- one classification of failures: a status (408/425/429 and 5xx are worth retrying), a
  transport error (connection, timeout, size, SSRF refusal), and the message a run shows,
  with the API key redacted from it.

A provider subclasses `HTTPProvider` and writes `_attempt`: one request in its vendor's wire
format through its vendor's SDK, raising a `Failure` for whatever went wrong.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, NoReturn

import httpx
import httpx2

from workflows.actor_spec import reserved_params
from workflows.guarded_http import BodyTooLarge, DeadlinePassed

from .base import (
    ChatRequest,
    ChatResult,
    ProviderConfigError,
    ProviderError,
    ProviderTimeoutError,
    TokenCallback,
    ToolCallRequest,
)
from .urls import DEFAULT_ALLOWLIST, check_base_url, parse_allowlist

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
# What a transport failure is, from whichever of httpx and its fork httpx2 an SDK runs on.
_CONNECT_TIMEOUTS = (httpx.ConnectTimeout, httpx2.ConnectTimeout)
_TIMEOUTS = (httpx.TimeoutException, httpx2.TimeoutException)
_CONNECT_ERRORS = (httpx.ConnectError, httpx2.ConnectError)
_HTTP_ERRORS = (httpx.HTTPError, httpx2.HTTPError)
# What reading a body may raise below the SDKs.
TRANSPORT_ERRORS = (*_HTTP_ERRORS, BodyTooLarge, DeadlinePassed, ProviderError)


class Answer(NamedTuple):
    """What one attempt got from the server."""

    text: str
    tokens_in: int | None
    tokens_out: int | None
    model: str | None
    tool_calls: tuple[ToolCallRequest, ...] = ()


class Secret:
    """Keep an API key out of reprs, tracebacks' locals and logs."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """Return the secret, for the one place that sends it."""
        return self._value

    def __repr__(self) -> str:
        return "'***'"


class Failure(Exception):
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


class HTTPProvider:
    """Call a model server through its SDK, with retries inside one time budget."""

    name = "http"

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
        self._api_key = Secret(api_key) if api_key else None
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
        after the wait the server asks for, as long as it fits in ``request.timeout_s``. A
        stream that fails after tokens were delivered is not retried here: the caller has
        already seen part of an answer, so it decides.
        """
        reserved = sorted(reserved_params(self.name).intersection(request.params))
        if reserved:
            raise ProviderConfigError(f"{self._who()}: params may not set {', '.join(reserved)}")
        started = time.monotonic()
        deadline = started + request.timeout_s
        attempts = 0
        while True:
            attempts += 1
            emitted = [0]
            try:
                answer = self._attempt(
                    request, on_token=on_token, deadline=deadline, emitted=emitted
                )
            except Failure as failure:
                if emitted[0]:
                    failure.detail = join(
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
                        failure.detail = join(
                            failure.detail,
                            f"no time left to retry within {request.timeout_s:g} s",
                        )
                    self._give_up(failure, attempts, request)
                self._sleep(delay)
                continue
            latency_ms = int((time.monotonic() - started) * 1000)
            return ChatResult(
                answer.text,
                answer.tokens_in,
                answer.tokens_out,
                latency_ms,
                answer.model or request.model,
                answer.tool_calls,
            )

    def _attempt(
        self,
        request: ChatRequest,
        *,
        on_token: TokenCallback | None,
        deadline: float,
        emitted: list[int],
    ) -> Answer:
        """Make one request within ``deadline``; add the characters handed to ``on_token`` to
        ``emitted[0]``; raise a Failure for anything that went wrong."""
        raise NotImplementedError

    def _time_left(self, deadline: float) -> float:
        """Return the seconds left to an attempt, or raise the timeout if none are."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Failure("did not answer", retryable=True, kind="timeout")
        return remaining

    def _check_size(self, chars: int) -> None:
        """Raise a Failure if an answer of ``chars`` characters is past the cap."""
        if chars > self.max_response_chars:
            raise Failure(
                f"response exceeded {self.max_response_chars} characters", retryable=False
            )

    def _who(self) -> str:
        return f"{self.name} at {self.base_url}"

    def _give_up(self, failure: Failure, attempts: int, request: ChatRequest) -> NoReturn:
        """Raise the ProviderError for the last failed attempt.

        Raised ``from None``: the SDKs' exceptions quote raw server bodies, which may echo
        the credentials, while this message carries what matters, redacted.
        """
        after = f" after {attempts} attempts" if attempts > 1 else ""
        detail = self._redact(failure.detail)
        if failure.kind == "timeout":
            message = f"{self._who()} did not answer within {request.timeout_s:g} s{after}"
            raise ProviderTimeoutError(join(message, detail)) from None
        message = join(f"{self._who()} {self._redact(failure.reason)}{after}", detail)
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


def status_failure(
    status: int,
    headers: Mapping[str, str],
    detail: str,
    *,
    retry_after: float | None = None,
) -> Failure:
    """Return the Failure of an answer with an error status; ``retry_after`` is a wait the
    body asked for, used when the headers ask for none."""
    if 300 <= status < 400:
        location = headers.get("location", "nowhere")
        return Failure(
            f"answered {status}",
            retryable=False,
            detail=f"redirect to {excerpt(location)} not followed; fix the base URL",
            status_code=status,
        )
    retryable = status in _RETRYABLE_STATUSES or status >= 500
    if retryable:
        asked = retry_after_header(headers)
        retry_after = asked if asked is not None else retry_after
    return Failure(
        f"answered {status}",
        retryable=retryable,
        detail=detail,
        status_code=status,
        retry_after=retry_after if retryable else None,
    )


def transport_failure(exc: BaseException, connect_timeout: float) -> Failure:
    """Classify a failure below HTTP status level: connection, timeout, size, SSRF refusal."""
    for cause in causes(exc):
        if isinstance(cause, DeadlinePassed):
            return Failure("did not answer", retryable=True, kind="timeout")
        if isinstance(cause, BodyTooLarge):
            return Failure(str(cause), retryable=False)
        if isinstance(cause, ProviderConfigError):
            return Failure(str(cause), retryable=False, kind="config")
        if isinstance(cause, ProviderError):
            return Failure("failed", retryable=cause.retryable, detail=str(cause))
        if isinstance(cause, _CONNECT_TIMEOUTS):
            return Failure(f"could not connect within {connect_timeout:g} s", retryable=True)
        if isinstance(cause, _TIMEOUTS):
            return Failure("did not answer", retryable=True, kind="timeout")
        if isinstance(cause, _CONNECT_ERRORS):
            return Failure("could not be reached", retryable=True, detail=str(cause))
        if isinstance(cause, _HTTP_ERRORS):
            return Failure("broke the connection", retryable=True, detail=str(cause))
    return Failure("could not be reached", retryable=True, detail=str(exc))


def within_deadline(
    items: Iterable[Any],
    deadline: float,
    connect_timeout: float,
    failure_of: Callable[[Exception], Failure | None],
) -> Iterator[Any]:
    """Yield a stream's events until it ends, or raise a Failure: the API's own (`failure_of`
    names it, or None for an exception it does not know), a transport's, or the deadline's."""
    iterator = iter(items)
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            return
        except TRANSPORT_ERRORS as exc:
            raise transport_failure(exc, connect_timeout) from exc
        except Exception as exc:
            failure = failure_of(exc)
            if failure is None:
                raise
            raise failure from exc
        if time.monotonic() > deadline:
            raise Failure("did not answer", retryable=True, kind="timeout")
        yield item


def causes(exc: BaseException) -> Iterator[BaseException]:
    """Yield ``exc`` and what it was raised from: the SDKs wrap transport exceptions in their
    own, and what matters is underneath."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def retry_after_header(
    headers: Mapping[str, str], *, limit: float | None = MAX_RETRY_AFTER_S
) -> float | None:
    """Return the wait the server asked for, in seconds, capped at `limit` (None: as asked)."""
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
    return capped_wait(seconds, limit)


def capped_wait(seconds: float | None, limit: float | None = MAX_RETRY_AFTER_S) -> float | None:
    """Return a wait a server asked for, within 0 and `limit` (None: no wait)."""
    if seconds is None or seconds != seconds:  # NaN
        return None
    seconds = max(seconds, 0.0)
    return seconds if limit is None else min(seconds, limit)


def field(obj: object, name: str) -> Any:
    """Read ``name`` from a dict or an SDK model, None when absent; bodies are untrusted."""
    if isinstance(obj, dict):
        return obj.get(name)
    if obj is None or isinstance(obj, str | int | float | list):
        return None
    return getattr(obj, name, None)


# The most tokens a call's counts may say (its columns' range): more is a server's mistake.
MAX_TOKEN_COUNT = 2**31 - 1


def count(value: object) -> int | None:
    """Return a token count a server reported, or None for anything that is not one."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT:
        return value
    return None


def message_text(content: object) -> str:
    """Return a chat message's text (OpenAI's format): a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def excerpt(text: str) -> str:
    """Return ``text`` on one line, cut to a length a message can quote."""
    text = " ".join(text.split())
    if len(text) > _EXCERPT_CHARS:
        return text[:_EXCERPT_CHARS] + "…"
    return text


def join(message: str, detail: str) -> str:
    """Return ``message: detail``, or the message alone without a detail."""
    return f"{message}: {detail}" if detail else message
