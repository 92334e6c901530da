"""Tool steps: call one MCP tool with the step's arguments, rendered; no actor is asked.

The response is the tool's text (a JSON object overlays the run's facts, as any step's does).
A call that fails fails the step with its message; a branch asking `tool_error` (or
`execution_error`) can handle it. The call is kept in `details["tool_calls"]`.
"""

from __future__ import annotations

import json

from workflows import engine

from ..claims import StepOutcome
from ..status import StepStatus
from .session import Session
from .tool_calls import ToolCallLog, call_tool, failure_of

KIND = "tool"


def execute(session: Session) -> StepOutcome:
    claim = session.claim
    step = claim.step
    outcome = StepOutcome(status=StepStatus.SUCCEEDED)
    try:
        arguments = {name: session.render(t) for name, t in step.arguments.items()}
    except engine.TemplateError as exc:
        outcome.status, outcome.error = StepStatus.FAILED, str(exc)
        return outcome
    outcome.prompt = f"{step.tool} {json.dumps(arguments, ensure_ascii=False)}"
    log = ToolCallLog(claim.run_id, claim.seq)
    record = call_tool(session, log, step.tool, arguments, timeout_s=step.timeout_s, rendered=True)
    outcome.details["tool_calls"] = log.calls
    outcome.tool_calls = tuple(log.calls)
    outcome.latency_ms = record["latency_ms"]
    failure = failure_of(record)
    if failure is not None:
        outcome.status, outcome.error = StepStatus.FAILED, failure
        return outcome
    outcome.response = record["result"]
    return outcome
