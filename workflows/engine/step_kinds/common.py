"""The step fields several kinds share: actor, prompt, timeout."""

from __future__ import annotations

from workflows.engine.field_spec import FieldSpec

TIMEOUT = FieldSpec(
    "timeout_s", "Timeout (seconds)", "integer", help="How long the step may take; at least 1."
)


def actor(help_text: str) -> FieldSpec:
    """Return the spec of a kind's required `actor` field."""
    return FieldSpec("actor", "Actor", "actor", required=True, help=help_text)


def prompt(label: str, help_text: str = "") -> FieldSpec:
    """Return the spec of a kind's `prompt` template."""
    return FieldSpec("prompt", label, "template", help=help_text)
