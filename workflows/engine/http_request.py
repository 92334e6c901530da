"""An http step's request: its names and bounds, how its body is rendered, a dry run's answers.

An http step sends one request (method, url, headers, query, body: each a template) and its
response is the step's answer; the runner sends it (`runner/steps/http.py`). Secrets come
from env vars the step lists in `secret_env`, named in its templates as `{secrets.NAME}`.
A scripted answer (`http.STEPKEY` in a dry run's script) is text (status 200) or
`{"status", "body", "headers"?}`; `"@error: why"` fails the request as a connection would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from workflows.engine.checks import is_int
from workflows.engine.tools import MAX_SCRIPT_ANSWERS, SCRIPT_ERROR_PREFIX

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
DEFAULT_METHOD = "GET"
# Methods whose requests carry no body here.
BODILESS = ("GET", "HEAD")
SCHEMES = ("http://", "https://")
DEFAULT_RETRIES = 2
MAX_RETRIES = 10
# The whole step (every attempt and every wait between them) takes at most its `timeout_s`.
DEFAULT_TIMEOUT_S = 30
MAX_HEADERS = 50
MAX_QUERY = 50
MAX_SECRET_ENV = 20
# A header's name is an HTTP token (RFC 9110 §5.6.2).
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Headers the request's own framing and destination set: a step may not set them.
RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
# Statuses a request is sent again for (with backoff, honouring Retry-After).
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
# A dry run's script answers an http step under this prefix and its key: `http.fetch`.
SCRIPT_PREFIX = "http."


def script_key(step_key: str) -> str:
    """Return the key under which a dry run's script answers http step `step_key`."""
    return f"{SCRIPT_PREFIX}{step_key}"


def method_problem(method: str) -> str | None:
    """Say why `method` (rendered) is not a method an http step sends, or None."""
    if method.upper() not in METHODS:
        return f"must be one of {', '.join(METHODS)}, got {method!r}"
    return None


def url_problem(template: str) -> str | None:
    """Say why an http step's url template cannot give an http(s) URL, or None.

    The scheme and host are written out, never a placeholder's: an input or an answer could
    otherwise point the request (and its secrets) at another server (`{path}` giving
    `.evil.com/x`). Placeholders go in the path, the query or the fragment.
    """
    head = template.strip().lower()
    if not head.startswith(SCHEMES):
        return (
            "must begin with http:// or https:// (the scheme is written out, not taken from "
            f"a template), got {template!r}"
        )
    rest = head.split("://", 1)[1]
    if not rest or rest[0] in "/?#":
        return f"has no host, got {template!r}"
    host = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "{" in host or "}" in host:
        return (
            "its scheme and host are written out, not taken from a template (placeholders "
            f"go after the first /, ? or #), got {template!r}"
        )
    return None


def header_name_problem(name: object) -> str | None:
    """Say why `name` cannot be a header an http step sets, or None."""
    if not isinstance(name, str) or not HEADER_NAME.fullmatch(name):
        return f"{name!r} is not a header name (letters, digits and !#$%&'*+.^_`|~-)"
    if name.lower() in RESERVED_HEADERS:
        return f"{name} is set by the request itself; a step cannot set it"
    return None


def body_templates(body: Any, path: str) -> list[tuple[str, str]]:
    """Return every template of a body with its path: the text, or a JSON body's strings."""
    if isinstance(body, str):
        return [(body, path)]
    if isinstance(body, Mapping):
        return [t for key, value in body.items() for t in body_templates(value, f"{path}.{key}")]
    if isinstance(body, list):
        return [t for i, value in enumerate(body) for t in body_templates(value, f"{path}[{i}]")]
    return []


def render_body(body: Any, render: Callable[[str], str]) -> Any:
    """Render a body: a text template, or a JSON value whose strings are templates (each
    rendered into its own string, so an input's quotes cannot break the JSON)."""
    if isinstance(body, str):
        return render(body)
    if isinstance(body, Mapping):
        return {key: render_body(value, render) for key, value in body.items()}
    if isinstance(body, list):
        return [render_body(value, render) for value in body]
    return body


@dataclass(frozen=True, slots=True)
class ScriptedResponse:
    """A dry run's answer to an http step: a status and a body, or a failure (`error`)."""

    status: int = 200
    body: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        """Return the answer as a run's script keeps it."""
        if self.error is not None:
            return {"error": self.error}
        return {"status": self.status, "body": self.body, "headers": dict(self.headers)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScriptedResponse:
        """Read an answer back from a run's script (as `as_json` wrote it)."""
        if data.get("error") is not None:
            return cls(error=str(data["error"]))
        headers = data.get("headers")
        return cls(
            status=int(data.get("status", 200)),
            body=str(data.get("body", "")),
            headers=dict(headers) if isinstance(headers, Mapping) else {},
        )


def read_script_http(value: object, path: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Check a script's answers for one http step, used in order (the last one repeats).

    Each is text (a 200 with that body), `{"status", "body", "headers"?}` (a body that is
    not text is sent as its JSON) or `"@error: why"`. Return the answers as
    `ScriptedResponse.as_json` writes them, and every problem as `path: message`.
    """
    if isinstance(value, str | Mapping):
        value = [value]
    if not isinstance(value, list) or not value:
        return [], [f"{path}: must be a non-empty list of answers (text or {{status, body}})"]
    if len(value) > MAX_SCRIPT_ANSWERS:
        return [], [f"{path}: at most {MAX_SCRIPT_ANSWERS} answers, got {len(value)}"]
    answers: list[dict[str, Any]] = []
    errors: list[str] = []
    for i, answer in enumerate(value):
        where = f"{path}[{i}]"
        if isinstance(answer, str):
            if answer.startswith(SCRIPT_ERROR_PREFIX):
                message = answer.removeprefix(SCRIPT_ERROR_PREFIX).lstrip(": ").strip()
                answers.append(ScriptedResponse(error=message or "scripted failure").as_json())
            else:
                answers.append(ScriptedResponse(body=answer).as_json())
            continue
        if not isinstance(answer, Mapping):
            errors.append(f"{where}: must be text or an object {{status, body}}")
            continue
        unknown = sorted(set(answer) - {"status", "body", "headers"})
        if unknown:
            errors.append(f"{where}: unknown keys {', '.join(unknown)} (status, body, headers)")
            continue
        status = answer.get("status", 200)
        if not is_int(status) or not 100 <= status <= 599:
            errors.append(f"{where}.status: must be a status from 100 to 599, got {status!r}")
            continue
        body = answer.get("body", "")
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
        headers = answer.get("headers") or {}
        if not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            errors.append(f"{where}.headers: must be an object of header name: text")
            continue
        answers.append(ScriptedResponse(int(status), text, dict(headers)).as_json())
    return answers, errors
