"""The Celery app. Workers: `celery -A config worker`; timers: `celery -A config beat`."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery, signals
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
