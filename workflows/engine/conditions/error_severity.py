"""`error_severity`: the step failed with a severity (or one of several).

A failed step has one severity (`workflows/engine/severity.py`): RETRIABLE when the failure
was transient, RECLASSIFICATION when its classifier gave no readable answer, else the step's
`failure_severity` (default CRITICAL). A branch taken on RECLASSIFICATION must go to a
classify step and one on REPLANNING to an earlier step, which the failure is sent back to as
its feedback (`target_errors`, checked at save; `target_warnings` for a planning step that
does not show it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from workflows.engine.answers import shorten
from workflows.engine.conditions.base import ConditionScope, ConditionType, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.errors import TemplateError
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import BranchSpec, Condition, RecipeGraph, StepSpec
from workflows.engine.severity import (
    CLASSIFY,
    CONDITION,
    RECLASSIFICATION,
    REPLANNING,
    SEVERITIES,
)
from workflows.engine.templating import template_names

_ERROR_SHOWN = 80


def severities(value: object) -> tuple[str, ...] | None:
    """Return the severities a value names (one, a list, or `A|B`), upper-cased and in
    their canonical order; None when it names none or something else."""
    parts = value if isinstance(value, list | tuple) else str(value or "").split("|")
    if not all(isinstance(p, str) for p in parts):
        return None
    named = {p.strip().upper() for p in parts if p.strip()}
    if not named or not named <= set(SEVERITIES):
        return None
    return tuple(s for s in SEVERITIES if s in named)


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the severity (equals) or severities (in) named."""
    named = severities(value) if isinstance(value, str | list) else None
    if named is None:
        what = "a severity" if op == "equals" else "one or more severities (a list, or A|B)"
        scope.error(f"{path}.value", f"must name {what} of: {', '.join(SEVERITIES)}")
        return False, None
    if op == "equals" and len(named) != 1:
        scope.error(f"{path}.value", "names several severities: use the operator `in`")
        return False, None
    return True, named[0] if op == "equals" else list(named)


def prepare(condition: Condition) -> object:
    """Return the severities named, as a set."""
    return frozenset(severities(condition.value) or ())


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Tell whether the step failed with one of the severities named, and which one."""
    severity = ctx.severity
    if severity is None:
        return False, "step did not fail"
    error = f": {shorten(ctx.error, _ERROR_SHOWN)}" if ctx.error else ""
    if severity in prepared:
        return True, f"severity {severity}{error}"
    return False, f"severity {severity}, not {'|'.join(sorted(prepared))}{error}"


CONDITION_TYPE = ConditionType(
    name=CONDITION,
    label="Error severity",
    help="The step failed with this severity: RETRIABLE (transient: a timeout, a connection "
    "error, a provider's 429 or 5xx), RECLASSIFICATION (the classifier gave no readable "
    "answer, or the step says so), REPLANNING or CRITICAL (the step's `failure_severity`, "
    "default CRITICAL). Taken on RECLASSIFICATION the branch must go to a classify step, on "
    "REPLANNING to an earlier step: the failure becomes that step's {feedback}.",
    operators=(Operator("equals", "is", "="), Operator("in", "is one of", "∈")),
    fields=(
        FieldSpec(
            "value",
            "Severity",
            "text",
            required=True,
            help=f"One of {', '.join(SEVERITIES)}; with `in`, several: a list or A|B.",
        ),
    ),
    summary={"in": "severity ∈ {value}", "*": "severity {value}"},
    check=check,
    prepare=prepare,
    evaluate=evaluate,
    asks_about_failure=True,
)


def _named(condition: Condition) -> set[str]:
    """Return the severities the branch's condition asks for (not those under a `not`)."""
    if condition.type == CONDITION:
        return set(severities(condition.value) or ())
    if condition.type == "not":
        return set()
    return set().union(*(_named(c) for c in condition.conditions))


def _sending_back(graph: RecipeGraph) -> Iterator[tuple[int, StepSpec, BranchSpec, set[str]]]:
    """Yield each branch that asks for RECLASSIFICATION or REPLANNING, with its step's index."""
    for i, step in enumerate(graph.steps):
        for branch in step.branches:
            named = _named(branch.when) & {RECLASSIFICATION, REPLANNING}
            if named:
                yield i, step, branch, named


def _target_path(i: int, step: StepSpec, branch: BranchSpec) -> str:
    index = branch.source_index if branch.source_index is not None else step.branches.index(branch)
    return f"steps[{i}].branches[{index}].target"


def target_errors(graph: RecipeGraph) -> list[str]:
    """Return the branches taken on RECLASSIFICATION that go to no classify step, and those
    taken on REPLANNING that go to no earlier step: the failure could not be sent back."""
    errors: list[str] = []
    for i, step, branch, named in _sending_back(graph):
        path, target = _target_path(i, step, branch), branch.target
        known = graph.has_step(target)
        if RECLASSIFICATION in named and not (known and graph.step(target).kind == CLASSIFY):
            errors.append(
                f"{path}: taken on RECLASSIFICATION, the branch must go to a classify step "
                f"(it runs again with the failure), got '{target}'"
            )
        if REPLANNING in named and not (known and graph.index(target) < i):
            errors.append(
                f"{path}: taken on REPLANNING, the branch must go back to an earlier step "
                f"(it plans again with the failure as its {{feedback}}), got '{target}'"
            )
    return errors


def target_warnings(graph: RecipeGraph) -> list[str]:
    """Warn about a REPLANNING branch whose target's prompt does not name `{feedback}`: the
    failure sent back is not shown to it."""
    warnings: list[str] = []
    for i, step, branch, named in _sending_back(graph):
        if REPLANNING not in named or not graph.has_step(branch.target):
            continue
        target = graph.step(branch.target)
        if target.kind == CLASSIFY:
            continue  # a classifier is told of the failure in its question
        try:
            shown = "feedback" in template_names(target.prompt)
        except TemplateError:
            continue  # refused at parse
        if not shown:
            warnings.append(
                f"{_target_path(i, step, branch)}: step '{target.key}' does not name "
                "{feedback} in its prompt: the failure sent back to it is not shown"
            )
    return warnings
