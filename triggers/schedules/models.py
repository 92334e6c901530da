"""A schedule's server state (its pause, how far it has been looked at) and its ticks."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from runner.models import Run
from workflows.models import Recipe, RecipeVersion


class Schedule(models.Model):
    """One schedule of a recipe, as its latest published version declares it.

    Found again by `key` (its name, or its index) at each publish, so its pause and history
    survive a new version; a schedule the latest version no longer has is `retired`.
    `checked_until`: every tick up to then has been run or recorded as missed. `next_at`: its
    next tick, when it runs (null when paused, inactive or retired): what beat's round looks for.
    """

    recipe = models.ForeignKey(Recipe, on_delete=models.CASCADE, related_name="schedule_states")
    key = models.CharField(max_length=50)
    version = models.ForeignKey(RecipeVersion, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField(default=0)
    cron = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    inputs = models.JSONField(default=dict, blank=True)
    active = models.BooleanField(default=True)
    catch_up = models.BooleanField(default=False)
    retired = models.BooleanField(default=False)
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    checked_until = models.DateTimeField()
    next_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["recipe", "position", "key"]
        constraints = [
            models.UniqueConstraint(fields=["recipe", "key"], name="unique_schedule_key_per_recipe")
        ]
        indexes = [models.Index(fields=["next_at"], name="triggers_schedule_due_idx")]

    def __str__(self) -> str:
        return f"{self.recipe.slug} schedule {self.key}"

    @property
    def runs(self) -> bool:
        """Tell whether the schedule starts runs (declared active, not paused or retired)."""
        return self.active and self.paused_at is None and not self.retired

    @property
    def label(self) -> str:
        """Return how runs and pages name it: `schedule nightly`, `schedule 0` (its key)."""
        return f"schedule {self.key}"


class ScheduleTick(models.Model):
    """One tick of a schedule that was due: the run it started, or why none started.

    Unique per (schedule, tick): inserted in the transaction that starts the run, so that of
    any number of processes looking at the same tick, one starts it.
    """

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="ticks")
    tick_at = models.DateTimeField()
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    error = models.TextField(blank=True)
    late = models.BooleanField(default=False, help_text="a missed tick run to catch up")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["schedule", "-tick_at"]
        constraints = [
            models.UniqueConstraint(fields=["schedule", "tick_at"], name="unique_schedule_tick")
        ]

    def __str__(self) -> str:
        return f"{self.schedule} at {self.tick_at:%Y-%m-%d %H:%M}"


class MissedTicks(models.Model):
    """Ticks of a schedule that nothing ran in time (beat or the workers were down)."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="missed")
    count = models.PositiveIntegerField()
    at_least = models.BooleanField(default=False, help_text="more were missed than were counted")
    first_at = models.DateTimeField()
    last_at = models.DateTimeField()
    noted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["schedule", "-last_at"]
        verbose_name_plural = "missed ticks"

    def __str__(self) -> str:
        return f"{self.schedule}: {self.count} missed"
