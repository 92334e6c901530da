"""Keep a claimed run's lease alive while its step runs (a model call may take minutes)."""

from __future__ import annotations

import logging
import threading

from django.db import connection

from . import store
from .claims import lease_seconds
from .outages import DATABASE_ERRORS

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Renew the run's lease while a step runs, so that only a dead worker's lease expires."""

    def __init__(self, run_id: int, token: str) -> None:
        self.run_id, self.token = run_id, token
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._renew, name=f"lease-{run_id}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _renew(self) -> None:
        interval = lease_seconds() / 3
        try:
            while not self.stop.wait(interval):
                try:
                    store.renew_lease(self.run_id, self.token)
                except DATABASE_ERRORS as exc:
                    # Keep trying: the lease must not lapse because of a short outage.
                    log.warning("run %s: could not renew the lease: %s", self.run_id, exc)
                    connection.close()
        finally:
            connection.close()
