"""The embedded default: a real Celery worker and the beat duties inside the app's process.

With no REDIS_URL, the broker is kombu's in-memory transport, so the worker must live in the
same process as the code that enqueues. It is set up the way `celery.contrib.testing.worker`
sets up its worker (a bare worker thread silently runs nothing). Never eager mode: that would
run steps inside web requests and could not wait for a human.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from celery import current_app
from celery.contrib.testing.worker import TestWorkController, setup_app_for_worker
from django.conf import settings
from django.db import close_old_connections

from knowledge.ingest import requeue_stalled

from .human import tasks_expire
from .maintenance import reap, recover_on_start

log = logging.getLogger(__name__)

_started = threading.Lock()
_worker: TestWorkController | None = None
# What apps above the runner add to each beat round (the triggers' schedules).
_duties: list[Callable[[], object]] = []


def add_duty(duty: Callable[[], object]) -> None:
    """Run `duty` in each round of the embedded beat too (once, however often it is added)."""
    if duty not in _duties:
        _duties.append(duty)


def start() -> TestWorkController:
    """Start the in-process worker and beat thread once; return the worker."""
    global _worker
    with _started:
        if _worker is not None:
            return _worker
        app = current_app._get_current_object()  # the app config/celery.py made
        setup_app_for_worker(app, "warning", None)
        worker = TestWorkController(
            app=app,
            # Steps in threads, as a `celery worker`'s (settings.CELERY_WORKER_POOL): many calls
            # in flight, each giving its database connection back while it waits.
            concurrency=settings.CELERY_WORKER_CONCURRENCY,
            hostname="embedded@branchline",
            pool=settings.CELERY_WORKER_POOL,
            loglevel="warning",
            logfile=None,
            ready_callback=None,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
        )
        threading.Thread(target=worker.start, name="embedded-worker", daemon=True).start()
        worker.ensure_started()
        threading.Thread(target=_beat, name="embedded-beat", daemon=True).start()
        _worker = worker
        log.info("embedded worker started (in-memory broker)")
        return worker


def _beat() -> None:
    """Run the periodic duties: pick up stalled runs (at once on start), expire human tasks,
    send again the messages of documents to ingest that were lost, and those added by other
    apps (`add_duty`)."""
    try:
        recover_on_start()
    except Exception:
        log.exception("could not pick up unfinished runs")
    while True:
        close_old_connections()
        try:
            reap()
            tasks_expire()
            requeue_stalled()  # documents whose message a restart lost
        except Exception:  # keep the duties alive; the next round tries again
            log.exception("embedded beat round failed")
        for duty in _duties:  # each on its own: one app's fault does not stop another's
            try:
                duty()
            except Exception:
                log.exception("embedded beat duty %s failed", duty.__name__)
        close_old_connections()
        time.sleep(settings.RUN_BEAT_INTERVAL_SECONDS)
