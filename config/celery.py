"""The Celery app. Workers: `celery -A config worker`; timers: `celery -A config beat`."""

from __future__ import annotations

import contextlib
import os
import threading
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


@signals.worker_ready.connect
def wake_the_loop_on_handoffs(sender: Any, **_: Any) -> None:
    """Under the threads pool, wake the worker's event loop when a task thread hands it work.

    A task of the threads pool ends in its own thread and hands its ack to the event loop
    (`hub.call_soon`), which wakes nothing: with the pool's prefetch used up, the loop sleeps
    until its next timer, up to seconds, and a run handed back to the queue waits that long
    (celery/celery#6941). See LoopWaker.
    """
    if isinstance(sender.pool, ThreadsPool) and sender.hub is not None:
        LoopWaker(sender.hub)


class LoopWaker:
    """Make `hub.call_soon` from another thread wake the hub's poll, through a pipe it reads.

    Event-driven rather than a timer: a loop woken every 10 ms cost an idle worker 5 % of a
    core, and each wake re-registers every socket of the broker's poller. Made on
    `worker_ready`, once, in the loop's thread; the pipe's reader is put back on each tick
    because the hub drops its readers when it reconnects to the broker.
    """

    def __init__(self, hub: Any) -> None:
        self._hub = hub
        self._loop_thread = threading.get_ident()
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self._write_fd, False)
        self._hub_call_soon = hub.call_soon
        hub.call_soon = self.call_soon
        hub.on_tick.add(self._keep_reading)
        self._keep_reading()

    def call_soon(self, callback: Any, *args: Any) -> Any:
        handle = self._hub_call_soon(callback, *args)
        if threading.get_ident() != self._loop_thread:
            # A full pipe already holds a wake the loop has not read yet.
            with contextlib.suppress(BlockingIOError):
                os.write(self._write_fd, b"\0")
        return handle

    def _keep_reading(self) -> None:
        if self._read_fd not in self._hub.readers:
            self._hub.add_reader(self._read_fd, self._drain)

    def _drain(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._read_fd, 4096):
                pass
