"""The editor's Triggers tab: what starts the recipe's runs besides people (its schedules and
inbound webhooks) and whom its runs tell (its callbacks), as the latest published version
declares them, with their state (next runs, pauses, deliveries)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from triggers.webhooks.selectors import webhooks_shown

from .callbacks import recipe_callbacks_context
from .editor import editable_recipe
from .schedules import schedules_context

TRIGGERS = "editor/triggers.html"


@login_required
@require_GET
def triggers_panel(request: HttpRequest, slug: str) -> HttpResponse:
    """Show the recipe's schedules, webhooks and callbacks."""
    recipe = editable_recipe(request, slug)
    version = recipe.latest_version
    context = {"recipe": recipe, "version": version, **schedules_context(recipe)}
    context["webhooks"] = webhooks_shown(request=request, recipe=recipe, version=version)
    context |= recipe_callbacks_context(recipe, version)
    return render(request, TRIGGERS, context)
