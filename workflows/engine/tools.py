"""Tools of a step: the MCP tools an llm step may call, the one a tool step calls, their calls.

Tools are named `SERVER.TOOL` (a tool server's slug, a dot, the tool's name). The runner calls
them; the engine reads the names and settings from the recipe (`read_tools`,
`read_tool_step`), checks the answers a dry run's script gives instead of a server
(`read_script_tool`), and turns a step's recorded calls into what conditions read
(`ToolCalls`). A recorded call is the dict `StepRun.details["tool_calls"]` stores:
`{"tool", "arguments", "result", "is_error", "error"?, "truncated", "latency_ms"}`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from workflows.engine.answers import strict_json
from workflows.engine.checks import is_int

# A server's slug (as `tools.models.ToolServer.name` accepts it), a dot, an MCP tool name.
TOOL_NAME = re.compile(r"([a-z0-9][a-z0-9_-]{0,99})\.([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})")
DEFAULT_MAX_TOOL_CALLS = 5
MAX_MAX_TOOL_CALLS = 50
DEFAULT_MAX_TOOL_SECONDS = 60
MAX_MAX_TOOL_SECONDS = 3600
# How many tools one llm step offers its model: each is described in every request.
MAX_TOOLS = 20
MAX_ARGUMENTS = 50
# Script answers per tool: enough for any test of a recipe.
MAX_SCRIPT_ANSWERS = 100
# A scripted tool answer that fails the call (the rest of the text is the message).
SCRIPT_ERROR_PREFIX = "@error"
# A scripted model reply that asks for tool calls: a JSON list of {"name", "arguments"}.
TOOL_CALLS_PREFIX = "@tool_calls:"
# OpenAI function names: letters, digits, `_` and `-`, at most 64; a tool's dot is spelt `__`.
_UNSAFE_IN_FUNCTION = re.compile(r"[^A-Za-z0-9_-]")
MAX_FUNCTION_NAME = 64


def function_name(tool: str) -> str:
    """Return the function name a model sees for tool `tool` (SERVER.TOOL)."""
    return _UNSAFE_IN_FUNCTION.sub("_", tool.replace(".", "__"))[:MAX_FUNCTION_NAME]


def tool_name_problem(value: object) -> str | None:
    """Return why `value` is not a tool name `SERVER.TOOL`, or None."""
    if not isinstance(value, str):
        return f"must be a tool name SERVER.TOOL, got {type(value).__name__}"
    if not TOOL_NAME.fullmatch(value):
        return (
            f"must be a tool name SERVER.TOOL (a tool server's slug, a dot, the tool's name), "
            f"got {value!r}"
        )
    return None


def split_tool_name(name: str) -> tuple[str, str]:
    """Return (server, tool) of a valid tool name."""
    server, _, tool = name.partition(".")
    return server, tool


def tools_problem(value: object) -> str | None:
    """Return why an llm step's `tools` is not a list of tool names, or None."""
    if not isinstance(value, list):
        return f"must be a list of tool names SERVER.TOOL, got {type(value).__name__}"
    if len(value) > MAX_TOOLS:
        return f"a step offers at most {MAX_TOOLS} tools, got {len(value)}"
    return None


def bounded_int(value: object, default: int, low: int, high: int) -> tuple[int, str | None]:
    """Return `value` (its default when None) and why it is not a whole number low..high."""
    if value is None:
        return default, None
    if not is_int(value) or not low <= value <= high:  # type: ignore[operator]
        return default, f"must be a whole number from {low} to {high}, got {value!r}"
    return int(value), None  # type: ignore[call-overload]


# -- a dry run's scripted tool answers --------------------------------------------------


def read_script_tool(value: object, path: str) -> tuple[list[str], list[str]]:
    """Check a script's answers for one tool: texts (or JSON values), used in order.

    `"@error: message"` fails that call. A JSON value that is not text is kept as its JSON
    text, as a server would answer it. Return the answers and every problem as `path: message`.
    """
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        return [], [f"{path}: must be a non-empty list of answers (text or JSON)"]
    if len(value) > MAX_SCRIPT_ANSWERS:
        return [], [f"{path}: at most {MAX_SCRIPT_ANSWERS} answers, got {len(value)}"]
    answers: list[str] = []
    errors: list[str] = []
    for i, answer in enumerate(value):
        if isinstance(answer, str):
            answers.append(answer)
        elif answer is None:
            errors.append(f"{path}[{i}]: must be text or JSON, got null")
        else:
            answers.append(json.dumps(answer))
    return answers, errors


def scripted_failure(answer: str) -> str | None:
    """Return the message of a scripted failing answer (`@error: why`), else None."""
    if not answer.startswith(SCRIPT_ERROR_PREFIX):
        return None
    return answer.removeprefix(SCRIPT_ERROR_PREFIX).lstrip(": ").strip() or "scripted failure"


def json_data(text: str) -> Any | None:
    """Return the JSON value a tool's text holds, or None when it is not JSON (`NaN` and
    `Infinity` included: JSON has no such numbers)."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        return strict_json(stripped)
    except (ValueError, RecursionError):
        return None


# -- what conditions read ---------------------------------------------------------------


class ToolCalls:
    """A step's recorded tool calls, indexed by tool on first use (most steps call none)."""

    __slots__ = ("_by_tool", "calls")

    def __init__(self, calls: Sequence[Mapping[str, Any]]) -> None:
        self.calls = calls
        self._by_tool: dict[str, list[Mapping[str, Any]]] | None = None

    def of(self, tool: str | None) -> list[Mapping[str, Any]]:
        """Return the calls of `tool` in order (every call when `tool` is None or "")."""
        if not tool:
            return list(self.calls)
        if self._by_tool is None:
            self._by_tool = {}
            for call in self.calls:
                self._by_tool.setdefault(str(call.get("tool", "")), []).append(call)
        return self._by_tool.get(tool, [])

    @staticmethod
    def failed(call: Mapping[str, Any]) -> bool:
        """Tell whether a recorded call failed (the server's error, or the tool's own)."""
        return bool(call.get("is_error")) or bool(call.get("error"))

    @staticmethod
    def message(call: Mapping[str, Any]) -> str:
        """Return why a failed call failed."""
        return str(call.get("error") or call.get("result") or "error")
