"""Actors' workload limits: a slot per call in flight, shared by every worker through the database.

An actor with `max_concurrency` has at most that many calls in flight at once, and one with
`max_calls_per_minute` starts at most that many in any window of ACTOR_RATE_WINDOW_SECONDS
(60), whichever worker, process or machine makes them. Each call to such an actor takes a slot
(an ActorSlot row) before it is sent and gives it back when it ends, answered or not.

Taking a slot is one short transaction that works the same on both databases: the actor's row
is locked (SELECT ... FOR UPDATE on PostgreSQL; on SQLite the write transaction, begun
IMMEDIATE by the settings, already holds the whole database), the slots in flight and those of
the window are counted in one query, and a slot is inserted if both are under their limits.
A worker that dies holding a slot does not hold it for ever: past its call's time budget and a
margin (`expires_at`) the slot no longer counts as in flight, and the reaper deletes the slots
that count for nothing any more (`forget_old_slots`).

Actors without limits never touch the table: their `Limits` are read with the actor
(`runner.actors.resolve`), and `held` does nothing for them.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, IntegerField, Min, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from workflows import connections
from workflows.models import Actor

from .models import ActorSlot
from .outages import DATABASE_ERRORS

log = logging.getLogger(__name__)

# A dead worker's slot counts as in flight for its call's time budget and this much more (the
# provider's own retries are inside the budget; the margin covers a slow release).
STALE_MARGIN_S = 30.0
# Waiting in the worker for a slot (a judge or an evaluator the step calls): the first pause,
# doubled up to the last, with jitter so that waiting workers do not all ask at once.
WAIT_FIRST_S = 0.05
WAIT_MAX_S = 1.0


@dataclass(frozen=True)
class Limits:
    """An actor's limits (None: no limit)."""

    max_concurrency: int | None = None
    max_calls_per_minute: int | None = None

    @property
    def unlimited(self) -> bool:
        """Whether calls of the actor are free of any limit (they take no slot)."""
        return self.max_concurrency is None and self.max_calls_per_minute is None

    @classmethod
    def of(cls, actor: Actor) -> Limits:
        return cls(actor.max_concurrency, actor.max_calls_per_minute)


NO_LIMITS = Limits()


class ActorFull(Exception):
    """The actor has no free slot now; `retry_after_s` is when one may be free."""

    def __init__(self, actor: str, reason: str, retry_after_s: float) -> None:
        super().__init__(f"actor '{actor}' is full: {reason}")
        self.actor, self.reason, self.retry_after_s = actor, reason, retry_after_s


def window_seconds() -> float:
    return float(settings.ACTOR_RATE_WINDOW_SECONDS)


def full_retry_seconds() -> float:
    """Return how long a step whose actor is full waits in the queue (with some jitter, so
    that the steps waiting for one actor do not all come back in the same instant)."""
    base = float(settings.ACTOR_FULL_RETRY_SECONDS)
    return base + random.uniform(0, base)


def acquire(
    actor: str,
    limits: Limits,
    *,
    timeout_s: float,
    run_id: int | None = None,
    seq: int | None = None,
) -> int:
    """Take a slot of `actor` for a call of at most `timeout_s`; return its id.

    Raise ActorFull, having written nothing, if the actor has `max_concurrency` calls in
    flight or started `max_calls_per_minute` in the window.
    """
    with transaction.atomic():
        if connection.vendor != "sqlite":
            # Serialises the actor's acquirers between the count and the insert.
            list(Actor.objects.select_for_update().filter(name=actor).values_list("pk"))
        now = timezone.now()
        window_start = now - timedelta(seconds=window_seconds())
        # Without a rate limit, the ended calls of the window need not be read.
        counted = Q(released_at__isnull=True)
        if limits.max_calls_per_minute is not None:
            counted |= Q(acquired_at__gte=window_start)
        counts = ActorSlot.objects.filter(counted, actor=actor).aggregate(
            in_flight=Count("pk", filter=_in_flight(now)),
            recent=Count("pk", filter=Q(acquired_at__gte=window_start)),
            oldest=Min("acquired_at", filter=Q(acquired_at__gte=window_start)),
        )
        refusal = _refusal(limits, counts["in_flight"], counts["recent"], counts["oldest"], now)
        if refusal is not None:
            reason, retry_after_s = refusal
            raise ActorFull(actor, reason, retry_after_s)
        expires_at = now + timedelta(seconds=timeout_s + STALE_MARGIN_S)
        slot = ActorSlot.objects.create(
            actor=actor, run_id=run_id, seq=seq, acquired_at=now, expires_at=expires_at
        )
    return slot.pk


def release(slot_id: int) -> None:
    """Give a slot back (a second release changes nothing).

    A database outage here does not fail the call that has ended: the slot stops counting as
    in flight once it expires.
    """
    try:
        ActorSlot.objects.filter(pk=slot_id, released_at__isnull=True).update(
            released_at=timezone.now()
        )
    except DATABASE_ERRORS as exc:
        log.warning("could not release actor slot %s (it expires on its own): %s", slot_id, exc)


