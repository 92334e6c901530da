"""Decide where a run goes after a step: the one entry point the runner calls.

The rule (DESIGN §3): active branches in ascending priority; the first whose condition holds
is taken and the ones after it are not evaluated; if none holds, the next step in sequence,
or success after the last step. A branch that runs the step again is taken at most
`params.max_retries` times (default 3) per visit of the step; once used up it is logged as
matched but not taken, `exhausted after N retries`, and evaluation goes on. A run that has
executed `max_steps` steps fails instead of running another.

A failed step (an error, a timeout) fails the run, unless the branch taken asks about errors
or timeouts: a default branch or the next step in sequence would go on working on nothing. A
step the run's budget stopped is also handled by a branch that asks about the budget.
The branch the run then does not follow is logged as matched but not taken: the ledger
shows only the branch the run followed. A branch taken on an `error_severity` of
RECLASSIFICATION or REPLANNING sends the failure to its target as `{feedback}`, a bounded
number of times per run (`severity.py`); once used up it is logged like an exhausted one.

A step kind may choose the move itself (a decision tree goes to its leaf's target, see
`step_kinds/decision_tree.py`); its branches are evaluated only when it chooses none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from workflows.engine.actions import RUNS_A_STEP, Move, is_bounded, move_for, retry_limit
from workflows.engine.actor_choice import Learning
from workflows.engine.budget import Spend
from workflows.engine.conditions import (
    EvalContext,
    Judge,
    asks_about_budget,
    asks_about_classification,
    asks_about_failure,
    evaluate_condition,
)
from workflows.engine.conditions.context import AnswerOf
from workflows.engine.decisions import Decision, Evaluation, RunOutcome, StepResult
from workflows.engine.detectors import merge_detected
from workflows.engine.errors import EngineError
from workflows.engine.graph import BranchSpec, RecipeGraph, StepSpec
from workflows.engine.retry_delays import describe as describe_delay
from workflows.engine.severity import count_rerun, rerun_refusal, severity_of, with_feedback
from workflows.engine.sources import Citation
from workflows.engine.state import RunState
from workflows.engine.step_kinds.base import StepKind
from workflows.engine.step_kinds.registry import step_kind

# A human step's kind: its reviewer's comment is the next step's feedback.
HUMAN_KIND = "human"

NO_MATCH_NEXT = "no branch matched; next in sequence"
NO_MATCH_LAST = "no branch matched; last step done"


def _record(step: StepSpec, kind: StepKind, state: RunState, result: StepResult) -> None:
    state.enter(step.key)
    response = result.response or result.comment or ""
    # A decision tree only reads the facts: the step after it still sees the same ones.
    seq = state.record(
        step.key, response, overlay_facts=kind.overlays_facts, merge_facts=kind.merges_facts
    )
    if result.facts is not None:
        state.facts = merge_detected(state.facts, result.facts)
    if result.hits is not None:
        state.record_hits(seq)
    if step.kind == "intent" and result.error is None:
        state.record_intent(response)
    if result.decision is not None:
        state.record_decision(step.key, result.decision)
    if result.route_selection is not None:
        state.record_routes(step.key, tuple(result.route_selection))


def _context(
    step: StepSpec,
    state: RunState,
    result: StepResult,
    judge: Judge | None,
    hits_of: Callable[[int], Sequence[Citation]] | None,
    spend: Callable[[], Spend] | None,
    answer_of: AnswerOf | None,
) -> EvalContext:
    selection = state.last_route_selection
    evaluator = (step.validation or {}).get("judge") or state.actor_override or step.actor
    return EvalContext(
        text=result.response or result.comment or "",
        facts=state.facts,
        decision=result.decision if result.decision is not None else state.last_decision,
        timed_out=result.timed_out,
        error=result.error,
        route_selection=tuple(selection) if selection is not None else None,
        judge=judge,
        default_evaluator=evaluator,
        hits=result.hits,
        # A step that searched nothing works with the run's latest hits (as `{sources}` does).
        hits_seq=state.sources_seq if result.hits is None else None,
        hits_of=hits_of,
        tool_calls=result.tool_calls,
        spend=spend,
        budget_exceeded=result.budget_exceeded,
        validation=result.validation,
        classification_failure=result.classification_failure,
        answer_of=answer_of,
        severity=severity_of(step, result),
        schema=result.schema,
        http_status=result.http_status,
        progress=state.progress,
    )


def _first_branch(
    graph: RecipeGraph,
    step: StepSpec,
    state: RunState,
    ctx: EvalContext,
    learning: Learning | None,
    evaluations: list[Evaluation],
    variant: str,
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
        # A branch that sends the failure back to an earlier step is bounded per run.
        used_up = rerun_refusal(graph, state, step, branch, ctx.severity)
        if used_up is not None:
            evaluations.append(Evaluation(branch.name, branch.priority, True, False, used_up))
            continue
        move = move_for(
            graph,
            step,
            branch,
            override=state.actor_override,
            variant=variant,
            learning=learning,
            tried=state.tried_actors.get(step.key, ()),
            retries=state.retries_used(step.key, branch.name),
        )
        if move is None:
            refusal = "no other actor available; treated as exhausted"
            evaluations.append(Evaluation(branch.name, branch.priority, True, False, refusal))
            continue
        if move.delay_s:
            why = f"{why}; {describe_delay(move.delay_s)}"
        evaluations.append(Evaluation(branch.name, branch.priority, True, True, why))
        return with_feedback(move, graph, step, branch, ctx.severity, ctx.error), branch, why
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
    current = state.actor_override or step.actor
    if move.kind == "retry_actor" and current:
        state.note_tried(step.key, current)  # a retry never goes back to it in this visit
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
    learning: Learning | None = None,
    hits_of: Callable[[int], Sequence[Citation]] | None = None,
    spend: Callable[[], Spend] | None = None,
    answer_of: AnswerOf | None = None,
) -> Decision:
    """Record `result` in `state` and return where the run goes next.

    `judge(evaluator_alias, instruction, text)` answers `ai_evaluation` conditions; each
    (evaluator, instruction) is asked once per call. `learning` is the evidence the learner
    chooses by, for RETRY_WITH_DIFFERENT_ACTOR without `params.alternative_actor` (None: none). `hits_of(seq)`
    reads the hits of an earlier result, for the `retrieval` and `cites_source` conditions
    of a step that searched no sources itself (asked only when one is evaluated).
    `spend()` tells what the run has spent, for `budget` conditions (asked when one is);
    `answer_of(step_key)` reads an earlier step's latest answer, for `criteria_met`.
    """
    if not graph.has_step(result.step_key):
        raise EngineError(f"unknown step '{result.step_key}'")
    step = graph.step(result.step_key)
    kind = step_kind(step.kind)
    if kind is None:
        raise EngineError(f"step '{step.key}' has an unknown kind '{step.kind}'")
    if not state.step_order:
        state.step_order = [s.key for s in graph.steps]
    _record(step, kind, state, result)
    if result.actor and result.actor != step.actor:
        state.actor_override = result.actor  # a retry's or the learner's choice answered
    evaluations: list[Evaluation] = []
    move: Move | None = None
    taken: BranchSpec | None = None
    name: str | None = None
    reason = ""
    if kind.next_move is not None:
        move, evaluation = kind.next_move(graph, step, state, result)
        evaluations.append(evaluation)
        name, reason = (evaluation.branch, evaluation.reason) if move else (None, "")
    if move is None:
        ctx = _context(step, state, result, judge, hits_of, spend, answer_of)
        found = _first_branch(graph, step, state, ctx, learning, evaluations, result.variant)
        if found is not None:
            move, taken, reason = found
            name = taken.name
    if move is None:
        following = graph.next_in_sequence(step.key)
        if following is None:
            move, reason = Move("complete", None), NO_MATCH_LAST
        else:
            move, reason = Move("goto", following.key), NO_MATCH_NEXT
    failure = _unhandled_failure(step, result, taken)
    not_taken = "it does not handle the step's failure"
    if failure is None and move.kind in RUNS_A_STEP and state.step_count >= state.max_steps:
        failure = not_taken = f"step limit {state.max_steps} reached"
    if failure is not None:
        # The run fails instead of following the branch: the ledger must not say it did.
        _not_followed(evaluations, not_taken)
        return Decision("fail", None, None, None, None, None, failure, evaluations, "failed")
    _remember(state, step, move, taken)
    move = with_reviewer_comment(move, step, result)
    if taken is not None:
        count_rerun(graph, state, step, taken, severity_of(step, result))
    action = taken.action if taken is not None else None
    return Decision(
        move.kind,
        move.next_step,
        name,
        action,
        move.prompt_suffix,
        move.actor,
        reason,
        evaluations,
        _outcome(move.kind, action, state),
        move.variant,
        move.choice,
        move.feedback,
        move.delay_s,
    )


def with_reviewer_comment(move: Move, step: StepSpec, result: StepResult) -> Move:
    """`move`, carrying a human step's comment to the step the run goes to next as its
    `{feedback}`: a revision asked for reaches the writer (who may also read
    `{steps.KEY.response}`). A failure sent back already (`with_feedback`) is kept."""
    if step.kind != HUMAN_KIND or move.kind not in RUNS_A_STEP or move.feedback:
        return move
    comment = (result.comment or result.response or "").strip()
    return replace(move, feedback=comment) if comment else move


def _not_followed(evaluations: list[Evaluation], why: str) -> None:
    """Mark the evaluation of the branch that would have been taken as not taken, and why."""
    for evaluation in evaluations:
        if evaluation.taken:
            evaluation.taken = False
            evaluation.reason = f"{evaluation.reason}; not taken: {why}"


def _outcome(kind: str, action: str | None, state: RunState) -> RunOutcome | None:
    """Return the run's outcome when a move of `kind` finishes it (None: the run goes on).

    An approval or a handled error (marked by the branch taken now or by an earlier one) is
    the outcome whatever the target, `@end` included; END_RECIPE stops the run as ended.
    """
    if kind not in ("complete", "end"):
        return None
    if kind == "end" and action == "END_RECIPE":
        return "ended"
    if state.approved:
        return "approved"
    if state.error_handled:
        return "error_handled"
    return "completed" if kind == "complete" else "ended"


def _unhandled_failure(step: StepSpec, result: StepResult, taken: BranchSpec | None) -> str | None:
    """Return why the run fails with its step, or None when the step did not fail or the
    branch taken handles the failure (its condition asks about errors or timeouts, about the
    budget when the budget stopped the step, or about the classifier when it failed)."""
    if result.error is None and not result.timed_out:
        return None
    if taken is not None and asks_about_failure(taken.when):
        return None
    if taken is not None and result.budget_exceeded and asks_about_budget(taken.when):
        return None
    if (
        taken is not None
        and result.classification_failure
        and asks_about_classification(taken.when)
    ):
        return None
    return f"step '{step.key}' failed: {result.error or 'timed out'}"
