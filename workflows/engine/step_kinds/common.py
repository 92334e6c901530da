"""The step fields several kinds share: actor, prompt, timeout, failure severity, sources,
tools."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.capabilities import CAPABILITIES, CONTEXT, Capabilities, parse_capabilities
from workflows.engine.field_spec import FieldSpec
from workflows.engine.reading import DocumentReader
from workflows.engine.severity import CRITICAL, SEVERITIES, severity_problem
from workflows.engine.sources import (
    DEFAULT_MIN_SCORE,
    DEFAULT_MODE,
    DEFAULT_TOP_K,
    MAX_TOP_K,
    SourceSpec,
    source_problems,
    sources_problem,
)
from workflows.engine.tools import (
    DEFAULT_MAX_TOOL_CALLS,
    DEFAULT_MAX_TOOL_SECONDS,
    MAX_MAX_TOOL_CALLS,
    MAX_MAX_TOOL_SECONDS,
    bounded_int,
    function_name,
    tool_name_problem,
    tools_problem,
)

TIMEOUT = FieldSpec(
    "timeout_s", "Timeout (seconds)", "integer", help="How long the step may take; at least 1."
)
FAILURE_SEVERITY = FieldSpec(
    "failure_severity",
    "Failure severity",
    "choice",
    choices=SEVERITIES,
    default=CRITICAL,
    help=(
        "What the step's failures are, for error_severity branches (a transient failure is "
        "RETRIABLE whatever this says): RECLASSIFICATION asks a classify step again, "
        "REPLANNING goes back to an earlier step, with the failure as feedback."
    ),
)
SOURCES_HELP = (
    "JSON: a list of {knowledge_base, query, top_k, min_score, mode}: the knowledge bases "
    f"searched (top_k 1 to {MAX_TOP_K}, default {DEFAULT_TOP_K}; min_score 0 to 1, default "
    f"{DEFAULT_MIN_SCORE:g}; mode fulltext, semantic or hybrid, default {DEFAULT_MODE})."
)


def actor(help_text: str) -> FieldSpec:
    """Return the spec of a kind's required `actor` field."""
    return FieldSpec("actor", "Actor", "actor", required=True, help=help_text)


def prompt(label: str, help_text: str = "") -> FieldSpec:
    """Return the spec of a kind's `prompt` template."""
    return FieldSpec("prompt", label, "template", help=help_text)


REQUIRES = FieldSpec(
    "requires",
    "Requires",
    "list",
    help=(
        f"What the actor must be able to do: any of {', '.join(CAPABILITIES)}, and "
        f'{{"{CONTEXT}": TOKENS}} for the least context window. Checked at publish, and a '
        "retry or the learner skips an actor that lacks one."
    ),
)


def read_requires(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> Capabilities:
    """Read a step's `requires` (empty: it needs nothing of its actor)."""
    requires, problems = parse_capabilities(doc.get("requires"))
    for where, message in problems:
        reader.error(f"{path}.requires{where}", message)
    return requires


def read_failure_severity(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> str | None:
    """Read a step's `failure_severity` (None: not set, its failures are CRITICAL)."""
    value = doc.get("failure_severity")
    if value is None:
        return None
    problem = severity_problem(value)
    if problem is not None:
        reader.error(f"{path}.failure_severity", problem)
        return None
    return str(value)


def sources(help_text: str, *, required: bool = False) -> FieldSpec:
    """Return the spec of a kind's `sources` (the knowledge bases it searches)."""
    return FieldSpec(
        "sources", "Sources", "text", required=required, help=f"{help_text} {SOURCES_HELP}"
    )


def read_sources(
    doc: Mapping[str, Any], path: str, reader: DocumentReader, *, required: bool = False
) -> tuple[SourceSpec, ...]:
    """Read a step's `sources`: each search's base, query template, top_k, min_score, mode.

    A query's template may name what the step's prompt may, except the hits themselves.
    """
    path = f"{path}.sources"
    value = doc.get("sources")
    if value is None or value == []:
        if required:
            reader.error(path, "is required: a list of at least one knowledge base to search")
        return ()
    problem = sources_problem(value)
    if problem is not None:
        reader.error(path, problem)
        return ()
    specs: list[SourceSpec] = []
    for i, item in enumerate(value):
        spec, problems = source_problems(item, f"{path}[{i}]")
        for where, message in problems:
            reader.error(where, message)
        query = item.get("query") if isinstance(item, Mapping) else None
        if isinstance(query, str):
            reader.check_template(query, f"{path}[{i}].query", hits=False)
        if spec is not None:
            specs.append(spec)
    return tuple(specs)


def read_tools(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> dict[str, Any]:
    """Read an llm step's `tools` (names SERVER.TOOL), `max_tool_calls`, `max_tool_seconds`.

    Whether each tool exists is the runner's to tell: servers are registered, and their tools
    discovered, apart from recipes.
    """
    value = doc.get("tools")
    names: list[str] = []
    functions: dict[str, str] = {}
    if value not in (None, []):
        problem = tools_problem(value)
        if problem is not None or not isinstance(value, list):
            reader.error(f"{path}.tools", problem or "must be a list")
        else:
            for i, name in enumerate(value):
                problem = tool_name_problem(name)
                if problem is not None:
                    reader.error(f"{path}.tools[{i}]", problem)
                elif name in names:
                    reader.error(f"{path}.tools[{i}]", f"{name} is listed twice")
                elif function_name(name) in functions:
                    # The model names the tool it calls by its function name: two tools
                    # under one name could not be told apart.
                    reader.error(
                        f"{path}.tools[{i}]",
                        f"{name} and {functions[function_name(name)]} reach the model under "
                        f"the same function name {function_name(name)}; offer one of them",
                    )
                else:
                    names.append(name)
                    functions[function_name(name)] = name
    calls, problem = bounded_int(
        doc.get("max_tool_calls"), DEFAULT_MAX_TOOL_CALLS, 1, MAX_MAX_TOOL_CALLS
    )
    if problem is not None:
        reader.error(f"{path}.max_tool_calls", problem)
    seconds, problem = bounded_int(
        doc.get("max_tool_seconds"), DEFAULT_MAX_TOOL_SECONDS, 1, MAX_MAX_TOOL_SECONDS
    )
    if problem is not None:
        reader.error(f"{path}.max_tool_seconds", problem)
    return {"tools": tuple(names), "max_tool_calls": calls, "max_tool_seconds": seconds}


TOOLS = FieldSpec(
    "tools",
    "Tools",
    "list",
    help=(
        "The tools (SERVER.TOOL) the model may call while it answers; it sees each tool's "
        "description and gets each result back."
    ),
)
MAX_TOOL_CALLS = FieldSpec(
    "max_tool_calls",
    "Most tool calls",
    "integer",
    default=DEFAULT_MAX_TOOL_CALLS,
    help=(
        f"1 to {MAX_MAX_TOOL_CALLS}: once the model has made this many calls it is asked once "
        "more, without tools, for its answer."
    ),
)
MAX_TOOL_SECONDS = FieldSpec(
    "max_tool_seconds",
    "Tool time (seconds)",
    "integer",
    default=DEFAULT_MAX_TOOL_SECONDS,
    help="How long the model and its tool calls may take in all before the step fails.",
)
