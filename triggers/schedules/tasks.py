"""The beat task of schedules: thin, and any number of them at once start each tick once."""

from __future__ import annotations

from celery import shared_task

from . import services

TICK_TASK = "triggers.schedules_tick"


@shared_task(name=TICK_TASK, ignore_result=True)
def schedules_tick() -> int:
    """Start the runs of the schedule ticks that are due."""
    return services.schedules_tick()
