"""Hear a run's committed events (`runner.signals.run_events_committed`) and record the
deliveries its recipe's callbacks ask for.

This runs after every commit of every run, in the process that committed (a worker between
two steps, a request): for a run whose version has no callbacks it must cost nothing. So the
callbacks of a run are looked up once per process (its version's parsed graph, which
`runner.versions` caches) and kept; a run queued again (resumed, perhaps on
another version) is looked up afresh.

The deliveries are recorded after the events' commit: a process that dies in between would
lose them, so the overdue sweep (`callbacks_sweep`) also records those of recent events that
have none (the unique (run, event, callback) makes that idempotent).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from runner.models import Run, RunEvent
from runner.versions import version_graph
from workflows import engine

from .models import CallbackDelivery
from .services import Wanted, deliveries_overdue, deliveries_record

log = logging.getLogger(__name__)

MAX_RUNS_KEPT = 4096

# Each run's callbacks, by run id, the most recently used last.
_callbacks: OrderedDict[int, tuple[engine.Callback, ...]] = OrderedDict()
_lock = threading.Lock()


def on_events_committed(sender: Any, *, run_id: int, events: Sequence[RunEvent], **_: Any) -> None:
    """Record and queue the deliveries of these events that the run's callbacks listen to."""
    fresh = any(event.type == "run.queued" for event in events)
    callbacks = run_callbacks(run_id, fresh=fresh)
    wanted = [
        Wanted(event, index, callback)
        for event in events
        for index, callback in enumerate(callbacks)
        if callback.listens_to(event.type)
    ]
    if wanted:
        deliveries_record(run_id=run_id, wanted=wanted)


def run_callbacks(run_id: int, *, fresh: bool = False) -> tuple[engine.Callback, ...]:
    """Return the callbacks of the run's version (none for a run that is gone)."""
    with _lock:
        callbacks = None if fresh else _callbacks.get(run_id)
        if callbacks is not None:
            _callbacks.move_to_end(run_id)
            return callbacks
    version = Run.objects.filter(pk=run_id).values_list("version_id", "version__created_at")
    callbacks = _version_callbacks(version.first())
    with _lock:
        _callbacks[run_id] = callbacks
        while len(_callbacks) > MAX_RUNS_KEPT:
            _callbacks.popitem(last=False)
    return callbacks


def _version_callbacks(version: tuple[int, datetime] | None) -> tuple[engine.Callback, ...]:
    if version is None:
        return ()
    try:
        graph, _ = version_graph(*version)
    except engine.RecipeInvalid:
        return ()  # a version this engine no longer reads: its run fails on its own
    return graph.callbacks


def callbacks_sweep() -> int:
    """Record the deliveries a crash lost, and queue again those overdue; return how many
    (the beat's `triggers.requeue_callbacks`, and a duty of the embedded beat)."""
    return deliveries_missing() + deliveries_overdue()


def deliveries_missing(
    *, within: timedelta = timedelta(days=1), settle: timedelta = timedelta(minutes=1)
) -> int:
    """Record and queue the deliveries of the events committed in the last `within` that a
    callback listens to and that have none; return how many.

    An event younger than `settle` is left to the handler of its commit, still at work.
    """
    now = timezone.now()
    since, until = now - within, now - settle
    runs = Run.objects.filter(
        Q(finished_at__isnull=True) | Q(finished_at__gte=since),
        version__document__callbacks__0__isnull=False,
    ).values_list("pk", flat=True)
    recorded = 0
    for run_id in runs.iterator():
        callbacks = run_callbacks(run_id, fresh=True)
        types = {event_type for callback in callbacks for event_type in callback.on}
        if not types:
            continue
        done = set(
            CallbackDelivery.objects.filter(run_id=run_id).values_list(
                "event_seq", "callback_index"
            )
        )
        events = RunEvent.objects.filter(
            run_id=run_id, type__in=types, at__gte=since, at__lt=until
        ).order_by("seq")
        wanted = [
            Wanted(event, index, callback)
            for event in events
            for index, callback in enumerate(callbacks)
            if callback.listens_to(event.type) and (event.seq, index) not in done
        ]
        if wanted:
            log.warning(
                "run %s: %d callback deliveries were not recorded; now", run_id, len(wanted)
            )
            deliveries_record(run_id=run_id, wanted=wanted)
            recorded += len(wanted)
    return recorded
