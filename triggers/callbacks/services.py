"""Callback deliveries: record them when a run's events are committed, make each attempt,
schedule the retries, send one again.

Each attempt is its own Celery message, queued after the commit that scheduled it: a retry is
a message with a countdown (`backoff`), never a worker sleeping. An attempt is claimed by
moving the delivery's count of attempts on (`UPDATE ... WHERE attempts = n - 1`), so a message
delivered twice, or overtaken by a "Send again", sends nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from runner.models import Run, RunEvent, StepRun
from runner.outages import broker
from runner.status import StepStatus
from workflows import engine

from . import backoff, sending
from .models import CallbackAttempt, CallbackDelivery

log = logging.getLogger(__name__)

# triggers.callbacks.tasks.send_callback, sent by its name: the tasks module imports this one.
SEND_TASK = "triggers.send_callback"
# The answer of a run is its last succeeded step's (a human step's response is a comment).
ANSWERED_STATUSES = (StepStatus.SUCCEEDED,)


@dataclass(frozen=True, slots=True)
class Wanted:
    """An event one of the run's callbacks listens to."""

    event: RunEvent
    index: int
    callback: engine.Callback


def deliveries_record(*, run_id: int, wanted: Sequence[Wanted]) -> list[CallbackDelivery]:
    """Record a delivery for each event and callback, and queue its first attempt.

    Called after the events' commit; an event already recorded for a callback is skipped.
    """
    run = Run.objects.select_related("recipe", "version").filter(pk=run_id).first()
    if run is None:
        return []
    answer = _final_answer(run) if any(w.event.type == "run.finished" for w in wanted) else None
    deliveries = [
        CallbackDelivery(
            run=run,
            event_seq=w.event.seq,
            event_type=w.event.type,
            callback_index=w.index,
            url=w.callback.url,
            secret_env=w.callback.secret_env,
            payload=message(run, w.event, answer),
            next_attempt_at=timezone.now(),
        )
        for w in wanted
    ]
    with transaction.atomic():
        CallbackDelivery.objects.bulk_create(deliveries, ignore_conflicts=True)
        for delivery in deliveries:
            _queue_on_commit(delivery.pk, 1)
    return deliveries


def message(run: Run, event: RunEvent, answer: StepRun | None) -> dict[str, Any]:
    """Return the Standard Webhooks payload of a run's event (docs/recipe-format.md,
    "Callbacks"): `type`, `timestamp` (the event's) and `data`."""
    event_data = dict(event.data)
    data: dict[str, Any] = {
        "run": run.pk,
        "recipe": run.recipe.slug,
        "version": run.version.number,
        # The run's status: a run.* event says what it was then, others are read now.
        "status": event_data.get("status", run.status)
        if event.type.startswith("run.")
        else run.status,
        "dry_run": run.script is not None,
        "seq": event.seq,
        "run_url": settings.SITE_URL.rstrip("/") + reverse("run-monitor", args=[run.pk]),
    }
    if event.type == "run.finished":
        data["outcome"] = event_data.get("outcome", "")
        data["error"] = event_data.get("error", "")
        data["answer"] = answer.response if answer is not None else ""
        data["answer_step"] = answer.step_key if answer is not None else None
    elif event.type.startswith("human_task."):
        data["task"] = event_data
    else:
        data["event"] = event_data
    at = event.at or timezone.now()
    return {"type": event.type, "timestamp": at.isoformat(), "data": data}


def _final_answer(run: Run) -> StepRun | None:
    """Return the run's last answered step, if any."""
    return (
        StepRun.objects.filter(run=run, status__in=ANSWERED_STATUSES)
        .order_by("-seq", "-attempt")
        .only("response", "step_key")
        .first()
    )


