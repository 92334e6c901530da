"""The `true` / `false` value of the conditions that ask whether something happened."""

from __future__ import annotations

from typing import Any

from workflows.engine.conditions.base import ConditionScope
from workflows.engine.conditions.values import as_bool
from workflows.engine.graph import Condition


def check_flag(value: Any, path: str, scope: ConditionScope) -> tuple[bool, Any]:
    """Check a true/false value (missing means true); return it as a bool."""
    flag = True if value is None else as_bool(value)
    if flag is None:
        scope.error(f"{path}.value", f"must be true or false, got {value!r}")
        return False, None
    return True, flag


def prepare_flag(condition: Condition) -> object:
    """Return the value as a bool: anything but false means true."""
    return as_bool(condition.value) is not False
