"""Http steps: send the step's request, its templates rendered, through the SSRF guard.

The answer is the response body's text (a JSON object overlays the run's facts, as any
step's does). Every hop is checked by the guard of actors and tool servers
(PROVIDER_URL_ALLOWLIST): the origin when the hop is sent, its addresses again when the
transport connects; a redirect is followed only once its target passed the same check, a step's
secret headers never follow one to another origin, and a body holding a secret is never sent
again to another origin (the step fails instead). 408, 425, 429, 5xx and broken
connections are retried with backoff (Retry-After honoured) within the step's `timeout_s`;
a body past HTTP_STEP_MAX_RESPONSE_BYTES (counted as decoded, so a compressed body is no way
around it) fails the step and nothing of it is kept.

Secrets come from the env vars in `secret_env`; their values are redacted from everything
recorded (the request, the answer, errors), so they are never stored, exported or shown.
`details["http"]` keeps the request (method, URL, headers), status, latency, size, attempts.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit

import httpx
from django.conf import settings

from workflows import engine
from workflows.actor_urls import (
    Allowlist,
    NameUnresolved,
    URLRefused,
    check_base_url,
    settings_allowlist,
)
from workflows.engine.http_request import (
    BODILESS,
    DEFAULT_TIMEOUT_S,
    RETRY_STATUSES,
    ScriptedResponse,
    body_templates,
    method_problem,
    render_body,
    script_key,
)
from workflows.engine.secrets import secret_env_problem
from workflows.engine.templating import secret_reference, template_names
from workflows.guarded_http import BodyTooLarge, DeadlinePassed, call_deadline, guarded_client

from ..claims import StepOutcome
from ..lease import keeper
from ..providers.http_calls import excerpt, retry_after_header
from ..status import StepStatus
from .session import Session

KIND = "http"
MAX_REDIRECTS = 5
BASE_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
CONNECT_TIMEOUT_S = 10.0
REDACTED = "***"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class _Failed(Exception):
    """One attempt failed without a status; `retryable`: sending again may help."""

    def __init__(self, message: str, *, retryable: bool, timed_out: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.timed_out = timed_out


@dataclass
class _Request:
    """The rendered request (secrets in it); which of its headers, and whether its body,
    carry a secret."""

    method: str
    url: str
    headers: dict[str, str]
    content: bytes | None
    secret_headers: frozenset[str]
    secret_body: bool


@dataclass
class _Answer:
    status: int
    text: str
    size: int
    content_type: str
    retry_after: float | None
    redirects: list[str] = field(default_factory=list)


class _Redactor:
    """Replace each secret's value (as is and URL-encoded) by REDACTED in recorded text."""

    def __init__(self, values: Iterable[str]) -> None:
        forms = {form for v in values if v for form in _encodings(v)}
        # Longest first: a secret that holds another is replaced whole.
        self._forms = sorted(forms, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for form in self._forms:
            text = text.replace(form, REDACTED)
        return text


def _encodings(value: str) -> set[str]:
    """Return the forms a secret's value takes in recorded text: as is, URL-encoded, and as
    httpx encodes it in a URL's path or query (`ab c/d` in a path: `ab%20c/d`)."""
    forms = {value, quote(value, safe=""), quote_plus(value)}
    for base in ("http://x.test/", "http://x.test/?"):
        # A value httpx cannot put in a URL is never sent in one.
        with contextlib.suppress(httpx.InvalidURL, ValueError):
            forms.add(str(httpx.URL(base + value)).removeprefix(base))
    forms.discard("")
    return forms


def execute(session: Session) -> StepOutcome:
    step = session.claim.step
    outcome = StepOutcome(status=StepStatus.SUCCEEDED)
    answers = _scripted_answers(session)
    try:
        secrets = _secrets(step, scripted=answers is not None)
    except _Failed as exc:
        outcome.status, outcome.error = StepStatus.FAILED, str(exc)
        return outcome
    redact = _Redactor(secrets.values())
    try:
        request = _render(session, step, secrets)
    except (engine.TemplateError, _Failed) as exc:
        outcome.status, outcome.error = StepStatus.FAILED, redact(str(exc))
        return outcome
    record: dict[str, Any] = {
        "request": {
            "method": request.method,
            "url": redact(request.url),
            "headers": {k: redact(v) for k, v in request.headers.items()},
        },
        "status": None,
        "attempts": [],
    }
    if answers is not None:
        record["scripted"] = True
    outcome.details["http"] = record
    outcome.prompt = f"{request.method} {redact(request.url)}"
    exchange = _Exchange(session, request, redact, record, answers)
    started = time.monotonic()
    try:
        answer = exchange.run(float(step.timeout_s or DEFAULT_TIMEOUT_S), step.retries)
    except _Failed as exc:
        outcome.status = StepStatus.TIMED_OUT if exc.timed_out else StepStatus.FAILED
        outcome.timed_out = exc.timed_out
        outcome.error = redact(str(exc))
        session.failed_transiently = exc.retryable
        return outcome
    finally:
        outcome.latency_ms = int((time.monotonic() - started) * 1000)
        record["latency_ms"] = outcome.latency_ms
    record.update(
        status=answer.status,
        bytes=answer.size,
        content_type=answer.content_type,
        redirects=[redact(url) for url in answer.redirects],
    )
    text = redact(answer.text)
    if not 200 <= answer.status < 300:
        outcome.status = StepStatus.FAILED
        outcome.error = f"{outcome.prompt} answered {answer.status}" + (
            f": {excerpt(text)}" if text.strip() else ""
        )
        session.failed_transiently = answer.status in RETRY_STATUSES
        return outcome
    outcome.response = text
    return outcome


def http_status(outcome: StepOutcome) -> int | None:
    """Return the status an http step's response came with (None: it got none)."""
    record = outcome.details.get("http")
    status = record.get("status") if isinstance(record, dict) else None
    return status if isinstance(status, int) else None


def _scripted_answers(session: Session) -> list[dict[str, Any]] | None:
    """Return the dry run's scripted answers for the step, or None when it has none."""
    answers = (session.claim.script or {}).get(script_key(session.claim.step.key))
    return answers if isinstance(answers, list) and answers else None


def _secrets(step: engine.StepSpec, *, scripted: bool) -> dict[str, str]:
    """Read each env var of the step's `secret_env` (a dry run answered from its script sends
    nothing, and reads none: each is REDACTED). A name that is not a recipe's secret (a
    recipe stored before the rule) is refused, its variable never read."""
    for name in step.secret_env:
        problem = secret_env_problem(name)
        if problem is not None:
            raise _Failed(f"secret_env: {problem}", retryable=False)
    if scripted:
        return {name: REDACTED for name in step.secret_env}
    secrets: dict[str, str] = {}
    for name in step.secret_env:
        value = os.environ.get(name)
        if value is None:
            raise _Failed(f"secret_env: env var {name} is not set", retryable=False)
        secrets[name] = value
    return secrets


def _render(session: Session, step: engine.StepSpec, secrets: Mapping[str, str]) -> _Request:
    def render(template: str) -> str:
        return session.render(template, secrets=secrets)

    method = render(step.method).strip().upper()
    problem = method_problem(method)
    if problem is not None:
        raise _Failed(f"method {problem}", retryable=False)
    headers: dict[str, str] = {}
    secret_headers: set[str] = set()
    for name, template in step.headers.items():
        value = render(template)
        if any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in value):
            # The HTTP client would refuse it with the value in its message.
            raise _Failed(f"headers.{name}: its value holds a control character", retryable=False)
        if not value.isascii():
            raise _Failed(f"headers.{name}: its value is not ASCII text", retryable=False)
        headers[name] = value
        if _names_a_secret(template):
            secret_headers.add(name.lower())
    query = {name: render(template) for name, template in step.query.items()}
    content: bytes | None = None
    secret_body = False
    if step.body is not None and method not in BODILESS:
        body = render_body(step.body, render)
        secret_body = any(_names_a_secret(t) for t, _ in body_templates(step.body, "body"))
        if isinstance(body, str):
            content = body.encode()
            content_type = "text/plain; charset=utf-8"
        else:
            content = json.dumps(body, ensure_ascii=False).encode()
            content_type = "application/json"
        # Header names are case-insensitive: a step's own `content-type` stands alone.
        if not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = content_type
    try:
        parsed = httpx.URL(render(step.url).strip())
        url = str(parsed.copy_merge_params(query) if query else parsed)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise _Failed(f"url cannot be read: {exc}", retryable=False) from None
    return _Request(method, url, headers, content, frozenset(secret_headers), secret_body)


