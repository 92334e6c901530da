"""Find runs that should be moving but are not, and hand them to a worker again."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from .capacity import forget_old_slots
from .dispatch import RECOVERY_PRIORITY, enqueue
from .idempotency import forget_old_keys
from .models import Run
from .outages import broker
from .status import RUNNABLE

log = logging.getLogger(__name__)


def reap(*, now: object = None) -> int:
    """Re-enqueue runnable runs whose lease expired, or that no worker has claimed for a while.

    A message may vanish (Redis restarted or wiped) and a worker may die holding a lease; both
    leave a runnable run that nothing looks at. Enqueueing twice is harmless: claims are atomic.
    Once the broker is seen to have lost its data, every waiting run is sent again at once: a
    Redis that keeps nothing on disk comes back from a restart with empty queues.
    """
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.RUN_REQUEUE_AFTER_SECONDS)
    if broker_lost_messages():
        stale = now
    # A run whose lease ran out is handed back once, then again only if no worker has taken it
    # for a while: not at every tick while its message waits its turn behind a long queue.
    handed_back = Q(enqueued_at__gt=F("lease_expires_at"), enqueued_at__gte=stale)
    runs = (
        Run.objects.filter(status__in=RUNNABLE)
        .exclude(next={})
        .filter(
            (Q(lease_expires_at__lt=now) & ~handed_back)
            | Q(lease_expires_at__isnull=True, enqueued_at__lt=stale)
            | Q(lease_expires_at__isnull=True, enqueued_at__isnull=True)
        )
    )
    ids = list(runs.values_list("pk", flat=True))
    for run_id in ids:
        log.info("run %s: handing it to a worker again", run_id)
        enqueue(run_id, priority=RECOVERY_PRIORITY)
    forget_old_keys(now=now)
    forget_old_slots(now=now)
    return len(ids)


# A key the reaper keeps in the broker's Redis: if it is missing, Redis lost what it held (it
# restarted without persistence, or was flushed), queued messages with it.
QUEUES_INTACT_KEY = "branchline:queues-intact"


def broker_lost_messages() -> bool:
    """Return whether the broker's Redis lost its data since the reaper last looked.

    Kept in Redis itself, so any worker's reaper sees it. A Redis that persists its data keeps
    the key, but a crash can still lose the messages written since its last save: those runs
    are sent again after RUN_REQUEUE_AFTER_SECONDS. The first look ever counts too: sending a
    run twice is harmless. Other brokers never count (the embedded in-memory one lives and dies
    with this process).
    """
    if not settings.REDIS_URL or broker.is_open():
        return False
    try:
        with current_app.connection_for_write() as conn:
            restarted = bool(conn.default_channel.client.set(QUEUES_INTACT_KEY, "1", nx=True))
    except Exception as exc:  # the broker is down: the next tick looks again
        broker.trip(exc)
        return False
    if restarted:
        log.warning("the broker lost its queues: sending every waiting run again")
    return restarted


def recover_on_start() -> int:
    """Hand every runnable run to a worker again; for the embedded worker's start.

    Live leases are left alone: `run_recipe` may start its own embedded worker beside a running
    server on the same SQLite file, and must not take steps that server is running. A lease of
    a process that is gone expires and the reaper hands its run back.
    """
    ids = list(
        Run.objects.filter(status__in=RUNNABLE)
        .exclude(next={})
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=timezone.now()))
        .values_list("pk", flat=True)
    )
    for run_id in ids:
        enqueue(run_id, priority=RECOVERY_PRIORITY)
    if ids:
        log.info("picked up %d unfinished runs", len(ids))
    return len(ids)
