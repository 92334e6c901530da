"""Name the condition types, operators, actions and special targets of recipe format v1.

Parsing, evaluation and lint all read these tables, so a new name is added in one place.
"""

from __future__ import annotations

from collections.abc import Iterable

NUMERIC_OPERATORS: tuple[str, ...] = (
    "less_than",
    "less_equal",
    "greater_than",
    "greater_equal",
    "equals",
    "not_equals",
)
NUMERIC_OPERATOR_ALIASES: dict[str, str] = {
    "greater_than_or_equal": "greater_equal",
    "less_than_or_equal": "less_equal",
}
# How a numeric operator reads in a reason, when it holds and when it does not.
OPERATOR_SYMBOLS: dict[str, tuple[str, str]] = {
    "less_than": ("<", "not <"),
    "less_equal": ("<=", "not <="),
    "greater_than": (">", "not >"),
    "greater_equal": (">=", "not >="),
    "equals": ("==", "!="),
    "not_equals": ("!=", "=="),
}

CONDITION_OPERATORS: dict[str, tuple[str, ...]] = {
    "pattern_match": ("regex_match", "regex_not_match", "contains", "not_contains", "equals"),
    "length_check": NUMERIC_OPERATORS,
    "ai_evaluation": NUMERIC_OPERATORS,
    "human_decision": ("user_choice",),
    "execution_timeout": ("equals",),
    "execution_error": ("equals", "contains"),
    "field_compare": NUMERIC_OPERATORS,
    "content_type": ("is", "is_not"),
    "route_selected": ("includes",),
    "default": ("always",),
}
NUMERIC_TYPES = frozenset({"length_check", "ai_evaluation", "field_compare"})
LOGICAL_TYPES: tuple[str, ...] = ("and", "or", "not")
CONDITION_TYPE_ALIASES: dict[str, str] = {"check_count": "field_compare"}
ALL_CONDITION_TYPES: tuple[str, ...] = tuple(
    sorted([*CONDITION_OPERATORS, *LOGICAL_TYPES, *CONDITION_TYPE_ALIASES])
)

CONTENT_TYPES: tuple[str, ...] = ("code", "numbers", "json", "list", "prose")
LENGTH_UNITS: tuple[str, ...] = ("chars", "words")

ACTIONS: tuple[str, ...] = (
    "CONTINUE",
    "DEFAULT_CONTINUE",
    "ERROR_HANDLER",
    "REQUEST_MORE_DETAIL",
    "ENHANCE_PROMPT",
    "RETRY_WITH_DIFFERENT_ACTOR",
    "HUMAN_REVIEW",
    "QUALITY_APPROVED",
    "SKIP_TO_END",
    "END_RECIPE",
)
ACTION_ALIASES: dict[str, str] = {
    "RETRY_DIFFERENT_ACTOR": "RETRY_WITH_DIFFERENT_ACTOR",
    "HUMAN_REVIEW_NEEDED": "HUMAN_REVIEW",
}
# Actions that always run the same step again, whatever target names.
REPEAT_ACTIONS = frozenset({"REQUEST_MORE_DETAIL", "ENHANCE_PROMPT", "RETRY_WITH_DIFFERENT_ACTOR"})

REPEAT = "@repeat"
END = "@end"
COMPLETE = "@complete"
SPECIAL_TARGETS: tuple[str, ...] = (REPEAT, END, COMPLETE)

DEFAULT_MAX_RETRIES = 3
DEFAULT_MAX_STEPS = 100
DEFAULT_MAX_RECLASSIFY = 2
DEFAULT_HUMAN_OPTIONS: tuple[str, ...] = ("approve", "reject", "revise")
STEP_KINDS: tuple[str, ...] = ("llm", "human", "decision_tree", "classify")
INPUT_TYPES: tuple[str, ...] = ("string", "number", "integer", "boolean", "object", "array")
FORMAT = "branchline.recipe/v1"


def canonical_operator(condition_type: str, operator: str) -> str:
    """Return the canonical spelling of `operator` for `condition_type` (aliases resolved)."""
    if condition_type in NUMERIC_TYPES:
        return NUMERIC_OPERATOR_ALIASES.get(operator, operator)
    return operator


def operators_listed(condition_type: str) -> str:
    """List the operators (with aliases) a condition type accepts, for error messages."""
    names = list(CONDITION_OPERATORS[condition_type])
    if condition_type in NUMERIC_TYPES:
        names += list(NUMERIC_OPERATOR_ALIASES)
    return ", ".join(names)


def logical_kind(
    condition_type: object, operator: object, plain_types: Iterable[str]
) -> str | None:
    """Return `and`/`or`/`not` when a condition document combines others, else None.

    Both forms are accepted: `{"type": "and", ...}` and, as the reference trees write it,
    `{"type": "check_images_and_keywords", "operator": "and", ...}` (any type name that is
    not one of `plain_types`).
    """
    if isinstance(condition_type, str) and condition_type in LOGICAL_TYPES:
        return condition_type
    if (
        isinstance(operator, str)
        and operator in LOGICAL_TYPES
        and condition_type not in set(plain_types)
    ):
        return operator
    return None
