"""The payload of every run event type: its keys and the JSON types of their values.

The event log is read by the monitor page, the editor's test run, the CLI and API clients
(DESIGN.md §4 and §5), so a payload's keys may be added to, never renamed. The builders in
`runner.events` make the payloads; the runner's tests check every event they see against this
schema (as Zulip's `event_schema.py` checks its events), so that a builder and its readers cannot
drift apart unnoticed. Change both together, and the monitor's JS if it reads the key.
"""

from __future__ import annotations

from types import UnionType
from typing import Any

from .events import Event

Schema = dict[str, type | UnionType]

TASK: Schema = {
    "id": int,
    "run": int,
    "step": str,
    "group": str | None,
    "question": str,
    "material": str,
    "options": list,
    "due_at": str | None,  # ISO 8601
    "status": str,
    "decision": str,
    "comment": str,
    "decided_by": str | None,  # a username
    "claimed_by": str | None,  # a username: who said they are on it
    "claimed_at": str | None,  # ISO 8601
}

RUN_STATUS: Schema = {"status": str}

EVENT_SCHEMAS: dict[str, Schema] = {
    "run.queued": {"status": str, "version": int},
    "run.started": RUN_STATUS,
    "run.status": RUN_STATUS,
    "run.finished": {"status": str, "outcome": str, "error": str},
    "step.started": {
        "seq": int,
        "step": str,
        "name": str,
        "kind": str,
        "actor": str | None,
        "attempt": int,
    },
    "step.token": {"seq": int, "text": str, "offset": int},  # streamed, never stored
    "step.tool_call": {  # pushed as each call ends, never stored (details["tool_calls"] is)
        "seq": int,
        "tool": str,
        "arguments": dict,
        "result": str,
        "is_error": bool,
        "error": str | None,
        "truncated": bool,
        "latency_ms": int | None,
    },
    "step.finished": {
        "seq": int,
        "step": str,
        "attempt": int,
        "status": str,
        "response": str,
        "decision": str,
        "error": str,
        "latency_ms": int | None,
        "tokens_in": int | None,
        "tokens_out": int | None,
        "confidence": float | None,
        "details": dict,
    },
    "branch.evaluated": {
        "seq": int,
        "step": str,
        "branch": str,
        "priority": int,
        "matched": bool,
        "taken": bool,
        "reason": str,
    },
    "branch.taken": {
        "seq": int,
        "step": str,
        "branch": str | None,  # None: the sequential fallback
        "action": str | None,
        "kind": str,
        "next_step": str | None,
        "reason": str,
        "delay_s": float,  # the seconds the retry waits in the queue (0: none)
        "resume_at": str | None,  # ISO 8601: when the step runs again, if it waits
    },
    "human_task.created": TASK,
    "human_task.decided": TASK,
    "human_task.timed_out": TASK,
    "human_task.escalated": TASK,
    "human_task.closed": TASK,
}


def event_problems(event: Event) -> list[str]:
    """Return what is wrong with the event's type and payload (nothing for a good one)."""
    schema = EVENT_SCHEMAS.get(event.type)
    if schema is None:
        return [f"{event.type}: not an event type"]
    problems = [f"{event.type}.{key}: missing" for key in schema if key not in event.data]
    problems += [
        f"{event.type}.{key}: not in the schema" for key in event.data if key not in schema
    ]
    problems += [
        f"{event.type}.{key}: {value!r} is not {expected}"
        for key, expected in schema.items()
        if key in event.data and not _is(value := event.data[key], expected)
    ]
    return problems


def _is(value: Any, expected: type | UnionType) -> bool:
    # bool is an int to isinstance, but not to the JSON readers of a count or a seq.
    if isinstance(value, bool):
        return expected is bool or (isinstance(expected, UnionType) and bool in expected.__args__)
    return isinstance(value, expected)
