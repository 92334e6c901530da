"""`tool`: call one MCP tool with templated arguments; no model is called.

Its response is the tool's text; a JSON object overlays the run's facts, as an llm step's
answer does. A tool that fails (its server's error, or the tool's own) fails the step, unless
a branch asks about it (`tool_error`, `execution_error`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.field_spec import FieldSpec
from workflows.engine.reading import DocumentReader
from workflows.engine.step_kinds.base import StepKind
from workflows.engine.step_kinds.common import FAILURE_SEVERITY, TIMEOUT
from workflows.engine.tools import MAX_ARGUMENTS, tool_name_problem


def read_body(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> dict[str, Any]:
    """Read the tool's name and its arguments: each a template, rendered when the step runs."""
    name = doc.get("tool")
    tool = ""
    if name is None or name == "":
        reader.error(f"{path}.tool", "is required: the tool to call, as SERVER.TOOL")
    else:
        problem = tool_name_problem(name)
        if problem is not None:
            reader.error(f"{path}.tool", problem)
        else:
            tool = str(name)
    arguments: dict[str, str] = {}
    value = reader.mapping(doc.get("arguments"), f"{path}.arguments")
    if value is not None and len(value) > MAX_ARGUMENTS:
        reader.error(f"{path}.arguments", f"at most {MAX_ARGUMENTS} arguments, got {len(value)}")
        value = None
    for key, template in (value or {}).items():
        where = f"{path}.arguments.{key}"
        if not isinstance(key, str) or not key:
            reader.error(where, "an argument's name must be non-empty text")
        elif not isinstance(template, str):
            reader.error(where, f"must be a template (text), got {type(template).__name__}")
        else:
            reader.check_template(template, where)
            arguments[key] = template
    return {"tool": tool, "arguments": arguments}


STEP_KIND = StepKind(
    name="tool",
    label="Tool (call an MCP tool)",
    help=(
        "Calls one tool of a registered tool server, with no model call. Each argument is a "
        'template, rendered and then typed as the tool\'s schema says ("3" becomes 3 for a '
        "number). Its response is the tool's text; a JSON object overlays the run's facts."
    ),
    fields=(
        FieldSpec("tool", "Tool", "text", required=True, help="The tool, as SERVER.TOOL."),
        FieldSpec(
            "arguments",
            "Arguments",
            "text",
            help='JSON: an object of argument name: template ("{steps.ask}", "3").',
        ),
        TIMEOUT,
        FAILURE_SEVERITY,
    ),
    read_body=read_body,
    actor_kind=None,
)
