"""Decide where a run goes after a step: the one entry point the runner calls.

The rule (DESIGN §3): active branches in ascending priority; the first whose condition holds
is taken and the ones after it are not evaluated; if none holds, the next step in sequence,
or success after the last step. A branch that runs the step again is taken at most
`params.max_retries` times (default 3) per visit of the step; once used up it is logged as
matched but not taken, `exhausted after N retries`, and evaluation goes on. A run that has
executed `max_steps` steps fails instead of running another.

Decision-tree steps go to their leaf's target (`leaf_targets`, else the leaf's name as a step
key); their branches are evaluated only when the leaf names no step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from workflows.engine.actions import (
    RUNS_A_STEP,
    DecisionKind,
    Move,
    is_bounded,
    move_for,
    retry_limit,
)
from workflows.engine.actor_choice import ActorStats
from workflows.engine.conditions import EvalContext, Judge, evaluate_condition
from workflows.engine.decision_tree import evaluate_tree
from workflows.engine.errors import EngineError
from workflows.engine.graph import BranchSpec, RecipeGraph, StepSpec
from workflows.engine.state import RunState
from workflows.engine.vocabulary import COMPLETE, END

NO_MATCH_NEXT = "no branch matched; next in sequence"
NO_MATCH_LAST = "no branch matched; last step done"


@dataclass(frozen=True, slots=True)
class StepResult:
    """What one execution of a step produced, as the runner reports it.

    `decision` is a human step's choice (its `response` or `comment` is the reviewer's
    comment); `route_selection` the routes a classify step selected; `leaf` the leaf a
    decision-tree step reached (None: `decide` walks the tree itself).
    """

    step_key: str
    response: str = ""
    decision: str | None = None
    comment: str | None = None
    timed_out: bool = False
    error: str | None = None
    route_selection: tuple[str, ...] | None = None
    leaf: str | None = None


# Evaluation and Decision are built on every step, ten at a time: plain slotted dataclasses
# construct twice as fast as frozen ones, so they are not frozen.
@dataclass(slots=True)
class Evaluation:
    """One branch evaluated after a step: whether it matched, was taken, and why."""

    branch: str
    priority: int
    matched: bool
    taken: bool
    reason: str


@dataclass(slots=True)
class Decision:
    """Where the run goes next, and every evaluation that led there.

    `next_step` is set for goto, repeat and retry_actor; `actor` is the alias to run it with
    (None: the step's own actor); `prompt_suffix` is plain text to append to the rendered
    prompt; `branch` / `action` name the taken branch (None for the sequential fallback).
    """

    kind: DecisionKind
    next_step: str | None
    branch: str | None
    action: str | None
    prompt_suffix: str | None
    actor: str | None
    reason: str
    evaluations: list[Evaluation] = field(default_factory=list)


def _record(step: StepSpec, state: RunState, result: StepResult) -> None:
    state.enter(step.key)
    response = result.response or result.comment or ""
    # A decision tree only reads the facts: the step after it still sees the same ones.
    state.record(step.key, response, overlay_facts=step.kind != "decision_tree")
    if result.decision is not None:
        state.record_decision(step.key, result.decision)
    if result.route_selection is not None:
        state.record_routes(step.key, tuple(result.route_selection))


def _context(
    step: StepSpec, state: RunState, result: StepResult, judge: Judge | None
) -> EvalContext:
    selection = state.last_route_selection
    evaluator = (step.validation or {}).get("judge") or step.actor
    return EvalContext(
        text=state.latest[step.key],
        facts=state.facts,
        decision=result.decision if result.decision is not None else state.last_decision,
        timed_out=result.timed_out,
        error=result.error,
        route_selection=tuple(selection) if selection is not None else None,
        judge=judge,
        default_evaluator=evaluator,
    )


def _tree_move(
    graph: RecipeGraph, step: StepSpec, state: RunState, result: StepResult
) -> tuple[Move | None, Evaluation]:
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


def _first_branch(
    graph: RecipeGraph,
    step: StepSpec,
    state: RunState,
    ctx: EvalContext,
    actor_stats: Sequence[ActorStats],
    evaluations: list[Evaluation],
) -> tuple[Move, BranchSpec, str] | None:
    """Evaluate the active branches in priority order, logging each; return the one taken."""
    for branch in step.active_branches:
        matched, why = evaluate_condition(branch.when, ctx)
        if not matched:
            evaluations.append(Evaluation(branch.name, branch.priority, False, False, why))
            continue
        if is_bounded(branch):
            limit = retry_limit(branch)
            if state.retries_used(step.key, branch.name) >= limit:
                exhausted = f"exhausted after {limit} retries"
                evaluations.append(Evaluation(branch.name, branch.priority, True, False, exhausted))
                continue
        move = move_for(graph, step, branch, override=state.actor_override, actor_stats=actor_stats)
        if move is None:
            refusal = "no other actor available; treated as exhausted"
            evaluations.append(Evaluation(branch.name, branch.priority, True, False, refusal))
            continue
        evaluations.append(Evaluation(branch.name, branch.priority, True, True, why))
        return move, branch, why
    return None


def _remember(state: RunState, step: StepSpec, move: Move, taken: BranchSpec | None) -> None:
    """Update the retry counters and flags for the move about to be made."""
    if taken is not None:
        if is_bounded(taken):
            state.count_retry(step.key, taken.name)
        if taken.action == "QUALITY_APPROVED":
            state.approved = True
        elif taken.action == "ERROR_HANDLER":
            state.error_handled = True
    repeats = move.kind in ("repeat", "retry_actor")
    # The next result of this step continues the visit only after a repeat; the actor a retry
    # chose is kept for that visit alone.
    state.repeating = step.key if repeats else None
    state.actor_override = move.actor if repeats else None


def decide(
    graph: RecipeGraph,
    state: RunState,
    result: StepResult,
    *,
    judge: Judge | None = None,
    actor_stats: Sequence[ActorStats] = (),
) -> Decision:
    """Record `result` in `state` and return where the run goes next.

    `judge(evaluator_alias, instruction, text)` answers `ai_evaluation` conditions; each
    (evaluator, instruction) is asked once per call. `actor_stats` informs the choice of
    actor for RETRY_WITH_DIFFERENT_ACTOR without `params.alternative_actor`.
    """
    if not graph.has_step(result.step_key):
        raise EngineError(f"unknown step '{result.step_key}'")
    step = graph.step(result.step_key)
    if not state.step_order:
        state.step_order = [s.key for s in graph.steps]
    _record(step, state, result)
    evaluations: list[Evaluation] = []
    move: Move | None = None
    taken: BranchSpec | None = None
    name: str | None = None
    reason = ""
    if step.kind == "decision_tree":
        move, evaluation = _tree_move(graph, step, state, result)
        evaluations.append(evaluation)
        name, reason = (evaluation.branch, evaluation.reason) if move else (None, "")
    if move is None:
        ctx = _context(step, state, result, judge)
        found = _first_branch(graph, step, state, ctx, actor_stats, evaluations)
        if found is not None:
            move, taken, reason = found
            name = taken.name
    if move is None:
        following = graph.next_in_sequence(step.key)
        if following is None:
            move, reason = Move("complete", None), NO_MATCH_LAST
        else:
            move, reason = Move("goto", following.key), NO_MATCH_NEXT
    if move.kind in RUNS_A_STEP and state.step_count >= state.max_steps:
        limit_reason = f"step limit {state.max_steps} reached"
        return Decision("fail", None, None, None, None, None, limit_reason, evaluations)
    _remember(state, step, move, taken)
    action = taken.action if taken is not None else None
    return Decision(
        move.kind, move.next_step, name, action, move.prompt_suffix, move.actor, reason, evaluations
    )
