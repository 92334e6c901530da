"""The set-up of the benchmarks that measure the app over HTTP and websockets (ws_latency.py,
ws_fanout.py, inbox_scale.py): Django on a scratch PostgreSQL database, and the app served by
daphne in a process of its own.

    with scratch_django("branchline_bench_x"):   # created, migrated; dropped on leaving
        ...                                        # rows made here, in this process
        with served() as server:                   # daphne on server.port
            commits = run_here_stamping_commits()  # {first event seq: commit time}
            ...

The scratch database is made next to BENCH_POSTGRES_URL (default
postgres://postgres@127.0.0.1:5432/postgres); Redis is REDIS_URL (default
redis://127.0.0.1:6379/0).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.live_server import LiveServer  # noqa: E402


def _admin(url: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


@contextmanager
def scratch_django(database: str) -> Iterator[None]:
    """Set Django up on `database`, created afresh and migrated; drop it on leaving."""
    admin_url = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    drop = f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"
    _admin(admin_url, drop, f"CREATE DATABASE {database}")
    os.environ["DATABASE_URL"] = urlunsplit(urlsplit(admin_url)._replace(path=f"/{database}"))
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
    os.environ.setdefault("SECRET_KEY", "benchmark-only-not-secret")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["EMBEDDED_WORKER"] = "0"
    os.environ["LOG_LEVEL"] = "WARNING"
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        yield
    finally:
        from django.db import connections

        connections.close_all()
        _admin(admin_url, drop)


@contextmanager
def served() -> Iterator[LiveServer]:
    """Serve the app in daphne, a process of its own (its log in a temporary folder)."""
    log = Path(tempfile.mkdtemp()) / "daphne.log"
    with LiveServer(os.environ, log=log, verbosity=0) as server:
        yield server


def run_here_stamping_commits() -> dict[int, float]:
    """Make this process the worker (runs move on here, not through Celery messages) and
    return the dict that each commit of run events is stamped into: its first event's seq ->
    `time.perf_counter()` when COMMIT returned (perf_counter is the machine's monotonic clock,
    shared by its processes)."""
    from django.db import transaction

    from runner import dispatch, events

    dispatch.send_on_commit = lambda run_id: None  # type: ignore[assignment]
    commits: dict[int, float] = {}
    push_on_commit = events.push_on_commit

    def stamped_push(run_id: int, owner_id: int, rows: Any) -> None:
        if rows:
            # Registered before the push's own callback: it runs the moment COMMIT returns (at
            # once after a step's one-statement commit, which is its own transaction).
            seq = rows[0].seq
            transaction.on_commit(lambda: commits.setdefault(seq, time.perf_counter()))
        push_on_commit(run_id, owner_id, rows)

    events.push_on_commit = stamped_push  # type: ignore[assignment]
    return commits
