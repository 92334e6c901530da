"""Outcomes per actor and variant, from the committed LLM StepRuns: the evidence the learner
chooses by (`learning`), and the figures of the admin and the "what works" page."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from django.db.models import BooleanField, Case, Count, Q, Subquery, Sum, Value, When
from django.db.models.functions import Coalesce

from workflows import engine
from workflows.models import Actor, Recipe

from .. import capacity
from ..claims import Claim
from ..models import StepRun
from ..status import Outcome, StepStatus

# An attempt's outcome comes from the branch taken after it (`engine.attempt_outcome`): an
# answer the recipe rejected is a failure though the model call did not error. A neutral one
# counts as its run ended: approved or completed, a success; failed, a failure; still going
# or otherwise, neither. Rows committed before outcomes were recorded have none, and count as
# they did: by their status.
MAX_OBSERVATIONS = 500  # the learner's evidence: older attempts weigh almost nothing anyway
_UNRECORDED = Q(outcome="")
_NEUTRAL = Q(outcome="neutral")
SUCCESS = (
    Q(outcome="success")
    | (_NEUTRAL & Q(run__outcome__in=[Outcome.APPROVED, Outcome.COMPLETED]))
    | (_UNRECORDED & Q(status=StepStatus.SUCCEEDED))
)
FAILURE = (
    Q(outcome="failure")
    | (_NEUTRAL & Q(run__outcome=Outcome.FAILED))
    | (_UNRECORDED & ~Q(status=StepStatus.SUCCEEDED))
)


def actor_stat_rows(**filters: Any) -> Any:
    """Per (recipe, step, actor) of LLM steps: attempts, successes, failures (an attempt
    may be neither) and total latency (ms)."""
    return (
        StepRun.objects.executed()
        .filter(kind="llm", **filters)
        .exclude(actor_alias="")
        .values("run__recipe_id", "step_key", "actor_alias")
        .annotate(
            attempts=Count("id"),
            successes=Count("id", filter=SUCCESS),
            failures=Count("id", filter=FAILURE),
            total_latency_ms=Coalesce(Sum("latency_ms"), 0),
        )
        .order_by("run__recipe_id", "step_key", "actor_alias")
    )


def learning(claim: Claim) -> engine.Learning:
    """The evidence the learner chooses the claimed step's actor and variant by.

    Read on first use only: most steps never choose. The random source is seeded by the
    run, step and attempt, so a replayed or tested run draws the same.
    """
    return engine.Learning(
        observations=_LazyObservations(claim.recipe_id, claim.step.key),
        full=full_actors(claim),
        capabilities=actor_capabilities(claim),
        rng=engine.seeded(claim.run_id, claim.step.key, claim.seq),
    )


def full_actors(claim: Claim) -> Callable[[Sequence[str]], Collection[str]]:
    """Tell which of some aliases name actors without capacity now (`runner.capacity`)."""

    def full(aliases: Sequence[str]) -> Collection[str]:
        names = {alias: claim.document.get("actors", {}).get(alias, "") for alias in aliases}
        has_room = capacity.available([n for n in names.values() if n])
        return {alias for alias, name in names.items() if not has_room.get(name, True)}

    return full


def actor_capabilities(
    claim: Claim,
) -> Callable[[Sequence[str]], Mapping[str, engine.Capabilities | None]]:
    """Tell what the actors some aliases name can do (None: not declared); read when a step
    that `requires` something chooses among them."""

    def capabilities(aliases: Sequence[str]) -> Mapping[str, engine.Capabilities | None]:
        names = {alias: claim.document.get("actors", {}).get(alias, "") for alias in aliases}
        rows = Actor.objects.filter(name__in=[n for n in names.values() if n])
        by_name = {actor.name: actor.declared_capabilities for actor in rows}
        return {alias: by_name.get(name) for alias, name in names.items()}

    return capabilities


class _LazyObservations(Sequence[engine.Observation]):
    """The step's latest judged attempts, newest first, read from StepRuns on first use."""

    def __init__(self, recipe_id: int, step_key: str) -> None:
        self.recipe_id, self.step_key = recipe_id, step_key
        self._rows: list[engine.Observation] | None = None

    def _load(self) -> list[engine.Observation]:
        if self._rows is None:
            self._rows = observations(self.recipe_id, self.step_key)
        return self._rows

    def __getitem__(self, index: Any) -> Any:
        return self._load()[index]

    def __len__(self) -> int:
        return len(self._load())

    def __iter__(self) -> Iterator[engine.Observation]:
        return iter(self._load())


def observations(recipe_id: int, step_key: str) -> list[engine.Observation]:
    """The step's last `MAX_OBSERVATIONS` judged LLM attempts, newest first."""
    rows = (
        StepRun.objects.executed()
        .filter(kind="llm", run__recipe_id=recipe_id, step_key=step_key)
        .exclude(actor_alias="")
        .annotate(
            judged=Case(
                When(SUCCESS, then=Value(True)),
                When(FAILURE, then=Value(False)),
                default=None,
                output_field=BooleanField(null=True),
            )
        )
        .filter(judged__isnull=False)
        .order_by("-id")
        .values_list(
            "actor_alias", "variant", "judged", "latency_ms", "cost", "tokens_in", "tokens_out"
        )
    )[:MAX_OBSERVATIONS]
    return [
        engine.Observation(
            actor=alias,
            variant=variant,
            success=judged,
            latency_ms=latency,
            cost=float(cost) if cost is not None else None,
            tokens=(tokens_in or 0) + (tokens_out or 0) if tokens_in is not None else None,
        )
        for alias, variant, judged, latency, cost, tokens_in, tokens_out in rows
    ]


MAX_STRATEGY_ROWS = 200


def strategies_learned(*, recipe_id: int, pattern: str, share: bool) -> list[str]:
    """The suffix variants that succeeded for intent `pattern`, newest first: in the recipe's
    runs, and with `share`, in the runs of its owner's other recipes that share too (never
    another owner's). Empty without a pattern."""
    if not pattern:
        return []
    rows = (
        StepRun.objects.executed()
        .filter(SUCCESS, kind="llm", intent_pattern=pattern)
        .filter(variant__startswith=engine.SUFFIX_MARK)
    )
    own = Q(run__recipe_id=recipe_id)
    if share:
        owner = Recipe.objects.filter(pk=recipe_id).values("owner_id")[:1]
        own |= Q(run__recipe__owner_id=Subquery(owner), run__recipe__learning__share=True)
    found = rows.filter(own).order_by("-id").values_list("variant", flat=True)
    return list(dict.fromkeys(found[:MAX_STRATEGY_ROWS]))
