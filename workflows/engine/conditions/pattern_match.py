"""`pattern_match`: the step's response matches a regex, contains or equals a text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.conditions.base import ConditionScope, ConditionType, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.values import quote
from workflows.engine.errors import RegexError, RegexTooLarge
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition
from workflows.engine.regex import Pattern, check_flags, compile_pattern

_REGEX_OPERATORS = ("regex_match", "regex_not_match")


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the flags and the pattern or text; a regex must compile within the bounds."""
    flags = fields.get("flags", "")
    if flags is None:
        flags = ""
    if not isinstance(flags, str) or check_flags(flags):
        problem = check_flags(flags) if isinstance(flags, str) else "must be a string of i, m, s"
        scope.error(f"{path}.flags", problem or "")
        return False, None
    if not isinstance(value, str) or not value:
        scope.error(f"{path}.value", "must be a non-empty string")
        return False, None
    if op in _REGEX_OPERATORS:
        try:
            compile_pattern(value, flags)
        except RegexTooLarge as exc:
            scope.error(f"{path}.value", str(exc))
            return False, None
        except RegexError as exc:
            scope.error(f"{path}.value", f"invalid regex: {exc}")
            return False, None
    return True, value


def prepare(condition: Condition) -> object:
    """Compile the regex, or fold the text to find once for case-insensitive search."""
    flags = str(condition.fields.get("flags") or "")
    if condition.operator in _REGEX_OPERATORS:
        return compile_pattern(str(condition.value), flags)
    text = str(condition.value)
    if condition.operator == "equals":
        text = text.strip()
    return (text.casefold(), True) if "i" in flags else (text, False)


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Match the response; regexes read a bounded prefix, substring checks the whole text."""
    op = condition.operator
    if op == "equals":
        # The whole text: a comparison is linear, and a cut text would equal what it is not.
        needle, fold = prepared
        text = ctx.text.strip()
        if (text.casefold() if fold else text) == needle:
            return True, f"response equals {quote(needle)}"
        return False, f"response does not equal {quote(needle)}"
    note = ctx.scan_note()
    if op in _REGEX_OPERATORS:
        pattern: Pattern = prepared
        found = pattern.search_encoded(ctx.encoded(), ctx.scanned())
        if found is None and note and op == "regex_not_match":
            # The rest was not read: a match there cannot be ruled out.
            return False, f"regex did not match{note}; the rest was not read, so not proven"
        if found is None:
            return op == "regex_not_match", f"regex did not match{note}"
        return op == "regex_match", f"regex matched {quote(found.text)} at {found.start}{note}"
    # A substring search is linear: it reads the whole text.
    needle, fold = prepared
    if needle in (ctx.folded() if fold else ctx.text):
        return op == "contains", f"response contains {quote(needle)}"
    return op == "not_contains", f"response does not contain {quote(needle)}"


CONDITION_TYPE = ConditionType(
    name="pattern_match",
    label="Text / regex match",
    help=(
        "The response matches a regex (RE2: linear time, no backreferences or lookaround, "
        "within the bounds below), or contains or equals a text."
    ),
    operators=(
        Operator("regex_match", "matches regex", "=~"),
        Operator("regex_not_match", "does not match regex", "!~"),
        Operator("contains", "contains", "has"),
        Operator("not_contains", "does not contain", "lacks"),
        Operator("equals", "equals", "="),
    ),
    fields=(
        FieldSpec(
            "value",
            "Pattern or text",
            "regex",
            required=True,
            help="A regex for the regex operators, a plain text for the others.",
        ),
        FieldSpec(
            "flags",
            "Flags",
            "text",
            choices=("i", "m", "s"),
            default="",
            help="Letters from i (ignore case), m (multi-line), s (dot matches newline).",
        ),
    ),
    summary={
        "regex_match": "/{value}/{flags}",
        "regex_not_match": "not /{value}/{flags}",
        "contains": 'has "{value}"',
        "not_contains": 'lacks "{value}"',
        "equals": '= "{value}"',
        "*": "/{value}/",
    },
    check=check,
    prepare=prepare,
    evaluate=evaluate,
    reads_answer=True,
)
