"""Filters for showing tool calls: a call's arguments as the JSON the tool received."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def json_text(value: Any) -> str:
    """Return `value` as indented JSON text (escaped by the template like any text)."""
    try:
        return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False)
    except (TypeError, ValueError):
        return str(value)
