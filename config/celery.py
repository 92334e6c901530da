"""The Celery app. Workers: `celery -A config worker`; timers: `celery -A config beat`."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery, signals
from celery.concurrency.thread import TaskPool as ThreadsPool
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("branchline")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.celeryd_init.connect
def size_the_worker_pool(**_: Any) -> None:
    """Give this worker process its own bounds on the connection pool.

    Settings size the pool for the ASGI server. A worker's threads hold a connection only
    while they read or commit (a step gives it back while it waits on a model:
    workflows/connections.py), so a few serve a hundred steps in flight; a step that finds
    them all busy waits longer than a request would. Sent by `celery worker` before it
    touches the database; the embedded worker (inside the web process) shares the web pool.
    """
    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
    if pool:
        pool["max_size"] = settings.DATABASE_WORKER_POOL_MAX_SIZE
        pool["min_size"] = min(pool["min_size"], pool["max_size"])
        pool["timeout"] = pool["reconnect_timeout"] = settings.DATABASE_WORKER_POOL_TIMEOUT


# How often a threads-pool worker's event loop wakes by itself (see below).
THREADS_LOOP_WAKE_S = 0.01


@signals.worker_ready.connect
def wake_the_threads_pool_loop(sender: Any, **_: Any) -> None:
    """Wake the worker's event loop every THREADS_LOOP_WAKE_S under the threads pool.

    A task of the threads pool ends in its own thread, and nothing wakes the event loop to
    take the next message in its place: with the pool's prefetch used up, the loop sleeps
    until its next timer, up to seconds, and a run handed back to the queue waits that long
    (celery/celery#6941). A timer that does nothing bounds the wait; a wake costs
    microseconds.
    """
    if isinstance(sender.pool, ThreadsPool) and sender.timer is not None:
        sender.timer.call_repeatedly(THREADS_LOOP_WAKE_S, _nothing)


def _nothing() -> None:
    """A timer's whole work: waking the loop."""
