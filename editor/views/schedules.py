"""The Triggers tab's schedules: each with its next runs, last run and missed ticks; a pause
or resume button (an htmx POST) answers with the section again."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from triggers.schedules import selectors, services
from workflows.models import Recipe

from .editor import editable_recipe

SCHEDULES = "editor/triggers/_schedules.html"


def schedules_context(recipe: Recipe) -> dict[str, Any]:
    """Return what the schedules section shows."""
    return {"schedules": selectors.schedule_views(recipe=recipe)}


@login_required
@require_POST
def schedule_pause(request: HttpRequest, slug: str, key: str) -> HttpResponse:
    """Pause one of the recipe's schedules."""
    recipe = editable_recipe(request, slug)
    services.schedule_pause(schedule=_schedule(recipe, key), user=request.user)
    return render(request, SCHEDULES, {"recipe": recipe, **schedules_context(recipe)})


@login_required
@require_POST
def schedule_resume(request: HttpRequest, slug: str, key: str) -> HttpResponse:
    """Resume one of the recipe's schedules from its next tick."""
    recipe = editable_recipe(request, slug)
    services.schedule_resume(schedule=_schedule(recipe, key))
    return render(request, SCHEDULES, {"recipe": recipe, **schedules_context(recipe)})


def _schedule(recipe: Recipe, key: str) -> Any:
    schedule = selectors.schedule_get(recipe=recipe, key=key)
    if schedule is None:
        raise Http404(f"No schedule '{key}' in the published recipe.")
    return schedule
