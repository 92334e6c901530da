"""The Celery app. Workers: `celery -A config worker`; timers: `celery -A config beat`."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("branchline")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
