"""`llm`: a model answers the rendered prompt, optionally checked by the validation loop."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.checks import is_int, is_number
from workflows.engine.field_spec import FieldSpec
from workflows.engine.reading import DocumentReader
from workflows.engine.step_kinds.base import StepKind
from workflows.engine.step_kinds.common import (
    MAX_TOOL_CALLS,
    MAX_TOOL_SECONDS,
    TIMEOUT,
    TOOLS,
    actor,
    prompt,
    read_sources,
    read_tools,
    sources,
)

DEFAULT_THRESHOLD = 0.75
DEFAULT_MAX_ATTEMPTS = 5


def read_body(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> dict[str, Any]:
    """Read the sources searched before the call, the tools, and the validation settings."""
    return {
        "sources": read_sources(doc, path, reader),
        **read_tools(doc, path, reader),
        "validation": _validation(doc, path, reader),
    }


def _validation(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> Any:
    """Read the validation settings, defaults filled in (None: the step is not validated)."""
    path = f"{path}.validation"
    settings = reader.mapping(doc.get("validation"), path)
    if settings is None:
        return None
    threshold = settings.get("threshold", DEFAULT_THRESHOLD)
    if not is_number(threshold) or not 0 <= threshold <= 1:
        reader.error(f"{path}.threshold", f"must be a number from 0 to 1, got {threshold!r}")
        threshold = DEFAULT_THRESHOLD
    attempts = settings.get("max_attempts", DEFAULT_MAX_ATTEMPTS)
    if not is_int(attempts) or attempts < 1:
        reader.error(f"{path}.max_attempts", f"must be a whole number >= 1, got {attempts!r}")
        attempts = DEFAULT_MAX_ATTEMPTS
    judge = reader.actor_alias(settings.get("judge"), f"{path}.judge")
    fallback = reader.text(settings, "fallback", f"{path}.fallback") or ""
    return {
        "threshold": threshold,
        "max_attempts": attempts,
        "judge": judge,
        "fallback": fallback,
    }


STEP_KIND = StepKind(
    name="llm",
    label="LLM",
    help="A model answers the rendered prompt.",
    fields=(
        actor("The model alias that answers."),
        prompt("Prompt"),
        TIMEOUT,
        sources(
            "Searched before the call; the prompt shows the hits where it names {sources}, "
            "else under a Sources: heading at its end."
        ),
        TOOLS,
        MAX_TOOL_CALLS,
        MAX_TOOL_SECONDS,
        FieldSpec(
            "validation.threshold",
            "Validation threshold",
            "number",
            default=DEFAULT_THRESHOLD,
            help="Validate the response: retry while its confidence (0 to 1) is below this.",
        ),
        FieldSpec(
            "validation.max_attempts",
            "Validation attempts",
            "integer",
            default=DEFAULT_MAX_ATTEMPTS,
        ),
        FieldSpec("validation.judge", "Validation judge", "actor"),
        FieldSpec(
            "validation.fallback",
            "Fallback text",
            "text",
            help="Replaces the response when no attempt is confident enough.",
        ),
    ),
    read_body=read_body,
    article="an",
)
