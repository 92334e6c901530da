"""List every condition type of the recipe format; look one up by name or alias.

Adding a condition type: write its module (see `docs/adding-a-condition-type.md`) and name
it in `TYPES`. Parsing, evaluation, lint, the catalog and the docs read this list.
"""

from __future__ import annotations

from workflows.engine.conditions import (
    ai_evaluation,
    attempts,
    budget,
    cites_source,
    classification_failed,
    confidence,
    content_type,
    criteria_met,
    default,
    error_severity,
    execution_error,
    execution_timeout,
    fallback_used,
    field_compare,
    format_matches,
    http_status,
    human_decision,
    length_check,
    pattern_match,
    retrieval,
    route_selected,
    schema_valid,
    tool_called,
    tool_error,
    tool_result,
    validation_passed,
)
from workflows.engine.conditions.base import ConditionType
from workflows.engine.conditions.logical import LOGICAL_TYPES, logical_kind

# In the order menus and the format documentation list them.
TYPES: tuple[ConditionType, ...] = (
    pattern_match.CONDITION_TYPE,
    length_check.CONDITION_TYPE,
    ai_evaluation.CONDITION_TYPE,
    human_decision.CONDITION_TYPE,
    execution_timeout.CONDITION_TYPE,
    execution_error.CONDITION_TYPE,
    error_severity.CONDITION_TYPE,
    field_compare.CONDITION_TYPE,
    content_type.CONDITION_TYPE,
    route_selected.CONDITION_TYPE,
    classification_failed.CONDITION_TYPE,
    retrieval.CONDITION_TYPE,
    cites_source.CONDITION_TYPE,
    tool_called.CONDITION_TYPE,
    tool_error.CONDITION_TYPE,
    tool_result.CONDITION_TYPE,
    http_status.CONDITION_TYPE,
    budget.CONDITION_TYPE,
    confidence.CONDITION_TYPE,
    validation_passed.CONDITION_TYPE,
    schema_valid.CONDITION_TYPE,
    fallback_used.CONDITION_TYPE,
    attempts.CONDITION_TYPE,
    criteria_met.CONDITION_TYPE,
    format_matches.CONDITION_TYPE,
    default.CONDITION_TYPE,
)
_BY_NAME: dict[str, ConditionType] = {
    name: kind for kind in TYPES for name in (kind.name, *kind.aliases)
}
# Every name a condition's `type` may hold that is not a combinator: types and aliases.
PLAIN_TYPE_NAMES: frozenset[str] = frozenset(_BY_NAME)
# Every accepted `type` name, sorted, as error messages list them.
ALL_TYPE_NAMES: tuple[str, ...] = tuple(sorted([*PLAIN_TYPE_NAMES, *LOGICAL_TYPES]))


def condition_type(name: object) -> ConditionType | None:
    """Return the condition type called `name` (or one of its aliases), or None."""
    return _BY_NAME.get(name) if isinstance(name, str) else None


def combinator(condition_type_name: object, operator: object) -> str | None:
    """Return `and`/`or`/`not` when a condition document combines others, else None."""
    return logical_kind(condition_type_name, operator, PLAIN_TYPE_NAMES)
