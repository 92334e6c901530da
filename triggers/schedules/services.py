"""Write schedules: follow the latest published version, start the runs that are due, pause
and resume.

Exactly once per tick: a round locks each due schedule's row (rows another process holds are
skipped, it is doing them) and, for each tick, inserts the tick's unique row and starts its run
in one transaction. A process that looks at the same tick later finds it done; one that
looks at the same time finds the row locked, or fails to insert the same tick and starts
nothing.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from runner.inputs import InputsInvalid
from runner.services import RunNotStartable, run_start
from workflows import engine
from workflows.models import RecipeVersion

from .models import MissedTicks, Schedule, ScheduleTick

log = logging.getLogger(__name__)

# The most due schedules one round looks at; the next round (seconds later) takes the rest.
ROUND_MAX = 500


def clock() -> datetime:
    """Return the time schedules go by (the tests hold it still)."""
    return timezone.now()


def spec_of(schedule: Schedule) -> engine.ScheduleSpec:
    """Return the engine's view of a schedule row."""
    return engine.ScheduleSpec(
        key=schedule.key,
        cron=schedule.cron,
        timezone=schedule.timezone,
        inputs=schedule.inputs,
        active=schedule.active,
        catch_up=schedule.catch_up,
        index=schedule.position,
    )


def next_tick(schedule: Schedule) -> datetime | None:
    """Return when the schedule's next run is due, or None when it runs none."""
    if not schedule.runs:
        return None
    upcoming = engine.next_schedule_times(spec_of(schedule), schedule.checked_until, 1)
    return upcoming[0] if upcoming else None


def schedules_sync(*, version: RecipeVersion, now: datetime | None = None) -> None:
    """Make the recipe's schedules those `version` (its new latest published one) declares.

    A schedule keeps its row, pause and history by its key; one that starts running (new,
    back in the recipe, made active) counts its ticks from now: those before were not missed.
    """
    now = now or clock()
    specs: dict[str, engine.ScheduleSpec] = {}
    if version.document.get("schedules"):
        try:
            specs = {s.key: s for s in engine.parse_recipe(version.document).schedules}
        except engine.RecipeInvalid as exc:  # published before a check it fails was added
            log.warning("%s: schedules not read: %s", version, "; ".join(exc.errors))
    with transaction.atomic():  # the publish's own, or one of its own for a bare insert
        _sync_rows(version, specs, now)


def _sync_rows(
    version: RecipeVersion, specs: dict[str, engine.ScheduleSpec], now: datetime
) -> None:
    rows = {
        row.key: row
        for row in Schedule.objects.select_for_update().filter(recipe_id=version.recipe_id)
    }
    for key, spec in specs.items():
        row = rows.get(key) or Schedule(recipe_id=version.recipe_id, key=key, checked_until=now)
        was_running = row.pk is not None and row.runs
        row.version = version
        row.position = spec.index
        row.cron, row.timezone, row.inputs = spec.cron, spec.timezone, dict(spec.inputs)
        row.active, row.catch_up, row.retired = spec.active, spec.catch_up, False
        if not was_running:
            row.checked_until = now
        row.next_at = next_tick(row)
        row.save()
    for key, row in rows.items():
        if key not in specs and not row.retired:
            row.retired, row.next_at = True, None
            row.save(update_fields=["retired", "next_at"])


def on_version_saved(sender: Any, instance: RecipeVersion, created: bool, **_: Any) -> None:
    """Follow a newly published version's schedules (a `post_save` receiver)."""
    if created and not instance.is_draft_snapshot:
        schedules_sync(version=instance)


def schedules_tick(*, now: datetime | None = None) -> int:
    """Start the run of every schedule tick due by `now`; return how many started."""
    now = now or clock()
    due = Schedule.objects.filter(next_at__lte=now).order_by("next_at")
    started = 0
    for pk in list(due.values_list("pk", flat=True)[:ROUND_MAX]):
        try:
            started += _tick(pk, now)
        except Exception:
            # One schedule's fault (its row rolled back, tried again next round) must not
            # keep the others, due after it, from firing.
            log.exception("schedule %s: its tick failed", pk)
    return started


def _tick(pk: int, now: datetime) -> int:
    """Run one schedule's due ticks and record its missed ones, on its locked row."""
    grace = timedelta(seconds=settings.SCHEDULE_GRACE_SECONDS)
    with transaction.atomic():
        locked = Schedule.objects.select_for_update(skip_locked=True, of=("self",))
        schedule = locked.select_related("recipe__owner").filter(pk=pk, next_at__lte=now).first()
        if schedule is None:
            return 0  # another process holds it, or has done it since
        due = engine.due_schedule_ticks(
            spec_of(schedule),
            since=schedule.checked_until,
            now=now,
            grace=grace,
            catch_up_max=settings.SCHEDULE_CATCH_UP_MAX,
        )
        if due.missed is not None:
            _record_missed(schedule, due.missed)
        started = sum(_start(schedule, tick, late=now - tick >= grace) for tick in due.fire)
        schedule.checked_until = now
        schedule.next_at = next_tick(schedule)
        schedule.save(update_fields=["checked_until", "next_at"])
    return started


def _start(schedule: Schedule, tick: datetime, *, late: bool) -> bool:
    """Claim the tick and start its run as the recipe's owner; False if it was claimed."""
    trigger = f"{schedule.label} at {tick:%Y-%m-%dT%H:%MZ}"
    try:
        with transaction.atomic():
            claimed = ScheduleTick.objects.create(schedule=schedule, tick_at=tick, late=late)
            try:
                with transaction.atomic():
                    claimed.run = run_start(
                        user=schedule.recipe.owner,
                        recipe=schedule.recipe,
                        inputs=dict(schedule.inputs),
                        trigger=trigger,
                    )
            except (InputsInvalid, RunNotStartable) as exc:
                # Kept with the tick: the schedule page says why no run started.
                claimed.error = str(exc)
                log.warning("%s of %s: no run started: %s", trigger, schedule.recipe.slug, exc)
            claimed.save(update_fields=["run", "error"])
    except IntegrityError:
        return False  # another process started this tick
    return claimed.run_id is not None


def _record_missed(schedule: Schedule, missed: engine.ScheduleMissed) -> None:
    MissedTicks.objects.create(
        schedule=schedule,
        count=missed.count,
        at_least=missed.at_least,
        first_at=missed.first,
        last_at=missed.last,
    )
    log.warning("%s of %s: %s", schedule.label, schedule.recipe.slug, missed.summary())


def schedule_pause(*, schedule: Schedule, user: AbstractBaseUser) -> Schedule:
    """Stop the schedule starting runs until it is resumed (a new version keeps the pause)."""
    with transaction.atomic():
        locked = Schedule.objects.select_for_update().get(pk=schedule.pk)
        if locked.paused_at is None:
            locked.paused_at, locked.paused_by, locked.next_at = clock(), user, None
            locked.save(update_fields=["paused_at", "paused_by", "next_at"])
    return locked


def schedule_resume(*, schedule: Schedule, now: datetime | None = None) -> Schedule:
    """Let the schedule start runs again, from its next tick: the paused ones are not missed."""
    with transaction.atomic():
        locked = Schedule.objects.select_for_update().get(pk=schedule.pk)
        if locked.paused_at is not None:
            locked.paused_at, locked.paused_by = None, None
            locked.checked_until = now or clock()
            locked.next_at = next_tick(locked)
            locked.save(update_fields=["paused_at", "paused_by", "checked_until", "next_at"])
    return locked
