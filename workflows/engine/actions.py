"""Turn a taken branch's action and target into the run's next move."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Literal

from workflows.engine.actor_choice import Learning, retry_choice
from workflows.engine.graph import BranchSpec, RecipeGraph, StepSpec
from workflows.engine.learner import Choice
from workflows.engine.retry_delays import retry_delay
from workflows.engine.vocabulary import (
    COMPLETE,
    DEFAULT_MAX_RETRIES,
    END,
    REPEAT,
    REPEAT_ACTIONS,
    SUFFIX_PARAMS,
    repeats_step,
)

DecisionKind = Literal["goto", "repeat", "retry_actor", "end", "complete", "fail"]

# Moves that run one more step, and so count against the run's step limit.
RUNS_A_STEP: frozenset[str] = frozenset({"goto", "repeat", "retry_actor"})


@dataclass(frozen=True, slots=True)
class Move:
    """Where a branch sends the run: the decision kind, the step, and what to change."""

    kind: DecisionKind
    next_step: str | None
    prompt_suffix: str | None = None
    actor: str | None = None
    # The prompt variant the next attempt asks with, and how the learner chose it, if it did.
    variant: str = ""
    choice: Choice | None = None
    # A failure sent back to the step run next, as its `{feedback}` (see `severity.py`).
    feedback: str | None = None
    # Seconds the run waits in the queue before it runs the step again (`retry_delays.py`).
    delay_s: float = 0.0


def is_bounded(branch: BranchSpec) -> bool:
    """Tell whether taking `branch` runs its step again, so `max_retries` bounds it."""
    return repeats_step(branch.action, branch.target)


def retry_limit(branch: BranchSpec) -> int:
    """Return how often a bounded branch may be taken per step visit."""
    explicit = branch.max_retries
    return DEFAULT_MAX_RETRIES if explicit is None else explicit


def named_alternatives(branch: BranchSpec) -> list[str]:
    """The actors `params.alternative_actor` names, in the order the retries take them: one
    alias, or a list of them."""
    value = branch.params.get("alternative_actor")
    names = value if isinstance(value, list) else [value]
    return [name for name in names if isinstance(name, str) and name]


def _suffix(branch: BranchSpec) -> str | None:
    key = SUFFIX_PARAMS.get(branch.action)
    value = branch.params.get(key) if key else None
    return value if isinstance(value, str) and value else None


def move_for(
    graph: RecipeGraph,
    step: StepSpec,
    branch: BranchSpec,
    *,
    override: str | None,
    variant: str = "",
    learning: Learning | None = None,
    tried: Collection[str] = (),
    retries: int = 0,
) -> Move | None:
    """Return the move `branch` makes from `step`, or None when no other actor is left.

    `override` is the actor answering this visit of the step instead of its own (one an
    earlier retry or the learner chose; None: the step's own actor), and `variant` the prompt
    variant it asked with: a repeat keeps both. `retries`: how often the branch was taken in
    this visit already, which picks the named alternative and the wait of a repeat.
    A retry with another actor asks the actors `params.alternative_actor` names in order (the
    last one again for every retry after), up to `max_retries` times; without it, the learner
    chooses among the actors not `tried` in this visit (`actor_choice.retry_choice`), never
    going back to one an earlier retry left.
    """
    move = _move(graph, step, branch, override, variant, learning, tried, retries)
    if move is None or move.kind not in ("repeat", "retry_actor"):
        return move
    delay = retry_delay(branch.params, retries, learning.rng if learning else None)
    return replace(move, delay_s=delay) if delay else move


def _move(
    graph: RecipeGraph,
    step: StepSpec,
    branch: BranchSpec,
    override: str | None,
    variant: str,
    learning: Learning | None,
    tried: Collection[str],
    retries: int,
) -> Move | None:
    if branch.action == "RETRY_WITH_DIFFERENT_ACTOR":
        named = named_alternatives(branch)
        if named:
            return Move("retry_actor", step.key, None, named[min(retries, len(named) - 1)])
        current = override or step.actor
        left = {*tried, *([current] if current else [])}
        if override and step.actor:
            left.add(step.actor)  # it ran first in this visit, and a retry left it
        choice = retry_choice(graph, step, left=left, learning=learning)
        if choice is None:
            return None
        return Move("retry_actor", step.key, None, choice.arm.actor, choice.arm.variant, choice)
    if branch.action == "END_RECIPE":
        return Move("end", None)
    if branch.action == "SKIP_TO_END":
        last = graph.last_step().key
        return Move("complete", None) if last == step.key else Move("goto", last)
    target = branch.target
    if target == REPEAT or branch.action in REPEAT_ACTIONS:
        return Move("repeat", step.key, _suffix(branch), override, variant)
    if target == END:
        return Move("end", None)
    if target == COMPLETE:
        return Move("complete", None)
    return Move("goto", target)
