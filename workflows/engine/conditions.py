"""Evaluate branch conditions against one step result, each with the reason it holds or not."""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workflows.engine.answers import shorten
from workflows.engine.content_type import detect_content_type
from workflows.engine.errors import EngineError
from workflows.engine.graph import Condition
from workflows.engine.regex import MAX_TEXT_CHARS, Pattern, bounded, compile_pattern, encode
from workflows.engine.scoring import parse_score
from workflows.engine.vocabulary import OPERATOR_SYMBOLS, canonical_operator

# A judge answers (evaluator alias, instruction, reviewed text) with the evaluator's raw reply.
# Implementations should send `scoring.evaluation_prompt(instruction, text)` to the model.
Judge = Callable[[str, str, str], str]

DEFAULT_EVALUATION_PROMPT = "Rate the quality of this text from 1 to 10."
_ANSWER_LIMIT = 60

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "less_than": operator.lt,
    "less_equal": operator.le,
    "greater_than": operator.gt,
    "greater_equal": operator.ge,
    "equals": operator.eq,
    "not_equals": operator.ne,
    "greater_than_or_equal": operator.ge,
    "less_than_or_equal": operator.le,
}
_SYMBOLS = {op: OPERATOR_SYMBOLS[canonical_operator("length_check", op)] for op in _COMPARE}
# What `prepare` returns for conditions that need nothing prepared (None means "not yet").
NOTHING: tuple[()] = ()


@dataclass(slots=True)
class EvalContext:
    """What conditions read about one step result; caches what several branches reuse.

    `scores` keeps each (evaluator, prompt) score so a judge is asked once per step result.
    Patterns read only the first `regex.MAX_TEXT_CHARS` characters of the text (`scanned`).
    """

    text: str
    facts: Mapping[str, object] = field(default_factory=dict)
    decision: str | None = None
    timed_out: bool = False
    error: str | None = None
    route_selection: tuple[str, ...] | None = None
    judge: Judge | None = None
    default_evaluator: str | None = None
    scores: dict[tuple[str, str], tuple[float | None, str]] = field(default_factory=dict)
    _content_type: str | None = field(default=None, init=False, repr=False)
    _folded: str | None = field(default=None, init=False, repr=False)
    _words: int | None = field(default=None, init=False, repr=False)
    _encoded: bytes | None = field(default=None, init=False, repr=False)

    def content_type(self) -> str:
        """Return the detected content type of the text (computed once)."""
        if self._content_type is None:
            self._content_type = detect_content_type(self.text)
        return self._content_type

    def scanned(self) -> str:
        """Return the part of the text patterns read (all of it, up to MAX_TEXT_CHARS)."""
        return bounded(self.text)

    def scan_note(self) -> str:
        """Return what a reason adds when patterns read only part of the text, else ""."""
        if len(self.text) <= MAX_TEXT_CHARS:
            return ""
        return f" (in the first {MAX_TEXT_CHARS} of {len(self.text)} characters)"

    def folded(self) -> str:
        """Return the case-folded text (computed once) for case-insensitive substring checks."""
        if self._folded is None:
            self._folded = self.text.casefold()
        return self._folded

    def encoded(self) -> bytes:
        """Return the scanned text as UTF-8 bytes (computed once) for the regex conditions."""
        if self._encoded is None:
            self._encoded = encode(self.scanned())
        return self._encoded

    def word_count(self) -> int:
        """Return the number of whitespace-separated words of the text (computed once)."""
        if self._words is None:
            self._words = len(self.text.split())
        return self._words

    def score(self, evaluator: str, prompt: str) -> tuple[float | None, str]:
        """Return the evaluator's score for the text, or None and why there is none."""
        key = (evaluator, prompt)
        cached = self.scores.get(key)
        if cached is None:
            cached = self._ask(evaluator, prompt)
            self.scores[key] = cached
        return cached

    def _ask(self, evaluator: str, prompt: str) -> tuple[float | None, str]:
        if self.judge is None:
            return None, f"no judge available to ask '{evaluator}'"
        try:
            answer = self.judge(evaluator, prompt, self.text)
        except Exception as exc:  # a failing judge is a reason, not a crash of the run
            return None, f"judge '{evaluator}' failed: {type(exc).__name__}: {exc}"
        score = parse_score(answer)
        if score is None:
            return None, f"judge answer had no score: {shorten(answer, _ANSWER_LIMIT)!r}"
        return score, ""