def _names_a_secret(template: str) -> bool:
    return any(secret_reference(n) is not None for n in template_names(template))


class _Exchange:
    """The attempts at one request, with the waits between them, within the step's time."""

    def __init__(
        self,
        session: Session,
        request: _Request,
        redact: _Redactor,
        record: dict[str, Any],
        answers: list[dict[str, Any]] | None,
    ) -> None:
        self.session = session
        self.request = request
        self.redact = redact
        self.attempts: list[dict[str, Any]] = record["attempts"]
        self.answers = answers
        self.max_bytes = int(settings.HTTP_STEP_MAX_RESPONSE_BYTES)

    def run(self, timeout_s: float, retries: int) -> _Answer:
        """Return the last answer (a status); raise _Failed if none came."""
        deadline = time.monotonic() + timeout_s
        for attempt in range(retries + 1):
            keeper.check(self.session.claim.token)  # a cancelled run sends nothing more
            began = time.monotonic()
            entry: dict[str, Any] = {}
            self.attempts.append(entry)
            try:
                answer = self._attempt(deadline)
            except _Failed as exc:
                entry.update(error=self.redact(str(exc)), latency_ms=_since(began))
                if not exc.retryable or attempt == retries or exc.timed_out:
                    raise
                self._wait(_backoff(attempt), None, deadline, timeout_s, entry, str(exc))
                continue
            entry.update(status=answer.status, latency_ms=_since(began))
            if answer.status not in RETRY_STATUSES or attempt == retries:
                return answer
            wait = answer.retry_after if answer.retry_after is not None else _backoff(attempt)
            why = f"answered {answer.status}"
            self._wait(wait, answer.retry_after, deadline, timeout_s, entry, why)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _wait(
        self,
        wait: float,
        asked: float | None,
        deadline: float,
        timeout_s: float,
        entry: dict[str, Any],
        why: str,
    ) -> None:
        """Wait before the next attempt; raise _Failed when the step's time would run out."""
        if time.monotonic() + wait >= deadline:
            if asked is not None:
                raise _Failed(
                    f"{self.request.method} {self.redact(self.request.url)} {why} and asked to "
                    f"retry after {asked:g} s, beyond the step's timeout of {timeout_s:g} s",
                    retryable=False,
                )
            raise _Failed(
                f"{self.redact(why)}; no time left to retry within the step's timeout of "
                f"{timeout_s:g} s",
                retryable=True,
            )
        entry["waited_s"] = round(wait, 3)
        if self.answers is None:  # a script's answers come at once
            time.sleep(wait)

    def _attempt(self, deadline: float) -> _Answer:
        if self.answers is not None:
            return self._scripted()
        request = self.request
        method, url, headers, content = (
            request.method,
            request.url,
            request.headers,
            request.content,
        )
        redirects: list[str] = []
        allowlist = Allowlist.parse(settings_allowlist())
        client = guarded_client(allowlist, max_body_bytes=self.max_bytes)
        for hop in range(MAX_REDIRECTS + 1):
            origin = _checked_origin(url, allowlist, self.redact, hop=hop)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Failed(self._timeout_message(), retryable=True, timed_out=True)
            timeout = httpx.Timeout(remaining, connect=min(CONNECT_TIMEOUT_S, remaining))
            try:
                with call_deadline(deadline):
                    sent = client.build_request(
                        method, url, headers=headers, content=content, timeout=timeout
                    )
                    response = client.send(sent, stream=True)
                    try:
                        location = response.headers.get("location")
                        if response.status_code in _REDIRECTS and location:
                            next_url = str(response.url.join(location))
                        else:
                            return self._read(response, redirects)
                    finally:
                        response.close()
            except (DeadlinePassed, httpx.TimeoutException):
                raise _Failed(self._timeout_message(), retryable=True, timed_out=True) from None
            except BodyTooLarge:
                raise _Failed(
                    f"the response is larger than {self.max_bytes} bytes "
                    "(HTTP_STEP_MAX_RESPONSE_BYTES); nothing of it was kept",
                    retryable=False,
                ) from None
            except NameUnresolved as exc:
                raise _Failed(self.redact(str(exc)), retryable=True) from None
            except URLRefused as exc:
                raise _Failed(self.redact(f"url {exc.reason}"), retryable=False) from None
            except httpx.HTTPError as exc:
                raise _Failed(
                    self.redact(f"{method} {url} failed: {type(exc).__name__}: {exc}"),
                    retryable=True,
                ) from None
            redirects.append(next_url)
            if response.status_code == 303 or (
                response.status_code in (301, 302) and method == "POST"
            ):
                method, content = "GET", None
                headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
            if _origin(next_url) != origin:
                if content is not None and request.secret_body:
                    # A 307 or 308 (a 301 or 302 but of a POST) sends the body again: its
                    # secrets are not for that server.
                    raise _Failed(
                        self.redact(
                            f"redirect {hop + 1} to {next_url} is to another origin and would "
                            "send the body again, with the secrets it holds; not followed"
                        ),
                        retryable=False,
                    )
                # Secrets were meant for the server the step names, not for where it points.
                headers = {
                    k: v
                    for k, v in headers.items()
                    if k.lower() not in request.secret_headers
                    and k.lower() not in ("authorization", "cookie")
                }
            url = next_url
        raise _Failed(
            self.redact(f"more than {MAX_REDIRECTS} redirects, the last to {url}"),
            retryable=False,
        )

    def _read(self, response: httpx.Response, redirects: list[str]) -> _Answer:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise BodyTooLarge()
        # The cap counts the body as decoded: a few KB of gzip can unpack to gigabytes.
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self.max_bytes:
                raise BodyTooLarge()
            chunks.append(chunk)
        body = b"".join(chunks)
        retry_after = retry_after_header(response.headers, limit=None)
        return _Answer(
            status=response.status_code,
            text=body.decode(response.encoding or "utf-8", errors="replace"),
            size=len(body),
            content_type=response.headers.get("content-type", ""),
            retry_after=retry_after,
            redirects=redirects,
        )

    def _scripted(self) -> _Answer:
        """Answer from the script: its answers in order, the last repeating."""
        assert self.answers is not None
        step_key = self.session.claim.step.key
        index = self.session.next_call(script_key(step_key))
        answer = ScriptedResponse.from_json(self.answers[min(index, len(self.answers) - 1)])
        if answer.error is not None:
            raise _Failed(f"scripted failure: {answer.error}", retryable=True)
        headers = httpx.Headers(answer.headers)
        return _Answer(
            status=answer.status,
            text=answer.body,
            size=len(answer.body.encode()),
            content_type=headers.get("content-type", ""),
            retry_after=retry_after_header(headers, limit=None),
        )

    def _timeout_message(self) -> str:
        request = self.request
        return (
            f"{request.method} {self.redact(request.url)} did not answer within the step's "
            f"timeout of {self.session.claim.step.timeout_s or DEFAULT_TIMEOUT_S:g} s"
        )


def _checked_origin(url: str, allowlist: Allowlist, redact: _Redactor, *, hop: int) -> str:
    """Check the URL's scheme and host with the SSRF guard (resolving its name); return its
    origin. Raise _Failed saying why it is refused (a name that does not resolve may resolve
    on the next attempt); `hop` > 0: the URL is a redirect's target."""
    where = f"redirect {hop} to {url}: " if hop else ""
    origin = _origin(url)
    try:
        check_base_url(origin, allowlist=allowlist)
    except NameUnresolved as exc:
        raise _Failed(redact(f"{where}{exc}"), retryable=True) from None
    except URLRefused as exc:
        raise _Failed(redact(f"{where}url {exc.reason}"), retryable=False) from None
    return origin


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def _backoff(attempt: int) -> float:
    return min(BASE_BACKOFF_S * 2**attempt, MAX_BACKOFF_S)


def _since(began: float) -> int:
    return int((time.monotonic() - began) * 1000)
