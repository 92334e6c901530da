"""Turn a taken branch's action and target into the run's next move."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from workflows.engine.actor_choice import ActorStats, choose_actor
from workflows.engine.graph import BranchSpec, RecipeGraph, StepSpec
from workflows.engine.vocabulary import (
    COMPLETE,
    DEFAULT_MAX_RETRIES,
    END,
    REPEAT,
    REPEAT_ACTIONS,
)

DecisionKind = Literal["goto", "repeat", "retry_actor", "end", "complete", "fail"]
HUMAN_ACTOR_PREFIX = "@human:"

# Moves that run one more step, and so count against the run's step limit.
RUNS_A_STEP: frozenset[str] = frozenset({"goto", "repeat", "retry_actor"})


@dataclass(frozen=True, slots=True)
class Move:
    """Where a branch sends the run: the decision kind, the step, and what to change."""

    kind: DecisionKind
    next_step: str | None
    prompt_suffix: str | None = None
    actor: str | None = None


def is_bounded(branch: BranchSpec) -> bool:
    """Tell whether taking `branch` runs its step again, so `max_retries` bounds it."""
    return branch.target == REPEAT or branch.action in REPEAT_ACTIONS


def retry_limit(branch: BranchSpec) -> int:
    """Return how often a bounded branch may be taken per step visit."""
    explicit = branch.max_retries
    return DEFAULT_MAX_RETRIES if explicit is None else explicit


_SUFFIX_PARAMS = {"REQUEST_MORE_DETAIL": "retry_suffix", "ENHANCE_PROMPT": "prompt_enhancement"}


def _suffix(branch: BranchSpec) -> str | None:
    key = _SUFFIX_PARAMS.get(branch.action)
    value = branch.params.get(key) if key else None
    return value if isinstance(value, str) and value else None


def other_actor(
    graph: RecipeGraph,
    branch: BranchSpec,
    *,
    current: str | None,
    actor_stats: Sequence[ActorStats],
    tried: Collection[str] = (),
) -> str | None:
    """Return the alias to retry a step with: `params.alternative_actor`, else the best other.

    The best other is chosen by `choose_actor` among the recipe's model aliases whose actor
    differs from the one that just ran and from every one `tried` in this visit (by alias or
    name); `actor_stats` may name actors by alias or by name. None when no actor is left,
    the named alternative included once it has been tried.
    """
    left = {*tried, *([current] if current else [])}
    left_names = {graph.actors.get(a, a) for a in left}
    alternative = branch.params.get("alternative_actor")
    if isinstance(alternative, str) and alternative:
        tried_already = alternative in left or graph.actors.get(alternative) in left_names
        return None if tried_already else alternative
    candidates: list[ActorStats] = []
    for alias, name in graph.actors.items():
        if name.startswith(HUMAN_ACTOR_PREFIX) or alias in left or name in left_names:
            continue
        known = [s for s in actor_stats if s.actor in (alias, name)]
        candidates += [ActorStats(alias, s.successes, s.attempts, s.mean_latency_ms) for s in known]
        if not known:
            candidates.append(ActorStats(alias))
    return choose_actor(candidates, exclude=current or "")


def move_for(
    graph: RecipeGraph,
    step: StepSpec,
    branch: BranchSpec,
    *,
    override: str | None,
    actor_stats: Sequence[ActorStats],
    tried: Collection[str] = (),
) -> Move | None:
    """Return the move `branch` makes from `step`, or None when no other actor is left.

    `override` is the actor an earlier retry chose for this visit of the step (None: the
    step's own actor); a repeat keeps it. `tried`: the actors earlier retries in this visit
    left, which a retry with another actor never goes back to.
    """
    if branch.action == "RETRY_WITH_DIFFERENT_ACTOR":
        current = override or step.actor
        left = set(tried)
        if override and step.actor:
            left.add(step.actor)  # it ran first in this visit, and a retry left it
        actor = other_actor(graph, branch, current=current, actor_stats=actor_stats, tried=left)
        return None if actor is None else Move("retry_actor", step.key, None, actor)
    if branch.action == "END_RECIPE":
        return Move("end", None)
    if branch.action == "SKIP_TO_END":
        last = graph.last_step().key
        return Move("complete", None) if last == step.key else Move("goto", last)
    target = branch.target
    if target == REPEAT or branch.action in REPEAT_ACTIONS:
        return Move("repeat", step.key, _suffix(branch), override)
    if target == END:
        return Move("end", None)
    if target == COMPLETE:
        return Move("complete", None)
    return Move("goto", target)