@contextmanager
def held(
    actor: str,
    limits: Limits,
    *,
    timeout_s: float,
    wait_s: float = 0,
    run_id: int | None = None,
    seq: int | None = None,
) -> Iterator[None]:
    """Hold a slot of `actor` while the block runs (nothing for an actor without limits).

    With `wait_s`, wait in this worker up to that long for a slot (polling with backoff);
    raise ActorFull if none is free by then (at once without `wait_s`).
    """
    if limits.unlimited:
        yield
        return
    slot_id = acquire_waiting(
        actor, limits, timeout_s=timeout_s, wait_s=wait_s, run_id=run_id, seq=seq
    )
    try:
        yield
    finally:
        release(slot_id)


def acquire_waiting(
    actor: str,
    limits: Limits,
    *,
    timeout_s: float,
    wait_s: float,
    run_id: int | None = None,
    seq: int | None = None,
) -> int:
    """Take a slot of `actor` as `acquire` does, waiting in this worker up to `wait_s` for
    one (polling with backoff); raise ActorFull if none is free by then."""
    deadline = time.monotonic() + wait_s
    pause = WAIT_FIRST_S
    logged = False
    while True:
        try:
            return acquire(actor, limits, timeout_s=timeout_s, run_id=run_id, seq=seq)
        except ActorFull as full:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise
            if not logged:
                log.info("run %s: step #%s waits in its worker: %s", run_id, seq, full)
                logged = True
            # A rate limit says when its window frees a slot; calls in flight do not.
            if full.retry_after_s:
                wait = full.retry_after_s + random.uniform(0, WAIT_FIRST_S)
            else:
                wait = pause * random.uniform(0.5, 1.0)
                pause = min(pause * 2, WAIT_MAX_S)
            connections.release()  # the step waits for a slot, not on the database
            time.sleep(min(remaining, wait))


def available(actor_names: Iterable[str]) -> dict[str, bool]:
    """Return, for each actor name, whether it has a free slot now (one query).

    Actors without limits, and names of no actor (a reviewer group), always have one. What a
    caller reads may be taken by another worker the next moment: it is a preference, the slot
    itself is taken by `acquire`.
    """
    names = list(dict.fromkeys(actor_names))
    free = dict.fromkeys(names, True)
    now = timezone.now()
    window_start = now - timedelta(seconds=window_seconds())

    def counted(condition: Q) -> Coalesce:
        slots = (
            ActorSlot.objects.filter(condition, actor=OuterRef("name"))
            .order_by()
            .values("actor")
            .annotate(n=Count("pk"))
            .values("n")
        )
        return Coalesce(Subquery(slots, output_field=IntegerField()), 0)

    limited = (
        Actor.objects.filter(name__in=names)
        .filter(Q(max_concurrency__isnull=False) | Q(max_calls_per_minute__isnull=False))
        .annotate(
            in_flight=counted(_in_flight(now)), recent=counted(Q(acquired_at__gte=window_start))
        )
        .values_list("name", "max_concurrency", "max_calls_per_minute", "in_flight", "recent")
    )
    for name, max_concurrency, max_calls, in_flight, recent in limited:
        limits = Limits(max_concurrency, max_calls)
        # The oldest slot of the window only says when a refused call may retry: not needed.
        free[name] = _refusal(limits, in_flight, recent, now, now) is None
    return free


def forget_old_slots(*, now: datetime | None = None) -> int:
    """Delete the slots that count for nothing any more (ended or expired, and out of the
    rate window); return how many. The reaper calls it."""
    now = now or timezone.now()
    window_start = now - timedelta(seconds=window_seconds())
    deleted, _ = (
        ActorSlot.objects.filter(acquired_at__lt=window_start)
        .filter(Q(released_at__isnull=False) | Q(expires_at__lte=now))
        .delete()
    )
    return deleted


def _in_flight(now: datetime) -> Q:
    """The slots whose call is in flight: not released, and not past the time a dead worker's
    slot stops counting."""
    return Q(released_at__isnull=True, expires_at__gt=now)


def _refusal(
    limits: Limits, in_flight: int, recent: int, oldest: datetime | None, now: datetime
) -> tuple[str, float] | None:
    """Return why a new call of an actor with these counts must wait, and for how long at
    most, or None if it may start now."""
    if limits.max_concurrency is not None and in_flight >= limits.max_concurrency:
        return f"{in_flight} of {limits.max_concurrency} calls in flight", 0.0
    if limits.max_calls_per_minute is not None and recent >= limits.max_calls_per_minute:
        window = window_seconds()
        frees_at = (oldest or now) + timedelta(seconds=window)
        retry_after = max(0.0, (frees_at - now).total_seconds())
        return f"{recent} of {limits.max_calls_per_minute} calls in {window:g} s", retry_after
    return None
