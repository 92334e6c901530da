"""`cites_source`: the response cites, as `[n]`, one of the hits the step worked with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workflows.engine.conditions.base import ConditionScope, ConditionType, ConditionUse, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.hits import lint_for
from workflows.engine.conditions.retrieval import NO_SEARCH
from workflows.engine.graph import Condition, StepSpec
from workflows.engine.sources import cited_numbers

_lint_hits = lint_for("cites_source")


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Accept any value: the operator says it all (the value is dropped)."""
    return True, None


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Find the citation markers of the response that name a hit; say which, and which not."""
    hits = ctx.found()
    if hits is None:
        return False, NO_SEARCH
    cited = cited_numbers(ctx.scanned())
    named = [n for n in cited if 1 <= n <= len(hits)]
    stray = [n for n in cited if not 1 <= n <= len(hits)]
    count = f"{len(hits)} hit{'' if len(hits) == 1 else 's'}"
    parts = []
    if named:
        parts.append(f"cites {_markers(named)}")
    if stray:
        verb = "names" if len(stray) == 1 else "name"
        parts.append(f"{_markers(stray)} {verb} no hit ({count})")
    if not cited:
        parts.append(f"cites no source ({count})")
    why = "; ".join(parts)
    return (bool(named) if condition.operator == "cites" else not named), why


def _markers(numbers: Sequence[int]) -> str:
    shown = ", ".join(f"[{n}]" for n in numbers[:10])
    return shown + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")


def lint(step: StepSpec, uses: Sequence[ConditionUse], step_path: str) -> list[str]:
    """Warn on a step without hits of its own, and on a retrieve step, which always cites."""
    if uses and step.kind == "retrieve":
        return [
            f"{use.path}: a retrieve step's response is its hits, numbered [1], [2]…: it "
            "always cites them; ask the step that answers from them"
            for use in uses
        ]
    return _lint_hits(step, uses, step_path)


CONDITION_TYPE = ConditionType(
    name="cites_source",
    label="Cites a source",
    help=(
        "The response has (`cites`) or lacks (`cites_none`) a citation marker [n] naming one "
        "of the hits the step worked with: its sources', else the run's latest."
    ),
    operators=(
        Operator("cites", "cites a source", "∋"),
        Operator("cites_none", "cites no source", "∌"),
    ),
    fields=(),
    summary={"cites_none": "cites no source", "*": "cites a source"},
    check=check,
    evaluate=evaluate,
    lint=lint,
    reads_answer=True,
)
