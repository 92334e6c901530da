"""A run's callbacks on its monitor: the deliveries with their attempts, and "Send again".

The monitor includes the section (`{% run_callbacks run %}`); while a delivery is pending, or
the run may still record events its callbacks listen to, the section asks again every few
seconds. "Send again" is an htmx POST (CSRF from the page's `hx-headers`) that answers with
the section.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from runner.models import Run
from runner.selectors import run_get
from triggers.callbacks import selectors as callback_selectors
from triggers.callbacks.sending import secret_is_set
from triggers.callbacks.services import DeliveryBusy, delivery_resend
from workflows.models import Recipe, RecipeVersion

from .runs import HtmxHttpRequest

SECTION = "runs/_callbacks.html"


def callbacks_context(user: AbstractBaseUser | AnonymousUser, run: Run) -> dict[str, Any]:
    """Return what the monitor's callbacks section shows of the run."""
    deliveries = list(callback_selectors.run_deliveries(run))
    declared = run.version.document.get("callbacks") or []
    pending = any(d.status == d.Status.PENDING for d in deliveries)
    return {
        "run": run,
        "deliveries": deliveries,
        "declared": declared,
        "may_resend": callback_selectors.may_resend(user, run),
        "polling": bool(declared) and (pending or run.finished_at is None),
    }


@login_required
@require_GET
def run_callbacks(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """Render the run's callbacks section."""
    run = run_get(user=request.user, run_id=run_id)
    return render(request, SECTION, callbacks_context(request.user, run))


@login_required
@require_POST
def run_callback_resend(request: HtmxHttpRequest, run_id: int, delivery_id: str) -> HttpResponse:
    """Send a delivery again; answer with the section (htmx) or go back to the monitor."""
    run = run_get(user=request.user, run_id=run_id)
    delivery = callback_selectors.delivery_of_run(run=run, delivery_id=delivery_id)
    context = callbacks_context(request.user, run)
    if not context["may_resend"]:
        context["resend_error"] = "You may not change this run's recipe."
        return render(request, SECTION, context, status=403)
    try:
        delivery_resend(delivery=delivery)
    except DeliveryBusy as exc:
        context["resend_error"] = str(exc)
        return render(request, SECTION, context, status=409)
    if not request.htmx:
        return redirect("run-monitor", run_id=run.pk)
    return render(request, SECTION, callbacks_context(request.user, run))


def recipe_callbacks_context(recipe: Recipe, version: RecipeVersion | None) -> dict[str, Any]:
    """Return what the editor's Triggers tab shows of the recipe's callbacks: those of its
    latest published version, whether each secret's env var is set, the last deliveries."""
    declared = (version.document.get("callbacks") or []) if version is not None else []
    return {
        "callbacks": [
            {**callback, "secret_set": secret_is_set(callback["secret_env"])}
            for callback in declared
        ],
        "callback_deliveries": callback_selectors.recipe_deliveries(recipe),
    }
