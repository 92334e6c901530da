"""Read callback deliveries, always through the runs the user may see."""

from __future__ import annotations

import rules
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Prefetch, QuerySet
from django.http import Http404

from runner.models import Run
from workflows.models import Recipe

from .models import CallbackAttempt, CallbackDelivery


def run_deliveries(run: Run) -> QuerySet[CallbackDelivery]:
    """Return the run's deliveries in the order they were made, with their attempts."""
    return CallbackDelivery.objects.filter(run=run).prefetch_related(
        Prefetch("attempt_log", queryset=CallbackAttempt.objects.order_by("number"))
    )


def recipe_deliveries(recipe: Recipe, *, limit: int = 10) -> list[CallbackDelivery]:
    """Return the latest deliveries of the recipe's runs, newest first."""
    return list(
        CallbackDelivery.objects.filter(run__recipe=recipe)
        .select_related("run")
        .order_by("-created_at")[:limit]
    )


def delivery_of_run(*, run: Run, delivery_id: str) -> CallbackDelivery:
    """Return one delivery of the run; another run's does not exist (404)."""
    delivery = CallbackDelivery.objects.filter(run=run, pk=delivery_id).first()
    if delivery is None:
        raise Http404(f"Run {run.pk} has no callback delivery {delivery_id}.")
    return delivery


def may_resend(user: AbstractBaseUser | AnonymousUser, run: Run) -> bool:
    """Tell whether the user may send the run's callbacks again: whoever may change its
    recipe (seeing a run is not enough to make it talk to other systems)."""
    return bool(rules.has_perm("workflows.change_recipe", user, run.recipe))
