"""A recipe's callbacks: whom its runs tell, of which events.

A recipe may carry `callbacks: [{"on": [event types], "url", "secret_env"}]`: when a run of
it records an event of one of the `on` types, the server POSTs a signed Standard Webhooks
message to `url`, signed with the secret held in the env var `secret_env` (its name only is
in the recipe). What is sent, and how it is retried, is the triggers app's part
(`triggers/callbacks/`); here the field is read and checked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from workflows.engine.checks import listed
from workflows.engine.secrets import secret_env_problem

# The run events a callback may listen to: those a run stores in its log (DESIGN.md §4,
# `runner/event_schema.py`; a runner test keeps the two lists equal). Streamed text and tool
# calls are pushed as they come, never stored, so no callback can hear them.
CALLBACK_EVENT_TYPES: tuple[str, ...] = (
    "run.queued",
    "run.started",
    "run.status",
    "run.finished",
    "step.started",
    "step.finished",
    "branch.evaluated",
    "branch.taken",
    "human_task.created",
    "human_task.decided",
    "human_task.timed_out",
    "human_task.escalated",
    "human_task.closed",
)
MAX_CALLBACKS = 20
MAX_URL_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Callback:
    """One callback: the event types it listens to, where it posts, the secret's env var."""

    on: tuple[str, ...]
    url: str
    secret_env: str

    def listens_to(self, event_type: str) -> bool:
        """Tell whether an event of this type is sent to this callback."""
        return event_type in self.on

    def as_json(self) -> dict[str, Any]:
        """Return the callback as a recipe document writes it."""
        return {"on": list(self.on), "url": self.url, "secret_env": self.secret_env}


def parse_callbacks(value: object, error: Callable[[str, str], None]) -> tuple[Callback, ...]:
    """Read a recipe's `callbacks`; report each problem through `error(path, message)`."""
    if value is None:
        return ()
    if not isinstance(value, list):
        error("callbacks", f"must be a list of callbacks, got {type(value).__name__}")
        return ()
    if len(value) > MAX_CALLBACKS:
        error("callbacks", f"a recipe has at most {MAX_CALLBACKS} callbacks, got {len(value)}")
        return ()
    callbacks = []
    for i, doc in enumerate(value):
        callback = _callback(doc, f"callbacks[{i}]", error)
        if callback is not None:
            callbacks.append(callback)
    return tuple(callbacks)


def _callback(doc: object, path: str, error: Callable[[str, str], None]) -> Callback | None:
    if not isinstance(doc, Mapping):
        error(path, f"must be an object with on, url and secret_env, got {type(doc).__name__}")
        return None
    ok = True
    for key in doc:
        if key not in ("on", "url", "secret_env"):
            error(f"{path}.{key}", "unknown field; expected on, url and secret_env")
            ok = False
    on = _event_types(doc.get("on"), f"{path}.on", error)
    url_problem = url_problem_of(doc.get("url"))
    if url_problem:
        error(f"{path}.url", url_problem)
    secret_env = doc.get("secret_env")
    if secret_env is None:
        error(f"{path}.secret_env", "is required: the name of the env var holding the secret")
    elif problem := secret_env_problem(secret_env):
        # Not echoed: a secret pasted here by mistake must not show up in the error.
        error(f"{path}.secret_env", problem)
        secret_env = None
    if not ok or on is None or url_problem or not isinstance(secret_env, str):
        return None
    url = doc["url"]
    assert isinstance(url, str)
    return Callback(on=on, url=url, secret_env=secret_env)


def _event_types(
    value: object, path: str, error: Callable[[str, str], None]
) -> tuple[str, ...] | None:
    if value is None:
        error(path, 'is required: the event types to send, e.g. ["run.finished"]')
        return None
    if not isinstance(value, list) or not value:
        error(path, "must be a non-empty list of event types")
        return None
    types: list[str] = []
    ok = True
    for j, name in enumerate(value):
        if name not in CALLBACK_EVENT_TYPES:
            error(
                f"{path}[{j}]",
                f"unknown event type {name!r}; expected one of: {listed(CALLBACK_EVENT_TYPES)}",
            )
            ok = False
        elif name not in types:
            types.append(name)
    return tuple(types) if ok else None


def url_problem_of(url: object) -> str | None:
    """Return why `url` cannot be a callback's address, or None (where it may point is
    checked when it is called, by the SSRF guard)."""
    if url is None:
        return "is required"
    if not isinstance(url, str) or not url.strip():
        return "must be a non-empty URL"
    if len(url) > MAX_URL_CHARS:
        return f"must be at most {MAX_URL_CHARS} characters"
    if any(ord(char) <= 0x20 or ord(char) == 0x7F for char in url) or "\\" in url:
        return "must not contain whitespace, control characters or backslashes"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (reading it checks it)
    except ValueError as exc:
        return f"cannot be parsed: {exc}"
    if parts.scheme.lower() not in ("http", "https"):
        return f"scheme must be http or https, not {parts.scheme or 'missing'!r}"
    if not parts.hostname:
        return "has no host"
    if "@" in parts.netloc:
        return "must not contain credentials; the secret's env var is named by secret_env"
    if parts.fragment:
        return "must not have a fragment"
    return None
