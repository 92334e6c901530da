"""Validate and walk JSON decision trees over a run's facts (the reference tree format).

A tree is `{"version", "tree": NODE}` or a bare NODE. A node is
`{"type": "node", "priority", "condition", "if_true", "if_false"}`; a leaf is
`{"type": "leaf", "prompt": NAME}`. Conditions read documented fact fields:

- `check_safety` / `has_unsafe_pages`: `unsafe_pages`, a list of pages or a count;
- `check_pii` / `has_high_risk_pii`: `pii`, a list of type names or of objects with `type`,
  filtered by the condition's `pii_types` (any type when absent) and `exclude_types`;
- `check_keywords` / `has_keywords`: `keywords`, a list of words or of objects with `word`
  (what the keyword detector gives), or a count; with the condition's `keywords`, only those
  count;
- `check_count`: the numeric fact named by `field` (a dotted path; a list counts its items);
- `and` / `or` / `not` over `conditions`, as a type or as the operator of any other type.

`fallback` (beside `tree`, or on a bare root node) names the leaf taken when a fact a
condition reads is missing or unreadable, or its detector failed (`detect_failures`, see
`detectors.py`): without it such a condition is false, as before. A node's `priority` is a
label: a node is evaluated after the nodes above it whatever its number, so a priority that
says otherwise (not above every ancestor's) is refused (`priority_problems`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workflows.engine.conditions.logical import combine, logical_kind, operands_problem
from workflows.engine.conditions.numeric import NUMERIC_OPERATOR_NAMES, compare_numbers
from workflows.engine.conditions.values import as_number, field_path, format_number, lookup
from workflows.engine.detectors import FAILURES, fold
from workflows.engine.errors import EngineError

TREE_CONDITIONS: dict[str, str] = {
    "check_safety": "has_unsafe_pages",
    "check_pii": "has_high_risk_pii",
    "check_keywords": "has_keywords",
}
# The tree's condition types that are not combinations, and the list-of-text fields they read.
PLAIN_TYPES = (*TREE_CONDITIONS, "check_count")
LIST_FIELDS: dict[str, tuple[str, ...]] = {
    "check_pii": ("pii_types", "exclude_types"),
    "check_keywords": ("keywords",),
}
# Deeper trees are refused: they are mistakes, and walking them would exhaust the stack.
MAX_DEPTH = 64
MAX_NODES = 2000


@dataclass(frozen=True, slots=True)
class TreeOutcome:
    """The leaf a tree reached and the trace of every node passed on the way."""

    leaf: str
    trace: list[str] = field(default_factory=list)
    # The leaf is the tree's fallback: a fact was missing, or the tree did not load.
    fell_back: bool = False


class FactMissing(Exception):
    """A condition's fact is missing or unreadable: with a fallback, the tree takes it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def fallback_of(tree: object) -> str | None:
    """Return the tree's fallback leaf, if it names one (a non-empty string)."""
    if not isinstance(tree, Mapping):
        return None
    value = tree.get("fallback")
    return value if isinstance(value, str) and value else None


def tree_root(tree: Mapping[str, Any]) -> tuple[object, str]:
    """Return the root node of a tree document (or of a bare node) and its path suffix."""
    if tree.get("type") in ("node", "leaf"):
        return tree, ""
    return tree.get("tree"), ".tree"


def validate_tree(tree: object, path: str) -> list[str]:
    """Return every error of a decision tree as `path: message` (empty when it is valid)."""
    if not isinstance(tree, Mapping):
        return [f"{path}: must be an object"]
    root, suffix = tree_root(tree)
    if root is None:
        return [f"{path}.tree: is required"]
    checker = _TreeChecker()
    fallback = tree.get("fallback")
    if fallback is not None and (not isinstance(fallback, str) or not fallback):
        checker.errors.append(f"{path}.fallback: must be a leaf name (a non-empty string)")
    checker.node(root, f"{path}{suffix}", 0)
    return checker.errors


def priority_problems(tree: Mapping[str, Any], path: str) -> list[str]:
    """Return a valid tree's node priorities that contradict the order it is evaluated in.

    A node is evaluated after every node above it (its condition's answer chose it), so
    each priority must be greater than its ancestors'; siblings are alternatives, never
    both evaluated, and may share one.
    """
    problems: list[str] = []
    root, suffix = tree_root(tree)
    stack: list[tuple[object, str, int | None]] = [(root, f"{path}{suffix}", None)]
    while stack:
        node, at, above = stack.pop()
        if not isinstance(node, Mapping) or node.get("type") != "node":
            continue
        priority = node.get("priority")
        if isinstance(priority, int) and above is not None and priority <= above:
            problems.append(
                f"{at}.priority: {priority} is evaluated after priority {above} above it: "
                "a node is evaluated after its parents, so its priority must be greater"
            )
        mark = priority if isinstance(priority, int) else above
        stack += [(node.get(k), f"{at}.{k}", mark) for k in ("if_false", "if_true")]
    return problems


