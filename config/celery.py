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
@signals.beat_init.connect
def use_persistent_connections(**_: Any) -> None:
    """Give this worker (or beat) process a persistent database connection instead of the pool.

    Settings give every process the connection pool that the ASGI server needs. A worker process
    runs one task at a time on one thread, so a pool would only add idle connections and its
    own threads, which a prefork worker's fork does not carry over. Sent by `celery worker` and
    `celery beat` before they touch the database; the embedded worker (a worker inside the web
    process) sends neither and keeps the pool.
    """
    database = settings.DATABASES["default"]
    if database.get("OPTIONS", {}).pop("pool", None):
        database["CONN_MAX_AGE"] = settings.DATABASE_WORKER_CONN_MAX_AGE