def _quote(text: str) -> str:
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


def choices(value: object) -> frozenset[str]:
    """Return the options a `human_decision` value names: `approve` or `approve|revise`."""
    parts = [str(v) for v in value] if isinstance(value, list | tuple) else str(value).split("|")
    return frozenset(p.strip().lower() for p in parts if p.strip())


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


def compare_numbers(op: str, actual: float | int, expected: float | int) -> tuple[bool, str]:
    """Compare two numbers with a numeric operator; return the result and its symbol.

    The symbol reads true either way: `<` when 143 < 200 holds, `not <` when it does not.
    """
    holds = _COMPARE[op](actual, expected)
    yes, no = _SYMBOLS[op]
    return holds, yes if holds else no


def prepare(cond: Condition) -> object:
    """Precompute what evaluating `cond` needs (a compiled regex, a number, a path)."""
    kind, op, fields = cond.type, cond.operator, cond.fields
    if kind == "pattern_match":
        flags = str(fields.get("flags") or "")
        if op in ("regex_match", "regex_not_match"):
            return compile_pattern(str(cond.value), flags)
        text = str(cond.value).strip() if op == "equals" else str(cond.value)
        return (text.casefold(), True) if "i" in flags else (text, False)
    if kind == "length_check":
        return _number_value(cond), fields.get("unit") == "words"
    if kind == "ai_evaluation":
        return _number_value(cond)
    if kind == "human_decision":
        return choices(cond.value)
    if kind == "execution_timeout":
        return as_bool(cond.value) is not False
    if kind == "execution_error":
        if op == "contains":
            return str(cond.value).casefold()
        return as_bool(cond.value) is not False
    if kind in ("field_compare", "check_count"):
        name = str(fields.get("field", ""))
        number = as_number(cond.value)
        is_number = number is not None and not isinstance(cond.value, list | tuple | dict)
        return field_path(name), number if is_number else cond.value
    if kind in ("content_type", "route_selected"):
        return str(cond.value)
    return NOTHING


def _number_value(cond: Condition) -> float | int:
    number = as_number(cond.value)
    if number is None:
        raise EngineError(f"{cond.type} needs a number, got {cond.value!r}")
    return number


def evaluate_condition(cond: Condition, ctx: EvalContext) -> tuple[bool, str]:
    """Return whether `cond` holds for the step result in `ctx`, and why."""
    evaluator = _EVALUATORS.get(cond.type)
    if evaluator is None:
        raise EngineError(f"unknown condition type '{cond.type}'")
    prepared = cond.compiled if cond.compiled is not None else prepare(cond)
    return evaluator(cond, prepared, ctx)


