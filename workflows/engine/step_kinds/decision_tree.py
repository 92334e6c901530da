"""`decision_tree`: walk a JSON decision tree over the run's facts to a leaf.

With `detect`, the step first finds the tree's facts in a text (`detectors.py`): the
template `detect.from`, else the run's latest answer. The runner runs the detectors (the
safety judge is a model call) and reports the facts found; they are laid over the run's
facts, for the tree and for the steps after it.

A tree with a `fallback` that does not load (a published version the engine now reads
otherwise) takes its fallback at run time; lint refuses such a tree in a recipe saved now.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.actions import Move
from workflows.engine.checks import listed
from workflows.engine.decision_tree import (
    TreeOutcome,
    evaluate_tree,
    fallback_of,
    leaves,
    priority_problems,
    validate_tree,
)
from workflows.engine.decisions import Evaluation, StepResult
from workflows.engine.detectors import read_detect
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
    detect = read_detect(doc, path, reader)
    if tree is None:
        reader.error(f"{path}.tree", "is required for a decision_tree step")
        return {"tree": None, "leaf_targets": {}}
    problems = validate_tree(tree, f"{path}.tree")
    fallback = fallback_of(tree)
    if problems and fallback is not None:
        # Kept for the run, which takes the fallback; `load_errors` refuses it at save.
        return {
            "tree": {"fallback": fallback},
            # Its leaves are unknown: each target is checked, not its leaf's name.
            "leaf_targets": _targets(doc, path, reader, None),
            "detect": detect,
            "tree_problems": tuple(problems),
        }
    reader.errors += problems
    names = set(leaves(tree)) if not problems and isinstance(tree, Mapping) else None
    targets = _targets(doc, path, reader, names)
    if problems or not isinstance(tree, Mapping):
        return {"tree": None, "leaf_targets": targets, "detect": detect}
    return {"tree": tree, "leaf_targets": targets, "detect": detect}


def _targets(
    doc: Mapping[str, Any], path: str, reader: DocumentReader, names: set[str] | None
) -> dict[str, str]:
    """Read `leaf_targets`, each naming a leaf of the tree (when `names` are known)."""
    targets: dict[str, str] = {}
    raw = reader.mapping(doc.get("leaf_targets"), f"{path}.leaf_targets") or {}
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
    return targets


def load_errors(step: StepSpec, path: str) -> list[str]:
    """Return what a tree may not be saved with, though a run could take it: a tree that
    does not load (with a fallback), priorities against the order it is evaluated in."""
    if step.tree_problems:
        return list(step.tree_problems)
    if step.tree is None:
        return []
    return priority_problems(step.tree, f"{path}.tree")


def walk(step: StepSpec, facts: Mapping[str, Any]) -> TreeOutcome:
    """Walk the step's tree over `facts`; a tree that did not load takes its fallback.

    Raise EngineError when the step has no tree it can walk.
    """
    fallback = fallback_of(step.tree)
    if step.tree_problems and fallback is not None:
        why = "; ".join(step.tree_problems)
        return TreeOutcome(
            leaf=fallback,
            trace=[f"the tree did not load ({why}) -> fallback", f"leaf {fallback}"],
            fell_back=True,
        )
    if step.tree is None:
        raise EngineError(f"step '{step.key}' has no decision tree")
    return evaluate_tree(step.tree, facts)


def next_move(
    graph: RecipeGraph, step: StepSpec, state: RunState, result: StepResult
) -> tuple[Move | None, Evaluation]:
    """Go to the leaf's target (`leaf_targets`, else the leaf's name as a step key).

    A leaf that names no step leaves the move to the step's branches (None).
    """
    # The facts are those the runner walked the tree over (its detectors' facts are laid
    # over them by now), so walking it again gives the trace for the log at no model cost.
    outcome = walk(step, state.facts)
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
        FieldSpec(
            "detect",
            "Detectors",
            "text",
            help=(
                'JSON: find the facts in a text: {"pii": {"types": [...]}, "keywords": '
                '{"words": [...]}, "safety": {"judge": ALIAS}, "from": TEMPLATE} '
                "(default text: the run's latest answer)."
            ),
        ),
        FAILURE_SEVERITY,
    ),
    read_body=read_body,
    actor_kind=None,
    overlays_facts=False,
    next_move=next_move,
)
