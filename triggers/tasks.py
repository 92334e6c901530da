"""The triggers' Celery tasks (found by `app.autodiscover_tasks()`), each kind's in its package."""

from __future__ import annotations

from .schedules.tasks import schedules_tick

__all__ = ["schedules_tick"]
