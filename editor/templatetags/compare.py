"""Filters of the run comparison: deltas with their sign, as people read them."""

from __future__ import annotations

from decimal import Decimal

from django import template

from workflows.engine import format_cost

register = template.Library()

MINUS = "\u2212"  # a real minus sign: a hyphen reads as a dash in a column of figures


@register.filter
def signed(value: int | Decimal | None) -> str:
    """Return a delta with its sign (`+12`, a minus sign and `3`, `0`; a cost without trailing zeros), or `—`."""
    if value is None:
        return "—"
    text = format_cost(abs(value)) if isinstance(value, Decimal) else str(abs(value))
    if value > 0:
        return f"+{text}"
    if value < 0:
        return f"{MINUS}{text}"
    return text


@register.filter
def delta_class(value: int | Decimal | None) -> str:
    """Return the CSS class of a delta: `up`, `down` or `same` (none for a missing one)."""
    if value is None:
        return ""
    return "up" if value > 0 else "down" if value < 0 else "same"
