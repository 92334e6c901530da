"""Passing outages of the database and of Redis: what they raise, and a breaker that keeps a
process from waiting on a service it has just found unreachable.

Runs live in the database, so a database outage interrupts work, which is retried once it is
back (`runner.tasks`). Redis only carries messages and live pushes, both of which are covered
by the database (the reaper resends runs whose message did not leave; websocket consumers catch
up from the event log), so while it is unreachable, sends are skipped rather than waited on.
"""

from __future__ import annotations

import logging
import threading
import time

import kombu.exceptions
import redis.exceptions
from django.db import InterfaceError, OperationalError

log = logging.getLogger(__name__)

# The database went away (restart, failover, network) or refused a connection: retry later.
DATABASE_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError)

# Redis (the broker or the channel layer) refused, dropped or timed out: kombu wraps redis-py's
# errors in its OperationalError on some paths and not on others, and a socket may fail first.
BROKER_ERRORS: tuple[type[Exception], ...] = (
    kombu.exceptions.OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    ConnectionError,
    TimeoutError,
)


class Breaker:
    """Remember for a moment that a service failed, so that callers skip it instead of each
    waiting out its timeout; the first call after the pause tries it again."""

    def __init__(self, name: str, pause_s: float = 1.0) -> None:
        self.name = name
        self.pause_s = pause_s
        self._open_until = 0.0
        self._lock = threading.Lock()

    def is_open(self) -> bool:
        """Return whether calls should skip the service now."""
        return time.monotonic() < self._open_until

    def trip(self, exc: BaseException) -> None:
        """Record a failure of the service: skip it for the pause."""
        with self._lock:
            first = not self.is_open()
            self._open_until = time.monotonic() + self.pause_s
        if first:
            log.warning(
                "%s is unreachable (%s); skipping it for %.1f s", self.name, exc, self.pause_s
            )

    def reset(self) -> None:
        """Forget a failure: the next call tries the service (for tests)."""
        self._open_until = 0.0


broker = Breaker("the Celery broker")
channel_layer = Breaker("the channel layer's Redis")
