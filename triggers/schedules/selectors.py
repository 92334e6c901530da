"""Read schedules as the API and the editor show them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from workflows import engine
from workflows.models import Recipe

from . import services
from .models import MissedTicks, Schedule, ScheduleTick

NEXT_RUNS = 3


@dataclass
class ScheduleView:
    """A schedule with what its page shows: next runs, last tick, latest missed ticks."""

    schedule: Schedule
    next_runs: list[datetime]
    last_tick: ScheduleTick | None
    missed: MissedTicks | None

    @property
    def state(self) -> str:
        """Say whether it runs: `running`, `paused` or `inactive` (declared `active: false`)."""
        s = self.schedule
        return "paused" if s.paused_at else "running" if s.active else "inactive"

    @property
    def description(self) -> str:
        return engine.describe_cron(self.schedule.cron)

    @property
    def missed_summary(self) -> str:
        m = self.missed
        if m is None:
            return ""
        return engine.ScheduleMissed(m.count, m.first_at, m.last_at, m.at_least).summary()


def schedule_get(*, recipe: Recipe, key: str) -> Schedule | None:
    """Return the recipe's current schedule called `key` (its name or index), or None."""
    return Schedule.objects.filter(recipe=recipe, key=key, retired=False).first()


def schedule_views(*, recipe: Recipe, now: datetime | None = None) -> list[ScheduleView]:
    """Return the recipe's current schedules in their order, each with its next runs."""
    now = now or services.clock()
    views = []
    for schedule in Schedule.objects.filter(recipe=recipe, retired=False).order_by("position"):
        upcoming = (
            engine.next_schedule_times(
                services.spec_of(schedule), max(now, schedule.checked_until), NEXT_RUNS
            )
            if schedule.runs
            else []
        )
        views.append(
            ScheduleView(
                schedule=schedule,
                next_runs=upcoming,
                last_tick=schedule.ticks.order_by("-tick_at").first(),
                missed=schedule.missed.order_by("-last_at").first(),
            )
        )
    return views
