"""The triggers' models, each kind in its own package."""

from __future__ import annotations

from .schedules.models import MissedTicks, Schedule, ScheduleTick

__all__ = ["MissedTicks", "Schedule", "ScheduleTick"]
