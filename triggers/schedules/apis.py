"""The schedules API: a recipe's schedules with their next runs; pause and resume one."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from workflows.models import Recipe
from workflows.selectors import recipe_get

from . import selectors, services
from .models import Schedule
from .selectors import ScheduleView


class TickOutput(serializers.Serializer):
    at = serializers.DateTimeField(source="tick_at")
    run = serializers.IntegerField(
        source="run_id", allow_null=True, help_text="null: no run started"
    )
    late = serializers.BooleanField(help_text="a missed tick run to catch up")
    error = serializers.CharField(help_text="why no run started (blank when one did)")


class MissedOutput(serializers.Serializer):
    count = serializers.IntegerField()
    at_least = serializers.BooleanField(help_text="more were missed than were counted")
    first = serializers.DateTimeField(source="first_at")
    last = serializers.DateTimeField(source="last_at")


class ScheduleOutput(serializers.Serializer):
    key = serializers.CharField(
        source="schedule.key", help_text="its name, or its index in `schedules` (in the URLs)"
    )
    cron = serializers.CharField(source="schedule.cron")
    description = serializers.CharField(help_text="the cron expression in words")
    timezone = serializers.CharField(source="schedule.timezone")
    inputs = serializers.JSONField(source="schedule.inputs")
    active = serializers.BooleanField(source="schedule.active")
    catch_up = serializers.BooleanField(source="schedule.catch_up")
    state = serializers.ChoiceField(choices=["running", "paused", "inactive"])
    paused_at = serializers.DateTimeField(source="schedule.paused_at", allow_null=True)
    paused_by = serializers.CharField(
        source="schedule.paused_by.username", allow_null=True, default=None
    )
    version = serializers.IntegerField(
        source="schedule.version.number", help_text="the published version that declares it"
    )
    next_runs = serializers.ListField(child=serializers.DateTimeField())
    last_tick = TickOutput(allow_null=True)
    missed = MissedOutput(allow_null=True, help_text="the latest ticks that were missed")
    missed_summary = serializers.CharField(help_text='e.g. "3 ticks missed between … and …"')


def _recipe(request: Request, slug: str, *, change: bool) -> Recipe:
    recipe = recipe_get(user=request.user, slug=slug)
    if change and not request.user.has_perm("workflows.change_recipe", recipe):
        raise PermissionDenied("You may not change this recipe's schedules.")
    return recipe


def _schedule(recipe: Recipe, key: str) -> Schedule:
    schedule = selectors.schedule_get(recipe=recipe, key=key)
    if schedule is None:
        raise NotFound(
            f"schedule: '{recipe.slug}' has no schedule '{key}' in its latest published version"
        )
    return schedule


def _view(recipe: Recipe, key: str) -> dict[str, Any]:
    view: ScheduleView = next(
        v for v in selectors.schedule_views(recipe=recipe) if v.schedule.key == key
    )
    return ScheduleOutput(view).data


class ScheduleListApi(APIView):
    @extend_schema(responses=ScheduleOutput(many=True))
    def get(self, request: Request, slug: str) -> Response:
        """List the schedules of the recipe's latest published version, with their next runs."""
        recipe = _recipe(request, slug, change=False)
        return Response(ScheduleOutput(selectors.schedule_views(recipe=recipe), many=True).data)


class SchedulePauseApi(APIView):
    @extend_schema(request=None, responses=ScheduleOutput)
    def post(self, request: Request, slug: str, key: str) -> Response:
        """Pause a schedule: it starts no run until resumed, whatever is published meanwhile."""
        recipe = _recipe(request, slug, change=True)
        services.schedule_pause(schedule=_schedule(recipe, key), user=request.user)
        return Response(_view(recipe, key))


class ScheduleResumeApi(APIView):
    @extend_schema(request=None, responses=ScheduleOutput)
    def post(self, request: Request, slug: str, key: str) -> Response:
        """Resume a schedule from its next tick (the ticks while it was paused are not run)."""
        recipe = _recipe(request, slug, change=True)
        services.schedule_resume(schedule=_schedule(recipe, key))
        return Response(_view(recipe, key))
