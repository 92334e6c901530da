"""Outcomes per actor, from the committed LLM StepRuns: for a retry with another actor that
names none (the engine picks the best-scoring other actor), and for the admin's figures."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce

from workflows import engine

from ..claims import Claim
from ..models import StepRun
from ..status import Outcome, StepStatus

# An attempt's outcome comes from the branch taken after it (`engine.attempt_outcome`): an
# answer the recipe rejected is a failure though the model call did not error. A neutral one
# counts as its run ended: approved or completed, a success; failed, a failure; still going
# or otherwise, neither. Rows committed before outcomes were recorded have none, and count as
# they did: by their status.
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


def actor_stats(claim: Claim) -> Sequence[engine.ActorStats]:
    """The claimed step's outcomes per actor of the recipe, if a branch may need them.

    Only a RETRY_WITH_DIFFERENT_ACTOR branch without `params.alternative_actor` reads them,
    and they are queried only if the engine asks.
    """
    if not any(
        b.action == "RETRY_WITH_DIFFERENT_ACTOR" and not b.params.get("alternative_actor")
        for b in claim.step.branches
    ):
        return []
    return _LazyActorStats(claim)


class _LazyActorStats(Sequence[engine.ActorStats]):
    """The step's actor statistics, aggregated from StepRuns on first use."""

    def __init__(self, claim: Claim) -> None:
        self.claim = claim
        self._stats: list[engine.ActorStats] | None = None

    def _load(self) -> list[engine.ActorStats]:
        if self._stats is None:
            claim = self.claim
            rows = {
                r["actor_alias"]: r
                for r in actor_stat_rows(run__recipe_id=claim.recipe_id, step_key=claim.step.key)
            }
            self._stats = [
                _stats_of(alias, rows.get(alias))
                for alias, ref in claim.document.get("actors", {}).items()
                if not ref.startswith("@human:")
            ]
        return self._stats

    def __getitem__(self, index: Any) -> Any:
        return self._load()[index]

    def __len__(self) -> int:
        return len(self._load())

    def __iter__(self) -> Iterator[engine.ActorStats]:
        return iter(self._load())


def _stats_of(alias: str, row: dict[str, Any] | None) -> engine.ActorStats:
    """An actor's evidence: its successes out of its judged (success or failure) attempts."""
    if row is None:
        return engine.ActorStats(actor=alias, mean_latency_ms=0.0)
    return engine.ActorStats(
        actor=alias,
        successes=row["successes"],
        attempts=row["successes"] + row["failures"],
        mean_latency_ms=row["total_latency_ms"] / row["attempts"],
    )