def leaves(tree: Mapping[str, Any]) -> list[str]:
    """Return the names of every leaf of a valid tree, in depth-first order, then its
    fallback's (a leaf it may reach too)."""
    names: list[str] = []
    stack = [tree_root(tree)[0]]
    while stack:
        node = stack.pop()
        if not isinstance(node, Mapping):
            continue
        if node.get("type") == "leaf" and isinstance(node.get("prompt"), str):
            names.append(node["prompt"])
        else:
            stack += [node.get("if_false"), node.get("if_true")]
    fallback = fallback_of(tree)
    return names if fallback is None else [*names, fallback]


class _TreeChecker:
    """Collect a tree's errors, visiting at most MAX_NODES nodes and conditions.

    The budget matters for documents read from YAML, whose aliases can share one subtree
    between many parents: walking such a tree node by node would take exponential time.
    """

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.visited = 0
        self.too_deep = False

    def spend(self, path: str) -> bool:
        """Count one visit; return False (and report once) when the budget is spent."""
        self.visited += 1
        if self.visited == MAX_NODES + 1:
            self.errors.append(f"{path}: the tree has more than {MAX_NODES} nodes and conditions")
        return self.visited <= MAX_NODES

    def node(self, node: object, path: str, depth: int) -> None:
        if not self.spend(path):
            return
        if depth > MAX_DEPTH:
            if not self.too_deep:  # once is enough: every deeper path says the same
                self.errors.append(f"{path}: the tree is deeper than {MAX_DEPTH} levels")
            self.too_deep = True
            return
        if not isinstance(node, Mapping):
            self.errors.append(f"{path}: must be an object")
            return
        kind = node.get("type")
        if kind == "leaf":
            prompt = node.get("prompt")
            if prompt is None:
                self.errors.append(f"{path}.prompt: is required")
            elif not isinstance(prompt, str) or not prompt:
                self.errors.append(f"{path}.prompt: must be a non-empty string")
            return
        if kind != "node":
            self.errors.append(f"{path}.type: unknown node type {kind!r}; expected node or leaf")
            return
        priority = node.get("priority")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            self.errors.append(f"{path}.priority: must be an integer")
        for key in ("condition", "if_true", "if_false"):
            if key not in node:
                self.errors.append(f"{path}.{key}: is required")
        if "condition" in node:
            self.condition(node["condition"], f"{path}.condition", depth)
        for key in ("if_true", "if_false"):
            if key in node:
                self.node(node[key], f"{path}.{key}", depth + 1)

    def condition(self, condition: object, path: str, depth: int) -> None:
        if not self.spend(path):
            return
        errors = self.errors
        if depth > MAX_DEPTH:
            errors.append(f"{path}: conditions are nested deeper than {MAX_DEPTH} levels")
            return
        if not isinstance(condition, Mapping):
            errors.append(f"{path}: must be an object")
            return
        kind, op = condition.get("type"), condition.get("operator")
        if not isinstance(kind, str):
            errors.append(
                f"{path}.type: is required" if kind is None else f"{path}.type: must be a string"
            )
            return
        logical = logical_kind(kind, op, PLAIN_TYPES)
        if logical is not None:
            operands = condition.get("conditions")
            problem = operands_problem(logical, operands)
            if problem is not None:
                errors.append(f"{path}.conditions: {problem}")
            if not isinstance(operands, list):
                return
            for i, operand in enumerate(operands):
                self.condition(operand, f"{path}.conditions[{i}]", depth + 1)
            return
        if kind in TREE_CONDITIONS:
            expected = TREE_CONDITIONS[kind]
            if op is not None and op != expected:
                errors.append(f"{path}.operator: unknown operator {op!r}; {kind} takes {expected}")
            for key in LIST_FIELDS.get(kind, ()):
                value = condition.get(key)
                if value is not None and not (
                    isinstance(value, list) and all(isinstance(v, str) for v in value)
                ):
                    errors.append(f"{path}.{key}: must be a list of strings")
            return
        if kind == "check_count":
            name = condition.get("field")
            if not isinstance(name, str) or not name:
                errors.append(
                    f"{path}.field: is required"
                    if name is None
                    else f"{path}.field: must be a string"
                )
            if op not in NUMERIC_OPERATOR_NAMES:
                known = ", ".join(NUMERIC_OPERATOR_NAMES)
                errors.append(f"{path}.operator: unknown operator {op!r}; expected one of: {known}")
            value = condition.get("value")
            if isinstance(value, bool) or not isinstance(value, int | float):
                errors.append(f"{path}.value: must be a number, got {value!r}")
            return
        known = ", ".join([*PLAIN_TYPES, "and", "or", "not"])
        errors.append(f"{path}.type: unknown condition type {kind!r}; expected one of: {known}")


