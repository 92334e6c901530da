"""The run monitor's callbacks section, included with `{% run_callbacks run %}`."""

from __future__ import annotations

from typing import Any

from django import template

from runner.models import Run

from ..views.callbacks import SECTION, callbacks_context

register = template.Library()


@register.inclusion_tag(SECTION, takes_context=True)
def run_callbacks(context: template.Context, run: Run) -> dict[str, Any]:
    """Render the run's callback deliveries, with "Send again" for who may."""
    return {**callbacks_context(context["user"], run), "csrf_token": context.get("csrf_token")}
