"""`format_matches`: the step's answer has the form an intent expects, or one named.

Adaptive mode's content validation checks the format as well as the data type: code delivered
where raw numbers were asked for is the wrong answer however correct the code. The format is
named (`format`), or read from an intent step's latest `expected_format` (`intent_step`), so
one branch serves whatever format the request asks for. The checks are rules, reusing the
content type detection (`content_type.py`): no model is asked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from workflows.engine.answers import unfence
from workflows.engine.conditions.base import ConditionScope, ConditionType, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.criteria_met import check_intent_step
from workflows.engine.conditions.values import quote
from workflows.engine.errors import AnswerUnreadable, RegexError, RegexTooLarge
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition
from workflows.engine.intent import read_intent
from workflows.engine.regex import Pattern, compile_pattern, encode

# The formats a recipe may name; `regex` takes its pattern from the `pattern` field.
FORMATS: tuple[str, ...] = (
    "json",
    "list",
    "number",
    "numbers",
    "raw_data",
    "code",
    "table",
    "prose",
    "regex",
)
# How an intent model's words for a format map to one of FORMATS (first word found wins).
_FORMAT_WORDS: tuple[tuple[str, str], ...] = (
    ("json", "json"),
    ("table", "table"),
    ("csv", "table"),
    ("tsv", "table"),
    ("code", "code"),
    ("script", "code"),
    ("raw", "raw_data"),
    ("data", "raw_data"),
    ("numbers", "numbers"),
    ("number", "number"),
    ("list", "list"),
    ("bullet", "list"),
    ("prose", "prose"),
    ("text", "prose"),
    ("formatted", "prose"),
    ("essay", "prose"),
    ("paragraph", "prose"),
    ("summary", "prose"),
)
_NUMBER = re.compile(r"[-+]?\d[\d_,]*(?:\.\d+)?(?:[eE][-+]?\d+)?%?")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_MIN_TABLE_ROWS = 2
_SHOWN = 40


def format_named(words: str) -> str | None:
    """Return the format an intent's `expected_format` words name, or None for none known."""
    folded = words.strip().lower().replace("-", "_")
    if folded in FORMATS:
        return folded
    tokens = re.findall(r"[a-z]+", folded)
    for word, name in _FORMAT_WORDS:
        if word in tokens:
            return name
    return None


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check that exactly one of `format` and `intent_step` says the format, and that a
    `regex` format's pattern compiles."""
    if value is not None:
        scope.error(f"{path}.value", "format_matches takes no value; name the format in `format`")
        return False, None
    fmt = fields.get("format")
    intent_step = fields.get("intent_step")
    if (fmt is None) == (intent_step is None):
        scope.error(
            path,
            "name either a format (`format`) or the intent step whose expected format is "
            "checked (`intent_step`)",
        )
        return False, None
    if intent_step is not None:
        return check_intent_step(intent_step, f"{path}.intent_step", scope), None
    if fmt not in FORMATS:
        scope.error(
            f"{path}.format", f"unknown format {fmt!r}; expected one of: {', '.join(FORMATS)}"
        )
        return False, None
    pattern = fields.get("pattern")
    if fmt != "regex":
        if pattern is not None:
            scope.error(f"{path}.pattern", "only the regex format takes a pattern")
            return False, None
        return True, None
    if not isinstance(pattern, str) or not pattern:
        scope.error(f"{path}.pattern", "the regex format needs a non-empty pattern")
        return False, None
    try:
        _full(pattern)
    except (RegexError, RegexTooLarge) as exc:
        scope.error(f"{path}.pattern", f"invalid regex: {exc}")
        return False, None
    return True, None


def _full(pattern: str) -> Pattern:
    """Compile `pattern` to match the whole answer, not a part of it."""
    return compile_pattern(rf"\A(?:{pattern})\z")


def prepare(condition: Condition) -> object:
    """Compile a regex format's pattern (None for the other formats)."""
    if condition.fields.get("format") == "regex":
        return _full(str(condition.fields.get("pattern")))
    return None


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Check the answer against the format named, or the intent step's expected one."""
    fmt = condition.fields.get("format")
    source = ""
    if fmt is None:
        key = str(condition.fields.get("intent_step"))
        found = _expected(ctx, key)
        if found is None or found.startswith("!"):
            return False, found[1:] if found else f"intent step '{key}' has not answered yet"
        fmt = format_named(found)
        if fmt is None or fmt == "regex":
            return False, (
                f"intent step '{key}' expects {quote(found)}, not a format format_matches "
                f"knows ({', '.join(f for f in FORMATS if f != 'regex')})"
            )
        source = f" (expected by '{key}': {quote(found)})"
    holds, what = _matches(str(fmt), prepared, ctx)
    if condition.operator == "is_not":
        holds = not holds
    return holds, f"{what}{source}"


