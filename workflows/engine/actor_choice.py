"""Which actors and prompt variants a step may be run with, and the learner's pick among them.

A step learns (`learns`) when its actor is `@learned` or it lists `variants`: its first
attempt in each visit is then chosen by the learner (`first_choice`), among its candidate
actors (`@learned`) or its own actor, each with the step's own prompt, each declared variant
and each suffix a repeat added that led to success. Every step's RETRY_WITH_DIFFERENT_ACTOR
without `params.alternative_actor` is chosen by the learner too (`retry_choice`), never with
an actor already tried in the visit.

A candidate that lacks a capability the step `requires` (`capabilities.py`) is skipped before
the learner chooses, and the choice records it with the reason.

`Learning` is what the runner knows: the step's judged attempts, newest first, the actors
without capacity now, what some actors can do, and the random source for this attempt. They
are read only if a choice is made, so a step that never chooses costs nothing.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from workflows.engine.capabilities import Capabilities, lacking_reason
from workflows.engine.graph import RecipeGraph, StepSpec
from workflows.engine.learner import (
    Arm,
    Choice,
    Observation,
    choose,
    learned_variants,
)
from workflows.engine.vocabulary import HUMAN_ACTOR_PREFIX, LEARNED


def _all_full(actors: Sequence[str]) -> Collection[str]:
    return ()


def _none_declared(actors: Sequence[str]) -> Mapping[str, Capabilities | None]:
    return {}


@dataclass
class Learning:
    """The evidence for a step's choices: its judged attempts (newest first), a function
    telling which of some actors are full now, one telling what some actors can do (by
    alias; None or absent: not declared), and the random source of this attempt."""

    observations: Sequence[Observation] = ()
    full: Callable[[Sequence[str]], Collection[str]] = field(default=_all_full)
    capabilities: Callable[[Sequence[str]], Mapping[str, Capabilities | None]] = field(
        default=_none_declared
    )
    rng: random.Random = field(default_factory=lambda: random.Random(0))


def learns(step: StepSpec) -> bool:
    """Tell whether the learner chooses the step's first attempt in a visit."""
    return step.actor == LEARNED or bool(step.variants)


def model_aliases(graph: RecipeGraph, step: StepSpec) -> list[str]:
    """The actors the step may be run with: its `candidates`, else every model alias."""
    if step.candidates:
        return list(step.candidates)
    return [a for a, name in graph.actors.items() if not name.startswith(HUMAN_ACTOR_PREFIX)]


def _arms(
    graph: RecipeGraph, step: StepSpec, actors: Sequence[str], observations: Sequence[Observation]
) -> list[Arm]:
    if not learns(step):
        return [Arm(actor) for actor in actors]
    variants = ["", *(v.name for v in step.variants), *learned_variants(observations)]
    return [Arm(actor, variant) for actor in actors for variant in dict.fromkeys(variants)]


def evidence_of(step: StepSpec, observations: Sequence[Observation]) -> Sequence[Observation]:
    """The attempts as the step's arms see them: a step that does not learn has one arm per
    actor, so its attempts count whatever suffix they were asked with."""
    if learns(step):
        return observations
    return [
        Observation(o.actor, "", o.success, o.latency_ms, o.cost, o.tokens) for o in observations
    ]


def arms(graph: RecipeGraph, step: StepSpec, observations: Sequence[Observation]) -> list[Arm]:
    """Every arm the learner may choose on the step (`evidence_of`'s observations): its
    first attempt's candidates if it learns, else one per actor a retry may go to."""
    if learns(step) and step.actor != LEARNED:
        actors = [step.actor or ""]
    else:
        actors = model_aliases(graph, step)
    return _arms(graph, step, actors, observations)


def _choose(
    graph: RecipeGraph, step: StepSpec, actors: Sequence[str], learning: Learning
) -> Choice | None:
    skipped: list[tuple[str, str]] = []
    if step.needs and actors:
        offered = learning.capabilities(actors)
        for actor in actors:
            lacking = step.lacking(offered.get(actor))
            if lacking:
                skipped.append((actor, lacking_reason(actor, lacking)))
        left_out = {actor for actor, _ in skipped}
        actors = [a for a in actors if a not in left_out]
    observations = evidence_of(step, learning.observations)
    arms = _arms(graph, step, actors, observations)
    full = learning.full(actors) if arms else ()
    choice = choose(arms, observations, settings=graph.learning, rng=learning.rng, full=full)
    if choice is None or not skipped:
        return choice
    return replace(choice, skipped=tuple(skipped))


def first_choice(graph: RecipeGraph, step: StepSpec, learning: Learning) -> Choice | None:
    """The actor and variant of a learning step's first attempt in a visit (None: the step
    does not learn, so it runs with its own actor and prompt)."""
    if not learns(step):
        return None
    actors = model_aliases(graph, step) if step.actor == LEARNED else [step.actor or ""]
    return _choose(graph, step, actors, learning)


def retry_choice(
    graph: RecipeGraph, step: StepSpec, *, left: Collection[str], learning: Learning | None
) -> Choice | None:
    """The arm a retry with another actor runs, among actors not `left` (by alias or name);
    None when none is left."""
    left_names = {graph.actors.get(a, a) for a in left}
    actors = [
        a
        for a in model_aliases(graph, step)
        if a not in left and graph.actors.get(a, a) not in left_names
    ]
    return _choose(graph, step, actors, learning or Learning())
