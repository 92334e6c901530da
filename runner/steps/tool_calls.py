"""Call a tool for a step (a tool step, or an llm step's model), or take a dry run's script's
answer instead; record each call and push it live.

Each call is kept as the dict `StepRun.details["tool_calls"]` stores: `{"tool", "arguments",
"result" (text, capped), "is_error", "error"?, "truncated", "latency_ms"}` (plus
`"scripted": true` for a script's answer). `error` is set when the call could not be made
(unknown tool, refused arguments, server down or too slow); `is_error` alone when the tool
ran and reported a failure.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tools.client import ToolError, ToolSpec, call, result_max_chars
from tools.registry import coerce_arguments, resolve_tool, validate_arguments
from workflows import engine
from workflows.validators import storable

from .. import events, tracing
from .session import Session

# A dry run's script answers a tool under this prefix and its name: `tool.demo.add`.
SCRIPT_PREFIX = "tool."


def script_key(tool: str) -> str:
    """Return the key under which a dry run's script answers tool `tool` (SERVER.TOOL)."""
    return f"{SCRIPT_PREFIX}{tool}"


@dataclass
class ToolCallLog:
    """The calls one step execution made, in order, each pushed live as it ends; and when
    its tool loops must end (`time.monotonic()`), once the first has begun."""

    run_id: int
    seq: int
    calls: list[dict[str, Any]] = field(default_factory=list)
    deadline: float | None = None

    def add(self, record: dict[str, Any]) -> dict[str, Any]:
        # Kept on the StepRun: what a tool or a model sent must fit the database (a NaN or a
        # NUL would fail the step's commit, and the step would run again and again).
        record = storable(record)
        self.calls.append(record)
        events.push_tool_call(self.run_id, self.seq, record)
        return record


def scripted_answers(session: Session, tool: str) -> list[str] | None:
    """Return the script's answers for `tool`, or None when the run's script has none."""
    answers = (session.claim.script or {}).get(script_key(tool))
    if isinstance(answers, str):
        return [answers]
    return [str(a) for a in answers] if isinstance(answers, list) and answers else None


def spec_for(session: Session, tool: str) -> ToolSpec | None:
    """Return the tool's spec if its server is registered and lists it; None in a dry run
    that answers the tool from its script without one. Raise ToolError otherwise."""
    try:
        return resolve_tool(tool)[1]
    except ToolError:
        if scripted_answers(session, tool) is not None:
            return None
        raise


def call_tool(
    session: Session,
    log: ToolCallLog,
    tool: str,
    arguments: Mapping[str, Any],
    *,
    timeout_s: float | None,
    rendered: bool = False,
) -> dict[str, Any]:
    """Call `tool` with `arguments` (template text typed by the tool's schema when
    `rendered`), or answer from the script; record the call and return its record."""
    with tracing.tool_call_span(tool) as span:
        record = _call(session, log, tool, arguments, timeout_s=timeout_s, rendered=rendered)
        span.result(record)
    return record


def _call(
    session: Session,
    log: ToolCallLog,
    tool: str,
    arguments: Mapping[str, Any],
    *,
    timeout_s: float | None,
    rendered: bool,
) -> dict[str, Any]:
    answers = scripted_answers(session, tool)
    if answers is not None:
        return log.add(_scripted(session, tool, dict(arguments), answers))
    started = time.monotonic()
    sent: dict[str, Any] = dict(arguments)
    try:
        server, spec = resolve_tool(tool)
        if rendered:
            sent = coerce_arguments(spec, sent)
        validate_arguments(spec, sent)
        result = call(server, spec.name, sent, timeout_s=timeout_s)
    except ToolError as exc:
        return log.add(
            {
                "tool": tool,
                "arguments": sent,
                "result": "",
                "is_error": True,
                "error": str(exc),
                "truncated": False,
                "latency_ms": int((time.monotonic() - started) * 1000),
            }
        )
    return log.add(
        {
            "tool": tool,
            "arguments": sent,
            "result": result.text,
            "is_error": result.is_error,
            "truncated": result.truncated,
            "latency_ms": result.latency_ms,
        }
    )


def _scripted(
    session: Session, tool: str, arguments: dict[str, Any], answers: list[str]
) -> dict[str, Any]:
    """Answer a call from the script: its answers in order, the last repeating."""
    index = session.next_call(script_key(tool))
    answer = answers[min(index, len(answers) - 1)]
    record: dict[str, Any] = {"tool": tool, "arguments": arguments, "scripted": True}
    failure = engine.tool_script_failure(answer)
    if failure is not None:
        return {
            **record,
            "result": "",
            "is_error": True,
            "error": failure,
            "truncated": False,
            "latency_ms": 0,
        }
    cap = result_max_chars()
    return {
        **record,
        "result": answer[:cap],
        "is_error": False,
        "truncated": len(answer) > cap,
        "latency_ms": 0,
    }


def failure_of(record: Mapping[str, Any]) -> str | None:
    """Return why a recorded call failed (its error, or the tool's own error text), or None."""
    if record.get("error"):
        return str(record["error"])
    if record.get("is_error"):
        return f"{record['tool']} reported an error: {record.get('result') or 'no message'}"
    return None