def _expected(ctx: EvalContext, key: str) -> str | None:
    """The intent step's expected format; "!why" when there is none; None before it answered."""
    try:
        answer = ctx.step_answer(key)
    except LookupError as exc:
        return f"!intent step '{key}': {exc}"
    if answer is None:
        return None
    try:
        expected = read_intent(answer).expected_format
    except AnswerUnreadable as exc:
        return f"!intent step '{key}' left no intent: {exc}"
    return expected or f"!intent step '{key}' expects no particular format"


def _matches(fmt: str, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Whether the answer is in format `fmt`, and a reason that says what it is."""
    detected = ctx.content_type()
    text = ctx.text.strip()
    if fmt == "regex":
        pattern: Pattern = prepared
        found = pattern.search_encoded(encode(ctx.scanned().strip()), ctx.scanned().strip())
        note = ctx.scan_note()
        return found is not None, (
            f"the answer {'matches' if found else 'does not match'} the pattern as a whole{note}"
        )
    if fmt == "number":
        body = unfence(text)[0].strip()
        ok = _NUMBER.fullmatch(body.rstrip(".")) is not None
        return ok, "the answer is one number" if ok else f"the answer is {detected}, not a number"
    if fmt == "table":
        rows = _table_rows(text)
        ok = rows >= _MIN_TABLE_ROWS
        return ok, (
            f"the answer is a table of {rows} rows"
            if ok
            else f"the answer is {detected}, not a table of {_MIN_TABLE_ROWS} rows or more"
        )
    if fmt == "list":
        ok = detected in ("list", "numbers") or _json_list(text)
        return ok, f"the answer is {detected}" + ("" if ok else ", not a list")
    if fmt == "raw_data":
        ok = detected in ("numbers", "json", "list") or _table_rows(text) >= _MIN_TABLE_ROWS
        return ok, f"the answer is {detected}" + (
            ", raw data" if ok else ", not raw data (numbers, a list, a table or JSON)"
        )
    ok = detected == fmt
    return ok, f"the answer is {detected}" + ("" if ok else f", not {fmt}")


def _json_list(text: str) -> bool:
    body = unfence(text)[0].strip()
    if not body.startswith("["):
        return False
    try:
        return isinstance(json.loads(body), list)
    except (ValueError, RecursionError):
        return False


def _table_rows(text: str) -> int:
    """Count the data rows of a Markdown table (a `|---|` rule under a header) or of
    comma/tab-separated lines with the same number (2 or more) of columns; 0 if neither."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return 0
    if "|" in lines[0] and _TABLE_RULE.match(lines[1]):
        return sum(1 for line in lines[2:] if "|" in line)
    for separator in ("\t", ","):
        columns = {line.count(separator) for line in lines}
        if len(columns) == 1 and min(columns) >= 1:
            return len(lines) - 1
    return 0


CONDITION_TYPE = ConditionType(
    name="format_matches",
    label="Format matches (intent)",
    help=(
        "The step's answer has the form named in `format` (json, list, number, numbers, "
        "raw_data: numbers, a list, a table or JSON; code, table, prose, or regex: the "
        "whole answer matches `pattern`), or the expected format of an earlier intent "
        "step's latest answer (`intent_step`). Checked by rules; false, with why, when the "
        "intent expects no format it knows."
    ),
    operators=(Operator("is", "matches", "="), Operator("is_not", "does not match", "≠")),
    fields=(
        FieldSpec(
            "format",
            "Format",
            "choice",
            choices=FORMATS,
            help="The format to check; leave empty to check the intent step's expected format.",
        ),
        FieldSpec(
            "intent_step",
            "Intent step",
            "step",
            help="The key of an intent step earlier in the recipe, whose expected format is "
            "checked (instead of `format`).",
        ),
        FieldSpec("pattern", "Pattern", "text", help="For the regex format: an RE2 pattern."),
    ),
    summary={
        "is_not": "format ≠ {format}{intent_step}",
        "*": "format = {format}{intent_step}",
    },
    check=check,
    prepare=prepare,
    evaluate=evaluate,
)