def evaluate_tree(tree: Mapping[str, Any], facts: Mapping[str, object]) -> TreeOutcome:
    """Walk `tree` over `facts` to a leaf; return the leaf and the trace of each decision.

    A condition whose fact is missing, unreadable or not detected takes the tree's
    fallback leaf when it has one, and is false otherwise. Raise EngineError if the tree is
    not valid (see `validate_tree`).
    """
    problems = validate_tree(tree, "tree")
    if problems:
        raise EngineError("; ".join(problems))
    fallback = fallback_of(tree)
    node: Mapping[str, Any] = tree_root(tree)[0]  # type: ignore[assignment]
    trace: list[str] = []
    given = _Given(facts, strict=fallback is not None)
    while node["type"] == "node":
        label = f"node {node['priority']}" if "priority" in node else "node"
        try:
            holds, reason = _evaluate(node["condition"], given)
        except FactMissing as missing:
            trace += [f"{label}: {missing.reason} -> fallback", f"leaf {fallback}"]
            return TreeOutcome(leaf=str(fallback), trace=trace, fell_back=True)
        trace.append(f"{label}: {reason} -> {'if_true' if holds else 'if_false'}")
        node = node["if_true" if holds else "if_false"]
    trace.append(f"leaf {node['prompt']}")
    return TreeOutcome(leaf=node["prompt"], trace=trace)


@dataclass(frozen=True, slots=True)
class _Given:
    """The facts a tree reads; `strict`: a missing fact raises FactMissing (a fallback)."""

    facts: Mapping[str, object]
    strict: bool


def _evaluate(condition: Mapping[str, Any], given: _Given) -> tuple[bool, str]:
    kind = condition["type"]
    logical = logical_kind(kind, condition.get("operator"), PLAIN_TYPES)
    if logical is not None:
        holds, reason = combine(logical, condition["conditions"], _evaluate, given)
        return holds is True, reason  # facts are always applicable: never None
    facts = given.facts
    try:
        if kind == "check_safety":
            return _has_unsafe_pages(facts)
        if kind == "check_pii":
            return _has_high_risk_pii(condition, facts)
        if kind == "check_keywords":
            return _has_keywords(condition, facts)
        return _check_count(condition, facts)
    except FactMissing as missing:
        if given.strict:
            raise
        return False, missing.reason


def _missing(facts: Mapping[str, object], name: str, label: str = "") -> FactMissing:
    """Say why the fact `name` is not in the facts: its detector failed, or none gave it."""
    failures = facts.get(FAILURES)
    label = label or name
    if isinstance(failures, Mapping) and failures.get(name):
        return FactMissing(f"{label} not detected: {failures[name]}")
    return FactMissing(f"{label} missing")


def _has_unsafe_pages(facts: Mapping[str, object]) -> tuple[bool, str]:
    if "unsafe_pages" not in facts:
        raise _missing(facts, "unsafe_pages")
    count = as_number(facts["unsafe_pages"])
    if count is None:
        raise FactMissing(f"unsafe_pages is not a list or a count: {facts['unsafe_pages']!r}")
    return count > 0, f"{format_number(count)} unsafe pages"


def _pii_type(item: object) -> str | None:
    if isinstance(item, str):
        return item.upper()
    if isinstance(item, Mapping) and isinstance(item.get("type"), str):
        return str(item["type"]).upper()
    return None


def _has_high_risk_pii(
    condition: Mapping[str, Any], facts: Mapping[str, object]
) -> tuple[bool, str]:
    found = facts.get("pii")
    if found is None:
        raise _missing(facts, "pii")
    if not isinstance(found, list):
        raise FactMissing("pii is not a list")
    wanted = {t.upper() for t in condition.get("pii_types") or []}
    excluded = {t.upper() for t in condition.get("exclude_types") or []}
    types = [t for t in (_pii_type(item) for item in found) if t is not None]
    risky = sorted({t for t in types if t not in excluded and (not wanted or t in wanted)})
    if risky:
        return True, f"high-risk PII {', '.join(risky)}"
    return False, f"no high-risk PII (found: {', '.join(sorted(set(types))) or 'none'})"


def _has_keywords(condition: Mapping[str, Any], facts: Mapping[str, object]) -> tuple[bool, str]:
    found = facts.get("keywords")
    if found is None:
        raise _missing(facts, "keywords")
    if not isinstance(found, list):
        count = as_number(found)
        if count is None:
            raise FactMissing(f"keywords is not a list or a count: {found!r}")
        return count > 0, f"{format_number(count)} keywords"
    # A detector's findings are objects with the word; a list given as facts may be words.
    words = [str(w["word"]) if isinstance(w, Mapping) and "word" in w else str(w) for w in found]
    wanted = condition.get("keywords")
    if wanted:
        wanted_folded = {fold(w) for w in wanted}
        words = [w for w in words if fold(w) in wanted_folded]
    words = list(dict.fromkeys(words))
    if words:
        return True, f"keywords {', '.join(words)}"
    return False, "no keywords"


def _check_count(condition: Mapping[str, Any], facts: Mapping[str, object]) -> tuple[bool, str]:
    name = condition["field"]
    present, value = lookup(facts, field_path(name))
    if not present:
        raise _missing(facts, name, f"field {name}")
    actual = as_number(value)
    if actual is None:
        raise FactMissing(f"field {name} is not a number: {value!r}")
    holds, symbol = compare_numbers(condition["operator"], actual, condition["value"])
    return (
        holds,
        f"field {name} {format_number(actual)} {symbol} {format_number(condition['value'])}",
    )
