"""The model-driven tool loop of an llm step with `tools`, in the OpenAI chat format.

The model gets the prompt and the step's tools (each as a function: its description and input
schema). While it answers with tool calls, each is made (`tool_calls.call_tool`) and its
result sent back as a `tool` message, and the model is asked again. The loop is bounded:

- after `max_tool_calls` calls the model is asked once more without tools, for its answer;
  a model that still asks for tools then fails the step, saying so;
- the model's calls and the tools' together may take `max_tool_seconds` (wall clock): each
  call gets what is left, and the step times out when nothing is.

Both bounds are the step's, kept on its `ToolCallLog`: a validation loop that runs the loop
once per attempt shares them between its attempts, so a step never makes more than
`max_tool_calls` calls nor takes more than `max_tool_seconds` in its tool loops.

A call the model gets wrong (a tool it was not given, arguments that are not a JSON object,
arguments the tool's schema refuses) is answered with the error, for the model to correct,
and recorded like any call: it is not a crash of the step. Tokens are summed over the loop.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tools.client import ToolError
from workflows import engine
from workflows.engine import strict_json

from .. import actors
from ..providers import ChatResult, ProviderTimeoutError, ToolCallRequest
from .session import Session
from .tool_calls import ToolCallLog, call_tool, failure_of, spec_for


class ToolLoopFailed(Exception):
    """The loop cannot go on (a tool of the step is unknown, the model will not stop)."""


@dataclass
class LoopResult:
    """The model's final answer and what the whole loop cost."""

    text: str
    tokens_in: int | None
    tokens_out: int | None


def offered_tools(session: Session, tools: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
    """Return the step's tools as functions for the model; ToolLoopFailed names one that is
    unknown (a dry run's scripted tool without a server is offered without a schema)."""
    functions = []
    for i, tool in enumerate(tools):
        try:
            spec = spec_for(session, tool)
        except ToolError as exc:
            raise ToolLoopFailed(f"tools[{i}]: {exc}") from None
        functions.append(
            {
                "type": "function",
                "function": {
                    "name": engine.tool_function_name(tool),
                    "description": spec.description if spec else "",
                    "parameters": spec.input_schema if spec else {"type": "object"},
                },
            }
        )
    return tuple(functions)


def run_tool_loop(
    session: Session, alias: str, prompt: str, log: ToolCallLog, *, on_token: Any = None
) -> LoopResult:
    """Answer `prompt` with the step's model, calling the tools it asks for; return its answer.

    Raise ToolLoopFailed, ProviderError, or ProviderTimeoutError when `max_tool_seconds` runs
    out. Each call is recorded in `log` (and pushed live) as it ends.
    """
    step = session.claim.step
    functions = offered_tools(session, step.tools)
    by_name = {engine.tool_function_name(t): t for t in step.tools} | {t: t for t in step.tools}
    limit_s = float(step.max_tool_seconds)
    if log.deadline is None:
        log.deadline = time.monotonic() + limit_s
    deadline = log.deadline
    per_call = float(step.timeout_s or actors.default_timeout(session.resolve(alias)))
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    tokens = [0, 0]
    counted = [False, False]
    while True:
        capped = len(log.calls) >= step.max_tool_calls
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _out_of_time(limit_s, log)
        result = session.ask(
            alias,
            prompt,
            purpose="tool_turn",
            timeout_s=min(per_call, remaining),
            # Text is streamed only once no tool is offered: a tool-calling answer has none.
            on_token=on_token if capped else None,
            messages=tuple(messages),
            tools=None if capped else functions,
            images=session.images,
        )
        _count(result, tokens, counted)
        if not result.tool_calls:
            return LoopResult(
                result.text,
                tokens[0] if counted[0] else None,
                tokens[1] if counted[1] else None,
            )
        if capped:
            raise ToolLoopFailed(
                f"the model asked for tools again after its {step.max_tool_calls} tool calls "
                "(max_tool_calls) were used up, instead of answering"
            )
        messages.append(_assistant(result))
        for request in result.tool_calls:
            messages.append(_answer(session, log, request, by_name, deadline, limit_s))


def _answer(
    session: Session,
    log: ToolCallLog,
    request: ToolCallRequest,
    by_name: Mapping[str, str],
    deadline: float,
    limit_s: float,
) -> dict[str, Any]:
    """Make one call the model asked for (or say why not); return the `tool` message."""
    step = session.claim.step
    if len(log.calls) >= step.max_tool_calls:
        # Every call the model asked for needs an answer in the protocol; this one is not made.
        content = f"not called: the limit of {step.max_tool_calls} tool calls is reached"
        return {"role": "tool", "tool_call_id": request.id, "content": content}
    tool = by_name.get(request.name)
    arguments = _arguments(request.arguments)
    if tool is None or arguments is None:
        why = (
            f"the step offers no tool '{request.name}' (it offers: {', '.join(step.tools)})"
            if tool is None
            else "the arguments are not a JSON object"
        )
        record = log.add(
            {
                "tool": tool or request.name,
                "arguments": arguments if arguments is not None else {"raw": request.arguments},
                "result": "",
                "is_error": True,
                "error": why,
                "truncated": False,
                "latency_ms": 0,
            }
        )
    else:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _out_of_time(limit_s, log)
        record = call_tool(session, log, tool, arguments, timeout_s=remaining)
    failure = failure_of(record)
    content = f"error: {failure}" if failure is not None else record["result"]
    return {"role": "tool", "tool_call_id": request.id, "content": content}


def _arguments(text: str) -> dict[str, Any] | None:
    try:
        value = strict_json(text) if text.strip() else {}
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _assistant(result: ChatResult) -> dict[str, Any]:
    """Return the model's tool-calling answer as the assistant message sent back to it."""
    return {
        "role": "assistant",
        "content": result.text or None,
        "tool_calls": [_tool_call(call) for call in result.tool_calls],
    }


def _tool_call(call: ToolCallRequest) -> dict[str, Any]:
    message: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }
    if call.extra_content:
        message["extra_content"] = call.extra_content  # for the model's API (a signature)
    return message


def _count(result: ChatResult, tokens: list[int], counted: list[bool]) -> None:
    for i, value in enumerate((result.tokens_in, result.tokens_out)):
        if value is not None:
            tokens[i] += value
            counted[i] = True


def _out_of_time(limit_s: float, log: ToolCallLog) -> ProviderTimeoutError:
    made = len(log.calls)
    return ProviderTimeoutError(
        f"the model and its tools did not finish within max_tool_seconds {limit_s:g} s "
        f"({made} tool call{'s' if made != 1 else ''} made)"
    )
