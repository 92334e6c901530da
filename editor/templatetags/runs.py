"""Filters and tags of the run monitor: costs as people read them, the run's currency."""

from __future__ import annotations

from decimal import Decimal

from django import template

from runner.models import Run
from runner.selectors import run_currencies
from workflows.engine import format_cost

register = template.Library()

# Shown when the run's calls were priced in several currencies: their sum means nothing.
MIXED = "(mixed currencies)"


@register.filter
def cost(value: Decimal | None) -> str:
    """Return a cost without trailing zeros (`0.0042`), or `—` when there is none."""
    if value is None:
        return "—"
    return format_cost(value)


@register.simple_tag
def run_currency(run: Run) -> str:
    """Return the currency of the run's priced calls, `(mixed currencies)`, or ""."""
    currencies = run_currencies(run)
    if len(currencies) > 1:
        return MIXED
    return currencies[0] if currencies else ""