def delivery_attempt(*, delivery_id: str, number: int) -> CallbackAttempt | None:
    """Make attempt `number` of the delivery, record it, and schedule the next if it failed.

    Returns None, sending nothing, when that attempt was made already or the delivery is no
    longer pending (a repeated message, or one a "Send again" overtook).
    """
    # Claimed at `now`: `deliveries_overdue` tells a dead attempt from one in flight by it.
    claimed = CallbackDelivery.objects.filter(
        pk=delivery_id, status=CallbackDelivery.Status.PENDING, attempts=number - 1
    ).update(attempts=number, next_attempt_at=timezone.now())
    if not claimed:
        return None
    delivery = CallbackDelivery.objects.get(pk=delivery_id)
    started_at = timezone.now()
    outcome = sending.send(
        url=delivery.url,
        message_id=str(delivery.pk),
        payload=delivery.payload,
        secret_env=delivery.secret_env,
    )
    now = timezone.now()
    next_at = None
    if not outcome.delivered and not outcome.permanent:
        next_at = backoff.next_attempt(
            series_started_at=delivery.series_started_at,
            retry=number - delivery.series_first + 1,
            now=now,
        )
    with transaction.atomic():
        attempt = CallbackAttempt.objects.create(
            delivery=delivery,
            number=number,
            manual=number == delivery.series_first and delivery.series_first > 1,
            started_at=started_at,
            status_code=outcome.status_code,
            latency_ms=outcome.latency_ms,
            error=outcome.error,
            next_attempt_at=next_at,
        )
        if outcome.delivered:
            changes: dict[str, Any] = {
                "status": CallbackDelivery.Status.DELIVERED,
                "delivered_at": now,
                "next_attempt_at": None,
            }
        elif next_at is None:
            changes = {"status": CallbackDelivery.Status.FAILED, "next_attempt_at": None}
        else:
            changes = {"next_attempt_at": next_at}
        # Only if no "Send again" started another series meanwhile.
        CallbackDelivery.objects.filter(pk=delivery.pk, attempts=number).update(**changes)
        if next_at is not None:
            _queue_on_commit(delivery.pk, number + 1, countdown=(next_at - now).total_seconds())
    if not outcome.delivered:
        log.info(
            "callback %s (%s of run %s) attempt %d failed: %s",
            delivery.pk,
            delivery.event_type,
            delivery.run_id,
            number,
            outcome.error,
        )
    return attempt


class DeliveryBusy(Exception):
    """An attempt of the delivery is being made right now: send it again afterwards."""


def delivery_resend(*, delivery: CallbackDelivery) -> CallbackDelivery:
    """Send the delivery again now, as a new series of attempts (retried for a day if it
    fails), with the same id: a receiver that took it already can tell."""
    with transaction.atomic():
        locked = CallbackDelivery.objects.select_for_update().get(pk=delivery.pk)
        made = CallbackAttempt.objects.filter(delivery=locked).count()
        if locked.status == CallbackDelivery.Status.PENDING and made < locked.attempts:
            raise DeliveryBusy(f"attempt {locked.attempts} of this callback is being made")
        now = timezone.now()
        number = locked.attempts + 1
        CallbackDelivery.objects.filter(pk=locked.pk).update(
            status=CallbackDelivery.Status.PENDING,
            series_first=number,
            series_started_at=now,
            next_attempt_at=now,
        )
        _queue_on_commit(locked.pk, number)
    locked.refresh_from_db()
    return locked


def deliveries_overdue(*, late: timedelta = timedelta(minutes=5)) -> int:
    """Queue again the pending deliveries whose attempt is overdue by `late` (its message
    was lost: a broker flushed, a worker killed mid-attempt); return how many."""
    overdue = CallbackDelivery.objects.filter(
        status=CallbackDelivery.Status.PENDING, next_attempt_at__lt=timezone.now() - late
    ).values_list("pk", "attempts")[:1000]
    count = 0
    for pk, attempts in overdue:
        # A claimed attempt whose worker died left `attempts` moved on with no record.
        made = CallbackAttempt.objects.filter(delivery_id=pk).count()
        if made < attempts:
            CallbackDelivery.objects.filter(pk=pk, attempts=attempts).update(
                attempts=F("attempts") - 1
            )
            attempts -= 1
        _queue(pk, attempts + 1)
        count += 1
    return count


def _queue_on_commit(delivery_id: object, number: int, *, countdown: float = 0) -> None:
    transaction.on_commit(lambda: _queue(delivery_id, number, countdown=countdown))


def _queue(delivery_id: object, number: int, *, countdown: float = 0) -> None:
    """Send the attempt's message; a broker that is down leaves the delivery pending, for
    `deliveries_overdue` to queue again."""
    if broker.is_open():
        log.warning("callback %s: the broker is unreachable; queued again later", delivery_id)
        return
    try:
        current_app.send_task(
            SEND_TASK,
            (str(delivery_id), number),
            countdown=max(countdown, 0) or None,
            retry=False,
            ignore_result=True,
        )
    except Exception as exc:  # kombu's and redis-py's errors have no common base
        broker.trip(exc)
        log.warning("callback %s: attempt %d could not be queued: %s", delivery_id, number, exc)
