"""Read and write the values conditions compare: numbers, flags, field paths, quoted text."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

from workflows.engine.answers import shorten


def quote(text: str) -> str:
    """Return `text` shortened and in double quotes, escaped the way JSON would be."""
    short = shorten(text)
    if '"' in short or "\\" in short or not short.isprintable():
        return json.dumps(short, ensure_ascii=False)
    return f'"{short}"'


def format_number(value: float | int) -> str:
    """Return a number as a reason shows it: `8`, not `8.0`; `7.5` as is."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def as_number(value: object) -> float | int | None:
    """Return `value` as a finite number (numeric text is read; a list counts its items).

    Return None for anything else, booleans, NaN and infinities included.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list | tuple | dict):
        return len(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        if not math.isfinite(number):
            return None
        return int(number) if number.is_integer() and "." not in value else number
    return None


def as_bool(value: object) -> bool | None:
    """Return `true`/`false` (booleans or their spelling) as a bool, or None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def field_path(name: str) -> tuple[str, ...]:
    """Split a dotted fact path (`document.image_count`) into its segments."""
    return tuple(name.split("."))


def lookup(facts: Mapping[str, object], path: Sequence[str]) -> tuple[bool, object]:
    """Return whether the dotted `path` exists in `facts`, and its value."""
    current: object = facts
    for segment in path:
        if isinstance(current, Mapping) and segment in current:
            current = current[segment]
        elif isinstance(current, list) and segment.isdigit() and int(segment) < len(current):
            current = current[int(segment)]
        else:
            return False, None
    return True, current
