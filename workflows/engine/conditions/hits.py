"""What the conditions on a step's hits (`retrieval`, `cites_source`) share: their lint rule."""

from __future__ import annotations

from collections.abc import Sequence

from workflows.engine.conditions.base import ConditionUse, Lint
from workflows.engine.graph import StepSpec
from workflows.engine.sources import names_sources


def sees_hits(step: StepSpec) -> bool:
    """Tell whether a step has hits of its own: it searches sources, or its templates show some."""
    return bool(step.sources) or names_sources(step.prompt) or names_sources(step.material)


def lint_for(type_name: str) -> Lint:
    """Return the lint rule of a condition type on hits: warn on a step that has none."""

    def lint(step: StepSpec, uses: Sequence[ConditionUse], step_path: str) -> list[str]:
        if not uses or sees_hits(step):
            return []
        return [
            f"{use.path}: the step searches no sources and its prompt shows none "
            f"({{sources}}), so {type_name} reads the hits the run found last, if any"
            for use in uses
        ]

    return lint
