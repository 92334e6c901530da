"""The engine's catalog as the editor reads it: condition types, step kinds and actions.

The catalog (`workflows.engine.catalog()`) is the one description of what a recipe may hold;
the pages embed it for the canvas, and the forms build their fields and choices from it. The
lookups here index it; they keep no table of their own.
"""

from __future__ import annotations

import functools
from typing import Any

from workflows import engine


@functools.cache
def catalog() -> dict[str, Any]:
    """Return the engine's catalog (it does not change while the process runs)."""
    return engine.catalog()


@functools.cache
def _condition_types() -> dict[str, dict[str, Any]]:
    specs = catalog()["conditions"]
    return {name: spec for spec in specs for name in (spec["type"], *spec["aliases"])}


def condition_type(name: object) -> dict[str, Any] | None:
    """Return the catalog entry of the condition type called `name` (or an alias), or None."""
    return _condition_types().get(name) if isinstance(name, str) else None


def logical_types() -> list[str]:
    """Return the combinators: `and`, `or`, `not`."""
    return list(catalog()["logical"])


def new_operand() -> dict[str, Any]:
    """Return what an operand added to `and`/`or` starts as: the first type, its first operator."""
    spec = catalog()["conditions"][0]
    operators = spec["operators"]
    return {"type": spec["type"], "operator": operators[0]["name"] if len(operators) > 1 else ""}


def operator_names(spec: dict[str, Any]) -> list[str]:
    """Return the operators a condition type accepts: canonical names, then aliases."""
    return [op["name"] for op in spec["operators"]] + list(spec["operator_aliases"])


def step_kinds() -> list[dict[str, Any]]:
    """Return the step kinds, in menu order."""
    return list(catalog()["steps"])


def kinds_taking(field_name: str) -> list[str]:
    """Return the step kinds whose steps hold the field `field_name`."""
    return [s["kind"] for s in step_kinds() if any(f["name"] == field_name for f in s["fields"])]


def actions() -> list[str]:
    """Return the action names, in menu order."""
    return [a["name"] for a in catalog()["actions"]]


def repeats(action: str) -> bool:
    """Tell whether the action (canonical name) runs the step again."""
    return any(a["name"] == action and a["repeats"] for a in catalog()["actions"])


def canonical_action(action: str) -> str:
    """Return the canonical name of an action (aliases resolved)."""
    name = (action or "").strip().upper()
    return str(catalog()["action_aliases"].get(name, name))
