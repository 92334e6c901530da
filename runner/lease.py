"""Keep the leases of the steps a process runs alive while they run (a model call may take
minutes).

One keeper thread per process renews every lease its threads hold, in one UPDATE a round,
whatever the number of steps in flight; between rounds it holds no database connection.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from workflows.connections import release

from . import store
from .claims import lease_seconds
from .outages import DATABASE_ERRORS

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Renew the leases held in this process, so that only a dead worker's leases expire."""

    def __init__(self) -> None:
        self._tokens: dict[str, int] = {}  # lease token -> run id
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextmanager
    def holding(self, run_id: int, token: str) -> Iterator[None]:
        """Keep the run's lease `token` alive for the duration of the block."""
        with self._lock:
            self._tokens[token] = run_id
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._renew, name="lease-keeper", daemon=True
                )
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._tokens.pop(token, None)

    def held(self) -> dict[str, int]:
        with self._lock:
            return dict(self._tokens)

    def _renew(self) -> None:
        while True:  # as long as the process
            time.sleep(lease_seconds() / 3)
            tokens = self.held()
            if not tokens:
                continue
            try:
                store.renew_leases(tokens)
            except DATABASE_ERRORS as exc:
                # Keep trying: the leases must not lapse because of a short outage.
                log.warning("could not renew %d leases: %s", len(tokens), exc)
            finally:
                release()


keeper = LeaseKeeper()
