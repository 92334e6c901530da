"""Celery workers as separate processes, for the tests that kill them.

A worker in the test process cannot be SIGKILLed without killing the tests, and a separate process
cannot share SQLite in memory or the memory:// broker: these workers need PostgreSQL and Redis.

They consume a queue of their own (`QUEUE`), and send the runs they hand back to it too, so that
no other worker on the same broker (the in-process worker of `tests/runner/conftest.py`, alive
for the rest of a test session once a test used it) takes a message meant for them. The test
process sends there too with `app.conf.task_default_queue = QUEUE`.

`python -m tests.runner.worker_process QUEUE [celery worker options]` is `celery -A config worker`
with that default queue.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from config.celery import app as celery_app

QUEUE = "branchline-faults"
APPLICATION_NAME = "branchline-fault-worker"
ROOT = Path(__file__).resolve().parents[2]


def require_services() -> None:
    """Skip unless PostgreSQL and Redis are configured; with CI=true, fail instead."""
    missing = []
    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        missing.append("DATABASE_URL is not a PostgreSQL database")
    if not settings.REDIS_URL:
        missing.append("REDIS_URL is not set")
    if not missing:
        return
    reason = "workers in separate processes need PostgreSQL and Redis: " + "; ".join(missing)
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def database_url(application_name: str = APPLICATION_NAME) -> str:
    """Return a DATABASE_URL for the database the tests use now (the test database), whose
    sessions show `application_name` in pg_stat_activity."""
    db = settings.DATABASES["default"]
    user = quote(db.get("USER") or "", safe="")
    password = quote(db.get("PASSWORD") or "", safe="")
    credentials = f"{user}:{password}@" if password else f"{user}@" if user else ""
    port = f":{db['PORT']}" if db.get("PORT") else ""
    host = db.get("HOST") or ""
    name = quote(db["NAME"], safe="")
    return f"postgres://{credentials}{host}{port}/{name}?application_name={application_name}"


def worker_env(**overrides: Any) -> dict[str, str]:
    """Return the environment of a worker process: this test session's database and broker."""
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url(),
        REDIS_URL=settings.REDIS_URL,
        SECRET_KEY=settings.SECRET_KEY,
        DJANGO_SETTINGS_MODULE=os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings"),
        EMBEDDED_WORKER="0",
        LOG_LEVEL="INFO",  # the worker's -l option sets the level
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    env.update({key: str(value) for key, value in overrides.items()})
    return env


def purge_queue() -> int:
    """Drop the messages waiting in the workers' queue (left over by an earlier session)."""
    with celery_app.connection_for_write() as conn:
        try:
            return conn.default_channel.queue_purge(QUEUE) or 0
        except conn.channel_errors:
            return 0


class WorkerProcess:
    """One `celery worker` process, in a process group of its own so it can be killed whole."""

    def __init__(
        self,
        name: str,
        log_dir: Path,
        *,
        pool: str,
        concurrency: int = 1,
        loglevel: str = "warning",
        **env: Any,
    ) -> None:
        self.name = name
        self.hostname = f"{name}@faults"
        self.pool = pool
        self.concurrency = concurrency
        self.loglevel = loglevel
        self.log_path = log_dir / f"{name}.log"
        # Celery takes `--pool prefork` for no option at all, so the pool comes from the env.
        self.env = worker_env(WORKER_POOL=pool, **env)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        options = [
            f"--pool={self.pool}",
            f"--concurrency={self.concurrency}",
            "-l",
            self.loglevel,
            "-n",
            self.hostname,
        ]
        options += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.runner.worker_process", QUEUE, *options],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: killpg takes the pool too
            )
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, timeout: float = 90) -> WorkerProcess:
        """Wait until the worker answers a ping (it consumes its queue from then on)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive:
                raise AssertionError(f"worker {self.name} exited:\n{self.log_tail()}")
            if celery_app.control.ping(destination=[self.hostname], timeout=0.5):
                return self
        raise AssertionError(f"worker {self.name} did not start:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and pool) and reap it: no cleanup runs."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def freeze(self) -> None:
        """SIGSTOP the worker: it holds its lease but stops renewing it, as in a long GC pause."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGCONT)

    def kill_pool_process(self) -> bool:
        """SIGKILL only the prefork pool process running the task; the main process lives on.

        That is what the kernel's OOM killer does to a worker: the main process sees the pool
        process die (WorkerLostError) and, with `reject_on_worker_lost`, requeues the message.
        """
        assert self.process is not None and self.pool == "prefork"
        children = _children(self.process.pid)
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return bool(children)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces, so split after the last ')'.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def wait_for_worker_sessions_to_close(
    timeout: float = 10, application_name: str = APPLICATION_NAME
) -> None:
    """Wait until killed processes' database sessions (those showing `application_name`) are
    gone, so the test database can be dropped."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = %s",
                [application_name],
            )
            if cursor.fetchone()[0] == 0:
                return
            time.sleep(0.1)


def main(argv: list[str]) -> None:
    queue, *options = argv
    celery_app.conf.task_default_queue = queue
    celery_app.worker_main(["worker", *options])


if __name__ == "__main__":
    main(sys.argv[1:])
