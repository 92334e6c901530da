"""Hand runs to the workers: the Celery message that says "look at run N".

The message carries only the run's id (the run's state is in the database), and is sent by the
task's name, so that the modules which send it need not import the tasks that call them back.
"""

from __future__ import annotations

import logging
from contextlib import suppress

from celery import current_app
from django.db import transaction

from . import store
from .outages import DATABASE_ERRORS, broker

log = logging.getLogger(__name__)

ADVANCE_TASK = "runner.advance_run"  # runner.tasks.advance_run

# Messages of runs that were interrupted or lost jump the queue (with Redis, 0 is served first;
# CELERY_TASK_DEFAULT_PRIORITY is below it), so that a recovered run does not wait behind every
# run queued since.
RECOVERY_PRIORITY = 0


def enqueue(run_id: int, *, priority: int | None = None) -> None:
    """Ask a worker to look at the run (after the current transaction commits, if any)."""
    store.mark_enqueued(run_id)
    send_on_commit(run_id, priority=priority)


def send_on_commit(
    run_id: int, *, priority: int | None = None, countdown: float | None = None
) -> None:
    """Send the run's message once the current transaction commits; the caller has set the
    run's `enqueued_at` in it (the reaper resends messages that never left). With
    `countdown`, a worker gets it that many seconds later."""
    transaction.on_commit(lambda: send(run_id, priority=priority, countdown=countdown))


def send(run_id: int, *, priority: int | None = None, countdown: float | None = None) -> bool:
    """Send the run's message now (or for `countdown` seconds later); return whether the
    broker took it.

    What the message asks for is already committed, so a broker that is down or frozen must
    not fail (or hold up) the caller: the send is bounded by the broker's socket timeouts,
    and a run whose message did not leave is marked for the reaper's next tick.
    """
    if broker.is_open():
        sent = False
    else:
        try:
            current_app.send_task(
                ADVANCE_TASK,
                (run_id,),
                priority=priority,
                countdown=countdown,
                retry=False,
                ignore_result=True,
            )
            sent = True
        except Exception as exc:  # kombu's and redis-py's errors have no common base
            broker.trip(exc)
            sent = False
    if not sent:
        log.warning("run %s: the broker is unreachable; the reaper will send it", run_id)
        with suppress(*DATABASE_ERRORS):
            store.mark_unsent(run_id)
    return sent
