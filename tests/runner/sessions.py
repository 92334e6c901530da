"""Count the test database's sessions of the app's processes while a test loads them: a thread
samples `pg_stat_activity` every few milliseconds, by the application name each process
connects with (the server's, `SERVER_APPLICATION_NAME`; the worker's, `APPLICATION_NAME`)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from tests.runner.server_process import SERVER_APPLICATION_NAME
from tests.runner.worker_process import APPLICATION_NAME, database_url

SAMPLER_APPLICATION_NAME = "branchline-session-sampler"


@dataclass
class Sessions:
    """The most sessions of the server and of the worker seen at once, and which they were."""

    server_max: int = 0
    worker_max: int = 0
    samples: int = 0
    worker_sessions: set[tuple[int, Any]] = field(default_factory=set)


class SessionSampler:
    """Sample the test database's sessions every few milliseconds, from a thread of its own."""

    INTERVAL_S = 0.005
    LIMIT_S = 150.0

    def __init__(self) -> None:
        self.sessions = Sessions()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="session-sampler")
        self._error: BaseException | None = None

    def __enter__(self) -> Sessions:
        self._conn = psycopg.connect(database_url(SAMPLER_APPLICATION_NAME), autocommit=True)
        self._thread.start()
        return self.sessions

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._conn.close()
        if self._error is not None:
            raise self._error

    def _sample(self) -> None:
        deadline = time.monotonic() + self.LIMIT_S
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                rows = self._conn.execute(
                    "SELECT application_name, pid, backend_start FROM pg_stat_activity "
                    "WHERE datname = current_database() AND application_name = ANY(%s)",
                    [[SERVER_APPLICATION_NAME, APPLICATION_NAME]],
                ).fetchall()
                s = self.sessions
                server = [r for r in rows if r[0] == SERVER_APPLICATION_NAME]
                worker = [(pid, started) for name, pid, started in rows if name == APPLICATION_NAME]
                s.server_max = max(s.server_max, len(server))
                s.worker_max = max(s.worker_max, len(worker))
                s.worker_sessions.update(worker)
                s.samples += 1
                self._stop.wait(self.INTERVAL_S)
        except BaseException as exc:  # reported by __exit__, in the test's thread
            self._error = exc
