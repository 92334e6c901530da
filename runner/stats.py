"""Read the figures operators watch: aggregates over runs, steps, model calls and human tasks.

Selectors only (nothing here writes). `/metrics` (runner/metrics.py) reads the whole
installation's figures; the stats pages read a `Scope`: the runs, steps and model calls of one
recipe, or of one actor, among the runs a user may see. Every aggregate is computed by the
database, except latency percentiles, which are taken in Python from a bounded number of the
latest steps (SQLite has no percentile function). The editor's runs overlay reads what the last
runs of one version did (`last_runs`): the same count of branches taken (`taken_counts`), per run.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, Exists, Min, OuterRef, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from workflows.models import Recipe, RecipeVersion

from .models import BranchEvaluation, HumanTask, ModelCall, Run, StepRun
from .selectors import runs_visible_to
from .status import RUNNABLE, TERMINAL, RunStatus, TaskStatus

# The ranges the stats pages offer, in days, and the one they open with.
RANGES = (7, 30, 90)
DEFAULT_RANGE = 30
# Percentiles are taken over at most this many of the latest steps in the range: enough for a
# stable p95, and a bounded read however busy the recipe or actor is.
PERCENTILE_SAMPLE = 20_000
# What a run counts as before it has an outcome.
IN_PROGRESS = "in progress"

# -- /metrics ---------------------------------------------------------------------------------


def runs_by_status() -> dict[str, int]:
    """Return how many runs are in each status (every status, 0 when none is)."""
    counts = dict(Run.objects.order_by().values_list("status").annotate(n=Count("id")))
    return {status: counts.get(status, 0) for status in RunStatus.values}


@dataclass(frozen=True)
class Queue:
    """Runs that have a step to execute and no worker holding them."""

    waiting: int
    oldest_enqueued_at: datetime | None


def run_queue(*, now: datetime) -> Queue:
    """Return the runs waiting to be claimed: runnable, with a next step, and no live lease."""
    found = (
        Run.objects.filter(status__in=RUNNABLE)
        .exclude(next={})
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
        .aggregate(waiting=Count("id"), oldest=Min("enqueued_at"))
    )
    return Queue(waiting=found["waiting"], oldest_enqueued_at=found["oldest"])


def open_tasks_by_group() -> dict[str, int]:
    """Return how many human tasks are open, per reviewer group."""
    return dict(
        HumanTask.objects.filter(status=TaskStatus.OPEN)
        .order_by()
        .values_list("group__name")
        .annotate(n=Count("id"))
    )


@dataclass(frozen=True)
class LatencyBuckets:
    """A latency histogram of one (step kind, actor): cumulative counts per upper bound."""

    kind: str
    actor: str
    counts: tuple[int, ...]  # steps that took at most bounds_ms[i]
    count: int
    sum_ms: int


def step_latency_buckets(*, since: datetime, bounds_ms: Sequence[int]) -> list[LatencyBuckets]:
    """Count the steps finished since `since` per (kind, actor) under each bound, in one query."""
    buckets = {
        f"le_{i}": Count("id", filter=Q(latency_ms__lte=bound)) for i, bound in enumerate(bounds_ms)
    }
    rows = (
        StepRun.objects.executed()
        .filter(finished_at__gte=since, latency_ms__isnull=False)
        .order_by()
        .values("kind", "actor_name")
        .annotate(count=Count("id"), sum_ms=Sum("latency_ms"), **buckets)
        .order_by("kind", "actor_name")
    )
    return [
        LatencyBuckets(
            kind=row["kind"],
            actor=row["actor_name"],
            counts=tuple(row[f"le_{i}"] for i in range(len(bounds_ms))),
            count=row["count"],
            sum_ms=row["sum_ms"] or 0,
        )
        for row in rows
    ]


@dataclass(frozen=True)
class CallTotals:
    """All model calls ever recorded for one (actor, purpose, currency)."""

    actor: str
    purpose: str
    currency: str
    calls: int
    errors: int
    tokens_in: int
    tokens_out: int
    cost: Decimal | None  # None when none of the calls had a price


def model_call_totals() -> list[CallTotals]:
    """Return the calls, errors, tokens and cost of every model call, per actor and purpose."""
    rows = (
        ModelCall.objects.order_by()
        .values("actor_name", "purpose", "currency")
        .annotate(
            calls=Count("id"),
            errors=Count("id", filter=~Q(error="")),
            tokens_in=Sum("tokens_in"),
            tokens_out=Sum("tokens_out"),
            cost=Sum("cost"),
        )
        .order_by("actor_name", "purpose", "currency")
    )
    return [
        CallTotals(
            actor=row["actor_name"],
            purpose=row["purpose"],
            currency=row["currency"],
            calls=row["calls"],
            errors=row["errors"],
            tokens_in=row["tokens_in"] or 0,
            tokens_out=row["tokens_out"] or 0,
            cost=row["cost"],
        )
        for row in rows
    ]


# -- the stats pages --------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """The days a stats page shows: `days` whole days, today last (in the site's time zone)."""

    days: int
    start: datetime
    dates: tuple[date, ...]


def stats_window(days: int, *, today: date | None = None) -> Window:
    """Return the window of the last `days` days, today included."""
    today = today or timezone.localdate()
    first = today - timedelta(days=days - 1)
    start = timezone.make_aware(datetime.combine(first, datetime.min.time()))
    return Window(days=days, start=start, dates=tuple(first + timedelta(n) for n in range(days)))


@dataclass(frozen=True)
class Scope:
    """What a stats page counts: runs, the steps executed and the model calls made.

    `step_group` names the StepRun fields whose values label a step on the page (the step key
    of one recipe; recipe and step key for an actor, whose steps span recipes).
    """

    runs: QuerySet[Run]
    steps: QuerySet[StepRun]
    calls: QuerySet[ModelCall]
    step_group: tuple[str, ...] = ("step_key",)


def recipe_scope(*, user: AbstractBaseUser | AnonymousUser, recipe: Recipe) -> Scope:
    """Return the runs, steps and calls of a recipe, among the runs the user may see."""
    run_ids = runs_visible_to(user).filter(recipe=recipe).values("pk")
    return Scope(
        runs=Run.objects.filter(pk__in=run_ids),
        steps=StepRun.objects.executed().filter(run__in=run_ids),
        calls=ModelCall.objects.filter(run__in=run_ids),
    )


def actor_scope(*, user: AbstractBaseUser | AnonymousUser, name: str) -> Scope:
    """Return the steps an actor ran, the calls made to it and the runs it took part in,
    among the runs the user may see. Steps and calls name their actor as it was called then."""
    run_ids = runs_visible_to(user).values("pk")
    steps = StepRun.objects.executed().filter(run__in=run_ids, actor_name=name)
    calls = ModelCall.objects.filter(run__in=run_ids, actor_name=name)
    took_part = Q(pk__in=steps.values("run_id")) | Q(pk__in=calls.values("run_id"))
    return Scope(
        runs=Run.objects.filter(took_part),
        steps=steps,
        calls=calls,
        step_group=("run__recipe__slug", "step_key"),
    )


def scope_is_empty(scope: Scope) -> bool:
    """Return whether the scope has no steps and no calls at all (in any range)."""
    return not scope.steps.exists() and not scope.calls.exists()


def outcome_label(*, status: str, outcome: str) -> str:
    """Return what a run counts as on the charts: its outcome, or in progress."""
    if status not in TERMINAL:
        return IN_PROGRESS
    return outcome or status


def runs_per_day(scope: Scope, window: Window) -> dict[date, dict[str, int]]:
    """Return the runs started on each day of the window, counted by outcome."""
    rows = (
        scope.runs.filter(created_at__gte=window.start)
        .order_by()
        .annotate(day=TruncDate("created_at"))
        .values("day", "status", "outcome")
        .annotate(n=Count("id"))
    )
    per_day: dict[date, dict[str, int]] = {day: defaultdict(int) for day in window.dates}
    for row in rows:
        if row["day"] in per_day:
            label = outcome_label(status=row["status"], outcome=row["outcome"])
            per_day[row["day"]][label] += row["n"]
    return {day: dict(counts) for day, counts in per_day.items()}


@dataclass
class Usage:
    """Tokens and cost of the model calls made on each day of a window."""

    tokens_in: dict[date, int]
    tokens_out: dict[date, int]
    # currency -> day -> cost; calls without a price cost nothing here.
    cost: dict[str, dict[date, Decimal]] = field(default_factory=dict)
    calls: int = 0
    unpriced_calls: int = 0

    @property
    def total_tokens(self) -> int:
        return sum(self.tokens_in.values()) + sum(self.tokens_out.values())

    def total_cost(self) -> dict[str, Decimal]:
        """Return the cost of the whole window per currency."""
        return {currency: sum(days.values(), Decimal(0)) for currency, days in self.cost.items()}


def usage_per_day(scope: Scope, window: Window) -> Usage:
    """Return the tokens and the cost (per currency) of the scope's calls on each day."""
    rows = (
        scope.calls.filter(started_at__gte=window.start)
        .order_by()
        .annotate(day=TruncDate("started_at"))
        .values("day", "currency")
        .annotate(
            calls=Count("id"),
            unpriced=Count("id", filter=Q(cost__isnull=True)),
            tokens_in=Sum("tokens_in"),
            tokens_out=Sum("tokens_out"),
            cost=Sum("cost"),
        )
    )
    usage = Usage(
        tokens_in=dict.fromkeys(window.dates, 0), tokens_out=dict.fromkeys(window.dates, 0)
    )
    for row in rows:
        day = row["day"]
        if day not in usage.tokens_in:
            continue
        usage.calls += row["calls"]
        usage.unpriced_calls += row["unpriced"]
        usage.tokens_in[day] += row["tokens_in"] or 0
        usage.tokens_out[day] += row["tokens_out"] or 0
        if row["cost"] is not None and row["currency"]:
            days = usage.cost.setdefault(row["currency"], dict.fromkeys(window.dates, Decimal(0)))
            days[day] += row["cost"]
    return usage


@dataclass(frozen=True)
class Percentiles:
    """The latency of one group of steps: p50 and p95 (nearest rank) of `count` values."""

    label: str
    count: int
    p50_ms: int
    p95_ms: int


def percentile(ordered: Sequence[int], q: float) -> int:
    """Return the nearest-rank `q` percentile (0 < q <= 1) of sorted, non-empty values."""
    return ordered[max(math.ceil(q * len(ordered)), 1) - 1]


def latency_percentiles(
    steps: QuerySet[StepRun],
    window: Window,
    *,
    group: Sequence[str],
    sample: int = PERCENTILE_SAMPLE,
) -> tuple[list[Percentiles], bool]:
    """Return p50 and p95 of the steps' latency in the window, per group (by label), and
    whether only the latest `sample` steps were read."""
    rows = list(
        steps.filter(started_at__gte=window.start, latency_ms__isnull=False)
        .order_by("-pk")
        .values_list(*group, "latency_ms")[: sample + 1]
    )
    capped = len(rows) > sample
    values: dict[str, list[int]] = defaultdict(list)
    for *labels, latency in rows[:sample]:
        values[_label(labels)].append(latency)
    result = []
    for label in sorted(values):
        ordered = sorted(values[label])
        result.append(
            Percentiles(
                label=label,
                count=len(ordered),
                p50_ms=percentile(ordered, 0.50),
                p95_ms=percentile(ordered, 0.95),
            )
        )
    return result, capped


def taken_counts(steps: QuerySet[StepRun], *, group: Sequence[str]) -> QuerySet[Any]:
    """Return how many times each branch was taken after `steps`, per branch and group of
    StepRun fields: rows of `step_run__FIELD` for each field of `group`, `branch` and `n`."""
    fields = [f"step_run__{name}" for name in group]
    return (
        BranchEvaluation.objects.filter(taken=True, step_run__in=steps.values("pk"))
        .order_by()
        .values(*fields, "branch")
        .annotate(n=Count("id"))
    )


def branches_taken(
    steps: QuerySet[StepRun], window: Window, *, group: Sequence[str]
) -> list[tuple[str, list[tuple[str, int]]]]:
    """Return, per step group, how many times each branch was taken in the window (most first)."""
    fields = [f"step_run__{name}" for name in group]
    rows = taken_counts(steps.filter(started_at__gte=window.start), group=group)
    taken: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for row in rows:
        taken[_label([row[f] for f in fields])].append((row["branch"], row["n"]))
    return [
        (label, sorted(parts, key=lambda part: (-part[1], part[0])))
        for label, parts in sorted(taken.items())
    ]


# -- the editor's runs overlay ----------------------------------------------------------------

# The editor draws what at most this many of a version's latest runs did (its menu offers
# LAST_RUNS_CHOICES), and lists at most RUNS_LISTED of the runs that took a branch.
LAST_RUNS_MAX = 100
LAST_RUNS_CHOICES = (20, 50, 100)
LAST_RUNS_DEFAULT = 50
RUNS_LISTED = 20


@dataclass(frozen=True)
class BranchRuns:
    """What the runs counted did with one branch of one step."""

    step: str
    branch: str
    runs: int  # how many of the runs took it
    taken: int  # how many times it was taken: more than `runs` when it repeats its step
    run_ids: tuple[int, ...]  # the newest of those runs, newest first (at most RUNS_LISTED)


@dataclass(frozen=True)
class LastRuns:
    """What a version's latest runs did: the runs (newest first), how many of them ran each
    step (by key), and how many took each branch (by step key and branch name)."""

    runs: list[Run]
    visits: dict[str, int]
    branches: list[BranchRuns]


def versions_run(*, recipe: Recipe) -> list[tuple[RecipeVersion, bool]]:
    """Return the recipe's published versions, newest first, each with whether it has runs.

    The hidden draft snapshots that the editor's test runs pin are left out. Documents are not
    read (`defer`): a version's own is read when needed.
    """
    ran = Run.objects.filter(version=OuterRef("pk"))
    versions = (
        RecipeVersion.objects.published()
        .filter(recipe=recipe)
        .defer("document")
        .annotate(has_runs=Exists(ran))
        .order_by("-number")
    )
    return [(version, version.has_runs) for version in versions]


def last_runs(
    *, user: AbstractBaseUser | AnonymousUser, version: RecipeVersion, limit: int
) -> LastRuns:
    """Return what the last `limit` runs of `version` that the user may see did, in three
    queries however many runs, steps and branches there are.

    A step counts the runs that ran it (once each, however often it ran); a branch, the runs
    that took it and how many times. Steps a fork copied from its parent count in the parent
    (`StepRun.objects.executed()`), as on the stats pages.
    """
    runs = list(
        runs_visible_to(user)
        .select_related(None)
        .filter(version=version)
        .only("id", "status", "outcome", "created_at", "finished_at")
        .order_by("-created_at", "-id")[:limit]
    )
    if not runs:
        return LastRuns(runs=[], visits={}, branches=[])
    newest = {run.pk: i for i, run in enumerate(runs)}
    steps = StepRun.objects.executed().filter(run__in=list(newest))
    visits = dict(steps.order_by().values_list("step_key").annotate(n=Count("run", distinct=True)))
    took: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for row in taken_counts(steps, group=("step_key", "run")):
        took[(row["step_run__step_key"], row["branch"])].append((row["step_run__run"], row["n"]))
    branches = []
    for (step, branch), per_run in sorted(took.items()):
        per_run.sort(key=lambda pair: newest[pair[0]])
        branches.append(
            BranchRuns(
                step=step,
                branch=branch,
                runs=len(per_run),
                taken=sum(n for _, n in per_run),
                run_ids=tuple(pk for pk, _ in per_run[:RUNS_LISTED]),
            )
        )
    return LastRuns(runs=runs, visits=visits, branches=branches)


def _label(values: Sequence[Any]) -> str:
    return " · ".join(str(v) for v in values)
