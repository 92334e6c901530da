"""`human`: a reviewer group decides; the run waits for the decision."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.field_spec import FieldSpec
from workflows.engine.reading import DocumentReader
from workflows.engine.step_kinds.base import StepKind
from workflows.engine.step_kinds.common import FAILURE_SEVERITY, TIMEOUT, actor, prompt
from workflows.engine.vocabulary import DEFAULT_HUMAN_OPTIONS


def read_head(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> dict[str, Any]:
    """Read the options, which the step's human_decision branches are checked against."""
    path = f"{path}.options"
    value = doc.get("options")
    if value is None:
        return {"options": DEFAULT_HUMAN_OPTIONS}
    if not isinstance(value, list) or not value:
        reader.error(path, "must be a non-empty list of option names")
        return {"options": DEFAULT_HUMAN_OPTIONS}
    options: list[str] = []
    for i, option in enumerate(value):
        if not isinstance(option, str) or not option.strip() or "|" in option:
            reader.error(f"{path}[{i}]", "must be a non-empty name without '|'")
        elif option.strip().lower() in options:
            reader.error(f"{path}[{i}]", f"duplicate option '{option}'")
        else:
            options.append(option.strip().lower())
    return {"options": tuple(options) or DEFAULT_HUMAN_OPTIONS}


def read_body(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> dict[str, Any]:
    """Read the material template reviewers read beside the question, and the escalation."""
    material = reader.text(doc, "material", f"{path}.material") or ""
    reader.check_template(material, f"{path}.material")
    # An empty alias is no escalation, as it always was; that it names a reviewer group is
    # checked where actors are known (workflows/validators.py).
    escalate_to = reader.actor_alias(doc.get("escalate_to") or None, f"{path}.escalate_to")
    return {"material": material, "escalate_to": escalate_to}


# Where a reviewer's comment goes (next_step.with_reviewer_comment), as the step kind's help, the
# inbox and docs/recipe-format.md say it.
COMMENT_REACHES = (
    "the comment becomes the {feedback} of the step the run goes to next "
    "(the writer's, on a revise branch)"
)

STEP_KIND = StepKind(
    name="human",
    label="Human review",
    help=(
        "A reviewer group decides; the run waits until one of them does or time runs out; "
        f"{COMMENT_REACHES}."
    ),
    fields=(
        actor("The reviewer group (an alias of @human:GROUP)."),
        prompt("Question"),
        FieldSpec(
            "material",
            "Material",
            "template",
            help="What reviewers read beside the question (default: the previous answer).",
        ),
        FieldSpec(
            "options",
            "Options",
            "list",
            default=DEFAULT_HUMAN_OPTIONS,
            help="The decisions a reviewer may take.",
        ),
        TIMEOUT,
        FAILURE_SEVERITY,
        FieldSpec(
            "escalate_to",
            "Escalate to",
            "actor",
            help="A reviewer group (an alias of @human:GROUP) that gets the task once when it "
            "is overdue.",
        ),
    ),
    read_head=read_head,
    read_body=read_body,
    actor_kind="reviewers",
)
