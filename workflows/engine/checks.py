"""Small checks the recipe parser, the condition types and the step kinds share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def is_int(value: object) -> bool:
    """Tell whether `value` is a whole number (not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """Tell whether `value` is a number (not a boolean)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def listed(names: Iterable[object]) -> str:
    """List names sorted and comma separated for a message, or `none`."""
    return ", ".join(sorted(str(n) for n in names)) or "none"


def actor_alias_problem(value: object, actors: Mapping[str, str]) -> str | None:
    """Return why `value` is not an actor alias the recipe declares, or None if it is one."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if value not in actors:
        return f"unknown actor alias '{value}'; declared: {listed(actors)}"
    return None
