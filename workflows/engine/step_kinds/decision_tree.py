"""`decision_tree`: walk a JSON decision tree over the run's facts to a leaf."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.actions import Move
from workflows.engine.checks import listed
from workflows.engine.decision_tree import evaluate_tree, leaves, validate_tree
from workflows.engine.decisions import Evaluation, StepResult
from workflows.engine.errors import EngineError
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import RecipeGraph, StepSpec
from workflows.engine.reading import DocumentReader
from workflows.engine.state import RunState
from workflows.engine.step_kinds.base import StepKind
from workflows.engine.step_kinds.common import FAILURE_SEVERITY
from workflows.engine.vocabulary import COMPLETE, END


def read_body(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> dict[str, Any]:
    """Read the tree and the leaf targets (leaf name to step key, @end or @complete)."""
    tree = doc.get("tree")
    if tree is None:
        reader.error(f"{path}.tree", "is required for a decision_tree step")
        return {"tree": None, "leaf_targets": {}}
    problems = validate_tree(tree, f"{path}.tree")
    reader.errors += problems
    targets: dict[str, str] = {}
    raw = reader.mapping(doc.get("leaf_targets"), f"{path}.leaf_targets") or {}
    names = set(leaves(tree)) if not problems and isinstance(tree, Mapping) else None
    for leaf, target in raw.items():
        leaf_path = f"{path}.leaf_targets.{leaf}"
        if names is not None and leaf not in names:
            reader.error(leaf_path, f"no leaf '{leaf}' in the tree; leaves: {listed(names)}")
        elif not isinstance(target, str) or not (
            target in reader.keys or target in (END, COMPLETE)
        ):
            reader.error(
                leaf_path, f"unknown step {target!r}; expected a step key, @end or @complete"
            )
        else:
            targets[str(leaf)] = target
    if problems or not isinstance(tree, Mapping):
        return {"tree": None, "leaf_targets": targets}
    return {"tree": tree, "leaf_targets": targets}


def next_move(
    graph: RecipeGraph, step: StepSpec, state: RunState, result: StepResult
) -> tuple[Move | None, Evaluation]:
    """Go to the leaf's target (`leaf_targets`, else the leaf's name as a step key).

    A leaf that names no step leaves the move to the step's branches (None).
    """
    if step.tree is None:
        raise EngineError(f"step '{step.key}' has no decision tree")
    # The facts are those the runner walked the tree over (a tree step leaves them as they
    # were), so walking it again gives the trace for the log at no model cost.
    outcome = evaluate_tree(step.tree, state.facts)
    leaf, reason = outcome.leaf, " → ".join(outcome.trace)
    if result.leaf is not None and result.leaf != leaf:
        leaf, reason = result.leaf, f"the runner reported leaf {result.leaf}"
    target = step.leaf_targets.get(leaf, leaf)
    name = f"leaf:{leaf}"
    if target == END:
        return Move("end", None), Evaluation(name, 0, True, True, reason)
    if target == COMPLETE:
        return Move("complete", None), Evaluation(name, 0, True, True, reason)
    if graph.has_step(target):
        return Move("goto", target), Evaluation(name, 0, True, True, reason)
    return None, Evaluation(name, 0, True, False, f"{reason}; leaf {leaf} names no step")


STEP_KIND = StepKind(
    name="decision_tree",
    label="Decision tree",
    help="Walks a decision tree over the run's facts; the leaf names the step to go to.",
    fields=(
        FieldSpec(
            "tree",
            "Tree",
            "text",
            required=True,
            help='JSON: {"type": "node", "condition", "if_true", "if_false"} or a leaf.',
        ),
        FieldSpec(
            "leaf_targets",
            "Leaf targets",
            "text",
            help="JSON: leaf name to step key, @end or @complete (default: the leaf's name).",
        ),
        FAILURE_SEVERITY,
    ),
    read_body=read_body,
    actor_kind=None,
    overlays_facts=False,
    next_move=next_move,
)