def _pattern_match(cond: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    op = cond.operator
    if op == "equals":
        # The whole text: a comparison is linear, and a cut text would equal what it is not.
        needle, fold = prepared
        text = ctx.text.strip()
        if (text.casefold() if fold else text) == needle:
            return True, f"response equals {_quote(needle)}"
        return False, f"response does not equal {_quote(needle)}"
    note = ctx.scan_note()
    if op in ("regex_match", "regex_not_match"):
        pattern: Pattern = prepared
        found = pattern.search_encoded(ctx.encoded(), ctx.scanned())
        if found is None and note and op == "regex_not_match":
            # The rest was not read: a match there cannot be ruled out.
            return False, f"regex did not match{note}; the rest was not read, so not proven"
        if found is None:
            return op == "regex_not_match", f"regex did not match{note}"
        return op == "regex_match", f"regex matched {_quote(found.text)} at {found.start}{note}"
    # A substring search is linear: it reads the whole text.
    needle, fold = prepared
    if needle in (ctx.folded() if fold else ctx.text):
        return op == "contains", f"response contains {_quote(needle)}"
    return op == "not_contains", f"response does not contain {_quote(needle)}"


def _length_check(cond: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    limit, in_words = prepared
    size = ctx.word_count() if in_words else len(ctx.text)
    holds, symbol = compare_numbers(cond.operator, size, limit)
    unit = " words" if in_words else ""
    return holds, f"length {size}{unit} {symbol} {format_number(limit)}"


def _ai_evaluation(cond: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    evaluator = cond.fields.get("evaluator") or ctx.default_evaluator
    if not evaluator:
        return False, "no evaluator for ai_evaluation"
    prompt = cond.fields.get("prompt") or DEFAULT_EVALUATION_PROMPT
    score, problem = ctx.score(str(evaluator), str(prompt))
    if score is None:
        return False, problem
    holds = _COMPARE[cond.operator](score, prepared)
    symbol = _SYMBOLS[cond.operator][0]
    scored = f"judge scored {format_number(score)}"
    if holds:
        return True, f"{scored} {symbol} {format_number(prepared)}"
    return False, f"{scored}, needs {symbol} {format_number(prepared)}"


def _human_decision(cond: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    if ctx.decision is None:
        return False, "no reviewer decision"
    chosen = ctx.decision.strip().lower()
    if chosen in prepared:
        return True, f"reviewer chose {chosen}"
    return False, f"reviewer chose {chosen}, not {'|'.join(sorted(prepared))}"


def _execution_timeout(cond: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    reason = "step timed out" if ctx.timed_out else "step did not time out"
    return ctx.timed_out == prepared, reason


def _execution_error(cond: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    error = ctx.error
    if cond.operator == "contains":
        if error is None:
            return False, "step did not fail"
        if prepared in error.casefold():
            return True, f"error contains {_quote(prepared)}"
        return False, f"error does not contain {_quote(prepared)}"
    if error is None:
        return prepared is False, "step did not fail"
    return prepared is True, f"step failed: {shorten(error)}"


def _field_compare(cond: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    path, expected = prepared
    name = ".".join(path)
    found, value = lookup(ctx.facts, path)
    if not found:
        return False, f"field {name} missing"
    if isinstance(expected, int | float) and not isinstance(expected, bool):
        actual = as_number(value)
        if actual is None:
            return False, f"field {name} is not a number: {shorten(repr(value))}"
        holds, symbol = compare_numbers(cond.operator, actual, expected)
        return holds, f"field {name} {format_number(actual)} {symbol} {format_number(expected)}"
    same = value == expected or (
        isinstance(expected, str) and not isinstance(value, str) and str(value) == expected
    )
    holds = same if cond.operator == "equals" else not same
    shown = _quote(value) if isinstance(value, str) else shorten(json.dumps(value, default=str))
    want = _quote(expected) if isinstance(expected, str) else json.dumps(expected, default=str)
    return holds, f"field {name} {shown} {'==' if same else '!='} {want}"


def _content_type(cond: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    detected = ctx.content_type()
    same = detected == prepared
    reason = (
        f"content type is {detected}" if same else f"content type is {detected}, not {prepared}"
    )
    return same if cond.operator == "is" else not same, reason


def _route_selected(cond: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    selection = ctx.route_selection
    if selection is None:
        return False, "no route selection yet"
    if prepared in selection:
        return True, f"route {prepared} selected"
    return False, f"route {prepared} not selected (selected: {', '.join(selection) or 'none'})"


def _all(cond: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    reasons: list[str] = []
    for sub in cond.conditions:
        holds, reason = evaluate_condition(sub, ctx)
        reasons.append(reason)
        if not holds:  # the first false operand decides; later ones are not asked
            return False, f"and: [{'; '.join(reasons)}]"
    return True, f"and: [{'; '.join(reasons)}]"


def _any(cond: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    reasons: list[str] = []
    for sub in cond.conditions:
        holds, reason = evaluate_condition(sub, ctx)
        reasons.append(reason)
        if holds:
            return True, f"or: [{'; '.join(reasons)}]"
    return False, f"or: [{'; '.join(reasons)}]"


def _not(cond: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    if len(cond.conditions) != 1:
        raise EngineError(f"not takes exactly one condition, got {len(cond.conditions)}")
    holds, reason = evaluate_condition(cond.conditions[0], ctx)
    return not holds, f"not: [{reason}]"


def _default(cond: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    return True, "default"


_Evaluator = Callable[[Condition, Any, EvalContext], tuple[bool, str]]
_EVALUATORS: dict[str, _Evaluator] = {
    "pattern_match": _pattern_match,
    "length_check": _length_check,
    "ai_evaluation": _ai_evaluation,
    "human_decision": _human_decision,
    "execution_timeout": _execution_timeout,
    "execution_error": _execution_error,
    "field_compare": _field_compare,
    "check_count": _field_compare,
    "content_type": _content_type,
    "route_selected": _route_selected,
    "and": _all,
    "or": _any,
    "not": _not,
    "default": _default,
}
