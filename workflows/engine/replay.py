"""Rebuild a run's state from the results it recorded, without evaluating anything again.

A run stores only its latest state. A fork starts from the state its parent had after some
step, and gets it by replaying the parent's results up to there: each is recorded in the state
the way `decide` records it, and the branch the parent took after it (as its evaluations say)
is remembered the way `decide` remembers it. No condition is evaluated again (an evaluator
would be asked, and might answer otherwise): what happened is taken as recorded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from workflows.engine.actions import Move, move_for
from workflows.engine.decisions import StepResult
from workflows.engine.errors import EngineError
from workflows.engine.graph import BranchSpec, RecipeGraph, StepSpec

# The same bookkeeping as `decide`'s, so that a replayed state cannot drift from a decided one.
from workflows.engine.next_step import _record, _remember, with_reviewer_comment
from workflows.engine.severity import count_rerun, severity_of, with_feedback
from workflows.engine.state import RunState
from workflows.engine.step_kinds.registry import step_kind


@dataclass(frozen=True, slots=True)
class RecordedStep:
    """One result as a run recorded it: what the step produced, the alias that ran it (None:
    none or unknown), and the name of the branch taken after it (None: the run went on in
    sequence, or the step's kind chose the move itself, as a decision tree does)."""

    result: StepResult
    taken: str | None = None
    actor: str | None = None


def replay(graph: RecipeGraph, state: RunState, recorded: Iterable[RecordedStep]) -> Move | None:
    """Record each result in `state`, in order, as the run did; return the move the last one
    made (None when there was none).

    Raise EngineError when a result names a step the graph lacks. A retry with another actor
    keeps the actor the run went on with (the next result's), not one chosen again.
    """
    move: Move | None = None
    for entry in recorded:
        key = entry.result.step_key
        if not graph.has_step(key):
            raise EngineError(f"step '{key}' is not in this version of the recipe")
        step = graph.step(key)
        kind = step_kind(step.kind)
        if kind is None:
            raise EngineError(f"step '{key}' has an unknown kind '{step.kind}'")
        if state.repeating == key and state.actor_override is not None and entry.actor:
            state.actor_override = entry.actor
        _record(step, kind, state, entry.result)
        branch = _branch(step, entry.taken)
        move = None
        if branch is None and kind.next_move is not None:
            # The kind chose the move itself (a decision tree's leaf): pure, so asked again.
            move, _ = kind.next_move(graph, step, state, entry.result)
        move = move or _move(graph, step, state, branch)
        _remember(state, step, move, branch)
        if branch is not None:
            # A failure sent back (a reclassification, a replanning) is counted as `decide`
            # counts it, and the move carries it for the fork's next step.
            severity = severity_of(step, entry.result)
            move = with_feedback(move, graph, step, branch, severity, entry.result.error)
            count_rerun(graph, state, step, branch, severity)
        move = with_reviewer_comment(move, step, entry.result)
    return move


def _branch(step: StepSpec, name: str | None) -> BranchSpec | None:
    """Return the step's branch of that name, if the name is one of its branches'."""
    if name is None:
        return None
    return next((branch for branch in step.branches if branch.name == name), None)


def _move(graph: RecipeGraph, step: StepSpec, state: RunState, branch: BranchSpec | None) -> Move:
    """Return the move the run made after `step`: the taken branch's, else onward."""
    if branch is None:
        following = graph.next_in_sequence(step.key)
        return Move("goto", following.key) if following else Move("complete", None)
    move = move_for(
        graph,
        step,
        branch,
        override=state.actor_override,
        tried=state.tried_actors.get(step.key, ()),
        retries=state.retries_used(step.key, branch.name),
    )
    # None: no other actor is left now, yet the run did retry: with the one it went on with.
    return move or Move("retry_actor", step.key, None, state.actor_override)
