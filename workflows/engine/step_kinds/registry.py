"""List every step kind of the recipe format; look one up by name.

Adding a step kind: write its module here, name it in `KINDS`, give the runner a module
that executes it (in `runner/steps/`, named in its `EXECUTORS`), and run
`python -m workflows.engine.docs` to add it to the format documentation's table.
"""

from __future__ import annotations

from workflows.engine.step_kinds import (
    classify,
    decision_tree,
    http,
    human,
    intent,
    llm,
    retrieve,
    tool,
    transform,
)
from workflows.engine.step_kinds.base import StepKind

KINDS: tuple[StepKind, ...] = (
    llm.STEP_KIND,
    human.STEP_KIND,
    decision_tree.STEP_KIND,
    classify.STEP_KIND,
    retrieve.STEP_KIND,
    tool.STEP_KIND,
    intent.STEP_KIND,
    transform.STEP_KIND,
    http.STEP_KIND,
)
_BY_NAME: dict[str, StepKind] = {kind.name: kind for kind in KINDS}
KIND_NAMES: tuple[str, ...] = tuple(_BY_NAME)
# The kind of a step that names none.
DEFAULT_KIND = llm.STEP_KIND


def step_kind(name: object) -> StepKind | None:
    """Return the step kind called `name`, or None."""
    return _BY_NAME.get(name) if isinstance(name, str) else None
