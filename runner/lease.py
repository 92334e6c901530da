"""Keep the leases of the steps a process runs alive while they run (a model call may take
minutes), and tell a step whose lease is gone to stop.

One keeper thread per process renews every lease its threads hold, in one UPDATE a round,
whatever the number of steps in flight. It keeps one connection of the process's pool for
itself: a renewal that waited behind the steps for a connection (the pool's timeout is as long
as a lease) could let the leases lapse. A lease that is no longer held (the run was cancelled,
or another worker took the step over after this one stalled) is marked lost: the step's next
streamed token or next call raises StepAbandoned, so its thread stops waiting on an answer that
would never be committed.
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

# The longest a step runs on after its lease is gone (a round of the keeper).
CHECK_EVERY_S = 1.0


class StepAbandoned(Exception):
    """The step's lease is gone: nothing it does now could be committed."""


class LeaseKeeper:
    """Renew the leases held in this process, so that only a dead worker's leases expire."""

    def __init__(self) -> None:
        self._tokens: dict[str, int] = {}  # lease token -> run id
        self._lost: set[str] = set()
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
                self._lost.discard(token)

    def check(self, token: str) -> None:
        """Raise StepAbandoned if the lease `token` is known to be lost."""
        if token in self._lost:
            raise StepAbandoned("the step's lease is gone (the run was cancelled or taken over)")

    def held(self) -> dict[str, int]:
        with self._lock:
            return dict(self._tokens)

    def _renew(self) -> None:
        while True:  # as long as the process
            time.sleep(min(CHECK_EVERY_S, lease_seconds() / 3))
            tokens = self.held()
            if not tokens:
                continue
            try:
                lost = store.renew_leases(tokens)
            except DATABASE_ERRORS as exc:
                # Keep trying: the leases must not lapse because of a short outage. The
                # connection goes back to the pool, which drops it if it died (it does not
                # check a connection a thread holds).
                log.warning("could not renew %d leases: %s", len(tokens), exc)
                release()
                continue
            except Exception:  # nor because one round failed otherwise: the keeper lives on
                log.exception("could not renew %d leases", len(tokens))
                continue
            with self._lock:
                # Only tokens still in use: one whose block ended meanwhile was let go.
                self._lost |= {token for token in lost if token in self._tokens}


keeper = LeaseKeeper()
