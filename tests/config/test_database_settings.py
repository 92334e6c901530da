"""The database settings of each process kind, read in a fresh interpreter (settings are read
once per process). No database is reached: the URL only has to name PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
POSTGRES_URL = "postgres://branchline@127.0.0.1:5432/branchline"

# Print the default database's pool options and CONN_MAX_AGE, after `celery worker`'s start
# signal when asked to.
SHOW_DATABASE = """
import json, sys
import django
django.setup()
from celery import signals
from django.conf import settings
if sys.argv[1:] == ["worker"]:
    signals.celeryd_init.send(sender="worker@test", instance=None, conf=None, options={})
database = settings.DATABASES["default"]
print(json.dumps({"pool": database["OPTIONS"].get("pool"), "age": database["CONN_MAX_AGE"]}))
"""


def settings_process(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATABASE_", "CONN_MAX_AGE", "WORKER_"))
    }
    environment.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=POSTGRES_URL,
        SECRET_KEY="settings-tests-only",
        REDIS_URL="",
        **env,
    )
    return subprocess.run(
        [sys.executable, "-c", SHOW_DATABASE, *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def database(*args: str, **env: str) -> dict[str, object]:
    done = settings_process(*args, **env)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_web_process_shares_a_pool_sized_by_the_environment() -> None:
    # A request waits for a connection as long as the pool goes on reconnecting in the
    # background after losing one; then the next request reconnects at once.
    assert database() == {
        "pool": {
            "min_size": 2,
            "max_size": 20,
            "timeout": 10.0,
            "reconnect_timeout": 10.0,
            "name": "branchline",
        },
        "age": 0,
    }
    assert database(
        DATABASE_POOL_MIN_SIZE="0", DATABASE_POOL_MAX_SIZE="4", DATABASE_POOL_TIMEOUT="1.5"
    ) == {
        "pool": {
            "min_size": 0,
            "max_size": 4,
            "timeout": 1.5,
            "reconnect_timeout": 1.5,
            "name": "branchline",
        },
        "age": 0,
    }


def test_a_celery_worker_process_shares_a_smaller_pool_of_its_own() -> None:
    # Its threads give their connection back while they wait on a model, so a few serve a
    # hundred steps in flight; a step waits longer for one than a request would.
    assert database("worker") == {
        "pool": {
            "min_size": 2,
            "max_size": 8,
            "timeout": 30.0,
            "reconnect_timeout": 30.0,
            "name": "branchline",
        },
        "age": 0,
    }
    sized = database("worker", DATABASE_WORKER_POOL_MAX_SIZE="1", DATABASE_WORKER_POOL_TIMEOUT="5")
    assert sized["pool"] == {
        "min_size": 1,
        "max_size": 1,
        "timeout": 5.0,
        "reconnect_timeout": 5.0,
        "name": "branchline",
    }


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DATABASE_POOL_MAX_SIZE": "0"}, "DATABASE_POOL_MAX_SIZE must be at least 1"),
        ({"DATABASE_POOL_MIN_SIZE": "-1"}, "DATABASE_POOL_MIN_SIZE must be between 0 and"),
        (
            {"DATABASE_POOL_MIN_SIZE": "5", "DATABASE_POOL_MAX_SIZE": "4"},
            "DATABASE_POOL_MIN_SIZE must be between 0 and DATABASE_POOL_MAX_SIZE",
        ),
        (
            {"DATABASE_POOL_TIMEOUT": "0"},
            "DATABASE_POOL_TIMEOUT and DATABASE_WORKER_POOL_TIMEOUT must be",
        ),
        (
            {"DATABASE_POOL_TIMEOUT": "-2"},
            "DATABASE_POOL_TIMEOUT and DATABASE_WORKER_POOL_TIMEOUT must be",
        ),
        ({"DATABASE_POOL_TIMEOUT": "inf"}, "could not convert string to float"),
        ({"DATABASE_POOL_MAX_SIZE": "many"}, "invalid literal for int()"),
        (
            {"DATABASE_WORKER_POOL_MAX_SIZE": "0"},
            "DATABASE_WORKER_POOL_MAX_SIZE must be at least 1",
        ),
        (
            {"DATABASE_WORKER_POOL_TIMEOUT": "0"},
            "DATABASE_WORKER_POOL_TIMEOUT must be numbers of seconds",
        ),
        ({"WORKER_CONCURRENCY": "0"}, "WORKER_CONCURRENCY must be at least 1"),
        ({"WORKER_POOL": "gevent"}, "WORKER_POOL must be threads, prefork or solo"),
    ],
)
def test_it_refuses_to_start_with_a_bad_pool_setting(env: dict[str, str], message: str) -> None:
    done = settings_process(**env)
    assert done.returncode != 0
    assert message in done.stderr
