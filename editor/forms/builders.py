"""The step panel's visual builders: a decision tree's nodes and leaves, a classify step's routes.

Each builder is rendered from the document value and read back from its posted fields over
the value it was rendered from (the `base`, posted as hidden JSON), so keys the builder does
not show are kept, in their order: a tree or a route list applied unchanged is written back
unchanged. The JSON text stays as the "advanced" view of the same value; switching views, and
the builder's buttons (add an operand, a route, an example), re-render the builder from what
was typed (`builder_op`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workflows.engine.conditions.logical import LOGICAL_TYPES, SEVERAL_OPERANDS, logical_kind
from workflows.engine.conditions.numeric import NUMERIC_OPERATOR_NAMES
from workflows.engine.decision_tree import (
    LIST_FIELDS,
    PLAIN_TYPES,
    fallback_of,
    tree_root,
    validate_tree,
)
from workflows.engine.vocabulary import COMPLETE, END
from workflows.validators import whole_number

from .fields import normalise_newlines

TREE = "dt"
ROUTES = "rt"
BUILDER, JSON_VIEW = "builder", "json"
# Bounds on what a post can make the server build (the engine refuses deeper trees anyway).
MAX_TREE_DEPTH = 32
MAX_OPERANDS = 50
MAX_ROUTES = 100
MAX_EXAMPLES = 50

TREE_CONDITION_TYPES = (*PLAIN_TYPES, *LOGICAL_TYPES)
TREE_CONDITION_LABELS = {
    "check_safety": "Has unsafe pages",
    "check_pii": "Has high-risk PII",
    "check_keywords": "Has keywords",
    "check_count": "Compare a number (field)",
    "and": "All of (and)",
    "or": "Any of (or)",
    "not": "Not",
}
LIST_LABELS = {
    "pii_types": "PII types (comma separated; empty: any)",
    "exclude_types": "Except the types",
    "keywords": "Only the keywords (comma separated; empty: any)",
}
NODE_KEYS = ("type", "priority", "condition", "if_true", "if_false")
LEAF_KEYS = ("type", "prompt")
COUNT_KEYS = ("type", "field", "operator", "value")
ROUTE_KEYS = ("name", "instructions", "examples", "always_active")
EXAMPLE_KEYS = ("text", "selected", "reason")
_INTEGER = re.compile(r"-?\d{1,15}")


def _merge(base: Mapping[str, Any] | None, new: dict[str, Any], owned: tuple[str, ...]) -> dict:
    """Return `new` with the keys of `base` the builder does not own, in `base`'s key order."""
    if base is None:
        return new
    merged: dict[str, Any] = {}
    for key, value in base.items():
        if key in new:
            merged[key] = new[key]
        elif key not in owned:
            merged[key] = value
    merged.update({k: v for k, v in new.items() if k not in merged})
    return merged


def _text(data: Any, name: str) -> str:
    value = data.get(name)
    return normalise_newlines(value) if isinstance(value, str) else ""


def _count(data: Any, name: str, limit: int) -> int:
    return min(whole_number(_text(data, name).strip()) or 0, limit)


def _number(text: str) -> Any:
    """Read a number as typed: `5` stays an integer, `5.0` a float; other text is kept for
    the document check to refuse with its path."""
    text = text.strip()
    if _INTEGER.fullmatch(text):
        return int(text)
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def _show_number(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "" if value is None else json.dumps(value)
    return json.dumps(value) if isinstance(value, int | float) else str(value)


# --- the decision tree ---------------------------------------------------------------------


@dataclass
class ConditionView:
    """One condition of a tree node as the builder shows it."""

    path: str
    type: str
    operator: str = ""
    fact: str = ""  # check_count's `field`
    value: str = ""
    lists: list[tuple[str, str, str]] = field(default_factory=list)  # (name, label, text)
    children: list[ConditionView] = field(default_factory=list)

    @property
    def prefix(self) -> str:
        return f"{TREE}-{self.path}"

    @property
    def logical(self) -> bool:
        return self.type in LOGICAL_TYPES

    @property
    def can_add(self) -> bool:
        return self.type in SEVERAL_OPERANDS and len(self.children) < MAX_OPERANDS

    @property
    def can_remove_children(self) -> bool:
        return self.type in SEVERAL_OPERANDS and len(self.children) > 1


@dataclass
class NodeView:
    """One node or leaf of a tree as the builder shows it."""

    path: str
    is_leaf: bool
    leaf: str = ""
    target: str = ""
    priority: str = ""
    condition: ConditionView | None = None
    if_true: NodeView | None = None
    if_false: NodeView | None = None

    @property
    def prefix(self) -> str:
        return f"{TREE}-{self.path}"


def _condition_view(condition: Mapping[str, Any], path: str) -> ConditionView:
    kind = condition.get("type")
    logical = logical_kind(kind, condition.get("operator"), PLAIN_TYPES)
    if logical is not None:
        operands = condition.get("conditions") or []
        return ConditionView(
            path,
            logical,
            children=[_condition_view(c, f"{path}.{i}") for i, c in enumerate(operands)],
        )
    view = ConditionView(path, str(kind))
    if kind == "check_count":
        view.operator = str(condition.get("operator") or "")
        view.fact = str(condition.get("field") or "")
        view.value = _show_number(condition.get("value"))
    for name in LIST_FIELDS.get(str(kind), ()):
        items = condition.get(name) or []
        view.lists.append((name, LIST_LABELS[name], ", ".join(items)))
    return view


def _node_view(node: Mapping[str, Any], path: str, targets: Mapping[str, Any]) -> NodeView:
    if node.get("type") == "leaf":
        leaf = str(node.get("prompt") or "")
        target = targets.get(leaf)
        return NodeView(path, True, leaf=leaf, target=target if isinstance(target, str) else "")
    return NodeView(
        path,
        False,
        priority=_show_number(node.get("priority")),
        condition=_condition_view(node["condition"], f"{path}.c"),
        if_true=_node_view(node["if_true"], f"{path}.y", targets),
        if_false=_node_view(node["if_false"], f"{path}.n", targets),
    )


def _depth(node: Any) -> int:
    depth, stack = 0, [(node, 0)]
    while stack:
        current, level = stack.pop()
        depth = max(depth, level)
        if isinstance(current, Mapping) and current.get("type") == "node":
            stack += [(current.get("if_true"), level + 1), (current.get("if_false"), level + 1)]
    return depth


def tree_view(tree: Any, leaf_targets: Any) -> NodeView | None:
    """Return the builder's view of a tree, or None when only its JSON can show it."""
    if tree is None:
        return NodeView("t", True, leaf="")
    if validate_tree(tree, "tree"):
        return None
    root = tree_root(tree)[0]
    if _depth(root) > MAX_TREE_DEPTH:
        return None
    targets = leaf_targets if isinstance(leaf_targets, Mapping) else {}
    return _node_view(root, "t", targets)  # type: ignore[arg-type]


def _plain_condition(data: Any, prefix: str, kind: str, base: Any, fresh: bool) -> dict:
    base = base if isinstance(base, Mapping) and base.get("type") == kind else None
    new: dict[str, Any] = {"type": kind}
    if kind == "check_count":
        if fresh:
            new.update(field="", operator="greater_than", value=0)
        else:
            new["field"] = _text(data, f"{prefix}-field").strip()
            new["operator"] = _text(data, f"{prefix}-operator")
            new["value"] = _number(_text(data, f"{prefix}-value"))
        return _merge(base, new, COUNT_KEYS)
    owned: tuple[str, ...] = ("type",)
    for name in LIST_FIELDS.get(kind, ()):
        owned += (name,)
        items = [] if fresh else _text(data, f"{prefix}-{name}").split(",")
        items = [i.strip() for i in items if i.strip()]
        if items or (base is not None and name in base):
            new[name] = items
    return _merge(base, new, owned)


def _read_condition(data: Any, path: str, base: Any, depth: int) -> dict[str, Any]:
    prefix = f"{TREE}-{path}"
    kind = _text(data, f"{prefix}-type") or "check_safety"
    prev = _text(data, f"{prefix}-prev") or kind
    if kind not in TREE_CONDITION_TYPES:
        kind = "check_safety"
    if kind not in LOGICAL_TYPES:
        return _plain_condition(data, prefix, kind, base, fresh=prev != kind)
    if prev not in LOGICAL_TYPES:
        # A condition turned into and/or/not becomes its first operand.
        operand = _plain_condition(data, prefix, prev, base, fresh=prev not in PLAIN_TYPES)
        return {"type": kind, "conditions": [operand]}
    base_kind = (
        logical_kind(base.get("type"), base.get("operator"), PLAIN_TYPES)
        if isinstance(base, Mapping)
        else None
    )
    base_operands = base.get("conditions") if isinstance(base, Mapping) else None
    base_operands = base_operands if isinstance(base_operands, list) else []
    operands = []
    if depth < MAX_TREE_DEPTH:
        for i in range(_count(data, f"{prefix}-count", MAX_OPERANDS)):
            below = base_operands[i] if i < len(base_operands) else None
            operands.append(_read_condition(data, f"{path}.{i}", below, depth + 1))
    if kind not in SEVERAL_OPERANDS:
        operands = operands[:1]
    if not operands:
        operands = [{"type": "check_safety"}]
    if base_kind == kind:
        # Keep the reference form `{"type": NAME, "operator": "and"}` as it was written.
        return _merge(base, {"type": base["type"], "conditions": operands}, ("conditions",))
    return {"type": kind, "conditions": operands}


def _read_node(
    data: Any, path: str, base: Any, depth: int, chosen: dict[str, str]
) -> dict[str, Any]:
    prefix = f"{TREE}-{path}"
    kind = "node" if _text(data, f"{prefix}-kind") == "node" else "leaf"
    prev = _text(data, f"{prefix}-prev") or kind
    if depth >= MAX_TREE_DEPTH:
        kind = "leaf"
    base = base if isinstance(base, Mapping) and base.get("type") == kind else None
    name = _text(data, f"{prefix}-leaf").strip()
    if kind == "leaf":
        if prev != "leaf":
            name = "leaf"
        target = _text(data, f"{prefix}-target")
        if target and name and name not in chosen:
            chosen[name] = target
        return _merge(base, {"type": "leaf", "prompt": name}, LEAF_KEYS)
    if prev == "leaf":
        # A leaf turned into a node keeps its name (and its target) on the "yes" side.
        target = _text(data, f"{prefix}-target")
        if target and name and name not in chosen:
            chosen[name] = target
        return {
            "type": "node",
            "condition": {"type": "check_safety"},
            "if_true": {"type": "leaf", "prompt": name or "yes"},
            "if_false": {"type": "leaf", "prompt": "otherwise"},
        }
    new: dict[str, Any] = {"type": "node"}
    priority = _text(data, f"{prefix}-priority").strip()
    if priority:
        new["priority"] = _number(priority)
    below = base or {}
    new["condition"] = _read_condition(data, f"{path}.c", below.get("condition"), depth)
    new["if_true"] = _read_node(data, f"{path}.y", below.get("if_true"), depth + 1, chosen)
    new["if_false"] = _read_node(data, f"{path}.n", below.get("if_false"), depth + 1, chosen)
    return _merge(base, new, NODE_KEYS)


def read_tree(data: Any, base_tree: Any, base_targets: Any) -> tuple[Any, dict[str, str]]:
    """Return the tree and the leaf targets the builder's posted fields describe.

    A leaf target left empty is not written (the leaf's name is then the step to go to); the
    targets keep the order they had.
    """
    wrapped = isinstance(base_tree, Mapping) and tree_root(base_tree)[1] == ".tree"
    root_base = base_tree.get("tree") if wrapped else base_tree  # type: ignore[union-attr]
    chosen: dict[str, str] = {}
    root = _read_node(data, "t", root_base, 0, chosen)
    tree = {**base_tree, "tree": root} if wrapped else root  # type: ignore[dict-item]
    old = list(base_targets) if isinstance(base_targets, Mapping) else []
    targets = {leaf: chosen[leaf] for leaf in old if leaf in chosen}
    targets.update({leaf: t for leaf, t in chosen.items() if leaf not in targets})
    # The tree's fallback is no leaf of the builder's: its target stays as it was.
    fallback = fallback_of(tree)
    if fallback is not None and fallback not in targets and fallback in old:
        targets[fallback] = base_targets[fallback]  # type: ignore[index]
    return tree, targets


def _walk(root: Any, path: str) -> Any:
    """Return the node or condition at a builder path (`t.n.c.0`) of a bare tree, or None."""
    current = root
    for part in path.split(".")[1:]:
        if not isinstance(current, Mapping):
            return None
        if part in ("y", "n", "c"):
            current = current.get({"y": "if_true", "n": "if_false", "c": "condition"}[part])
        elif whole_number(part) is not None:
            operands = current.get("conditions")
            index = int(part)
            current = (
                operands[index] if isinstance(operands, list) and index < len(operands) else None
            )
        else:
            return None
    return current


def tree_apply(tree: Any, op: str) -> None:
    """Apply a builder button (`dt-add:PATH`, `dt-remove:PATH`) to a tree, in place."""
    action, _, path = op.partition(":")
    root = tree_root(tree)[0] if isinstance(tree, Mapping) else None
    if action == f"{TREE}-add":
        condition = _walk(root, path)
        operands = condition.get("conditions") if isinstance(condition, dict) else None
        if isinstance(operands, list) and len(operands) < MAX_OPERANDS:
            operands.append({"type": "check_safety"})
    elif action == f"{TREE}-remove":
        parent_path, _, index = path.rpartition(".")
        parent = _walk(root, parent_path)
        operands = parent.get("conditions") if isinstance(parent, dict) else None
        k = whole_number(index)
        if isinstance(operands, list) and k is not None and k < len(operands) > 1:
            operands.pop(k)


# --- the routes of a classify step -----------------------------------------------------------


@dataclass
class ExampleView:
    prefix: str
    base: str
    text: str = ""
    selected: bool = False
    reason: str = ""


@dataclass
class RouteView:
    index: int
    prefix: str
    base: str
    name: str = ""
    instructions: str = ""
    always_active: bool = False
    examples: list[ExampleView] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)


def _routes_showable(routes: Any) -> bool:
    if routes is None:
        return True
    if not isinstance(routes, list) or len(routes) > MAX_ROUTES:
        return False
    for route in routes:
        if not isinstance(route, Mapping) or not isinstance(route.get("name", ""), str):
            return False
        if not isinstance(route.get("instructions", ""), str):
            return False
        if not isinstance(route.get("always_active", False), bool):
            return False
        examples = route.get("examples", [])
        if not isinstance(examples, list) or len(examples) > MAX_EXAMPLES:
            return False
        for example in examples:
            if not (
                isinstance(example, Mapping)
                and isinstance(example.get("text", ""), str)
                and isinstance(example.get("selected", False), bool)
                and isinstance(example.get("reason", ""), str)
            ):
                return False
    return True


def routes_view(routes: Any, branch_targets: Mapping[str, list[str]]) -> list[RouteView] | None:
    """Return the table's rows for a route list, or None when only its JSON can show it."""
    if not _routes_showable(routes):
        return None
    rows = []
    for i, route in enumerate(routes or []):
        prefix = f"{ROUTES}-{i}"
        name = route.get("name", "")
        rows.append(
            RouteView(
                index=i,
                prefix=prefix,
                base=str(i),
                name=name,
                instructions=route.get("instructions", ""),
                always_active=route.get("always_active", False),
                examples=[
                    ExampleView(
                        f"{prefix}-ex-{j}",
                        str(j),
                        e.get("text", ""),
                        e.get("selected", False),
                        e.get("reason", ""),
                    )
                    for j, e in enumerate(route.get("examples") or [])
                ],
                targets=branch_targets.get(name, []),
            )
        )
    return rows


def _base_item(items: Any, raw: str) -> Mapping[str, Any] | None:
    index = whole_number(raw)
    if isinstance(items, list) and index is not None and index < len(items):
        item = items[index]
        return item if isinstance(item, Mapping) else None
    return None


def read_routes(data: Any, base: Any, keep_blank: bool = False) -> list[dict[str, Any]]:
    """Return the routes the table's posted rows describe; rows left blank are dropped
    (`keep_blank` keeps them, to re-render a row just added)."""
    routes = []
    for i in range(_count(data, f"{ROUTES}-count", MAX_ROUTES)):
        prefix = f"{ROUTES}-{i}"
        old = _base_item(base, _text(data, f"{prefix}-base"))
        name = _text(data, f"{prefix}-name").strip()
        instructions = _text(data, f"{prefix}-instructions")
        always = bool(data.get(f"{prefix}-always_active"))
        examples = []
        old_examples = old.get("examples") if old else None
        for j in range(_count(data, f"{prefix}-excount", MAX_EXAMPLES)):
            ex = f"{prefix}-ex-{j}"
            old_example = _base_item(old_examples, _text(data, f"{ex}-base"))
            text = _text(data, f"{ex}-text")
            reason = _text(data, f"{ex}-reason")
            if not text.strip() and not reason.strip() and old_example is None and not keep_blank:
                continue
            example: dict[str, Any] = {"text": text, "selected": bool(data.get(f"{ex}-selected"))}
            if reason or (old_example is not None and "reason" in old_example):
                example["reason"] = reason
            examples.append(_merge(old_example, example, EXAMPLE_KEYS))
        if not (name or instructions.strip() or examples or old or keep_blank):
            continue
        route: dict[str, Any] = {"name": name}
        if instructions or (old is not None and "instructions" in old):
            route["instructions"] = instructions
        if examples or (old is not None and "examples" in old):
            route["examples"] = examples
        if always or (old is not None and "always_active" in old):
            route["always_active"] = always
        routes.append(_merge(old, route, ROUTE_KEYS))
    return routes


def routes_apply(routes: list[dict[str, Any]], op: str) -> None:
    """Apply a table button (`rt-add`, `rt-remove:I`, `rt-example:I`) to routes, in place."""
    action, _, where = op.partition(":")
    index = whole_number(where)
    if action == f"{ROUTES}-add" and len(routes) < MAX_ROUTES:
        routes.append({"name": "", "instructions": "", "examples": []})
    elif action == f"{ROUTES}-remove" and index is not None and index < len(routes):
        routes.pop(index)
    elif action == f"{ROUTES}-example" and index is not None and index < len(routes):
        examples = routes[index].setdefault("examples", [])
        if isinstance(examples, list) and len(examples) < MAX_EXAMPLES:
            examples.append({"text": "", "selected": True})


# --- the builders as the panel shows them ---------------------------------------------------


def _pretty(value: Any) -> str:
    return "" if value is None else json.dumps(value, ensure_ascii=False, indent=2)


def _parse(text: str) -> tuple[Any, str | None]:
    if not text.strip():
        return None, None
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as exc:
        return None, f"Not JSON ({exc})."


@dataclass
class TreeBuilder:
    """The decision tree section of a step panel: the builder, or the JSON as text."""

    mode: str
    tree_text: str
    targets_text: str
    root: NodeView | None = None
    note: str = ""
    target_choices: list[tuple[str, str]] = field(default_factory=list)
    type_choices: list[tuple[str, str]] = field(
        default_factory=lambda: list(TREE_CONDITION_LABELS.items())
    )
    operator_choices: tuple[str, ...] = NUMERIC_OPERATOR_NAMES

    @classmethod
    def from_value(
        cls, tree: Any, targets: Any, mode: str, step_keys: list[str], note: str = ""
    ) -> TreeBuilder:
        builder = cls(mode, _pretty(tree), _pretty(targets), note=note)
        if mode == BUILDER:
            builder.root = tree_view(tree, targets)
            if builder.root is None:
                builder.mode = JSON_VIEW
                builder.note = note or "This tree can only be edited as JSON until it is valid."
        choices = [("", "— the step named like the leaf")]
        choices += [(k, k) for k in step_keys]
        choices += [(END, "@end (stop the run)"), (COMPLETE, "@complete (finish)")]
        known = {c[0] for c in choices}
        if isinstance(targets, Mapping):
            # A target the document names but no step has stays selectable (lint reports it).
            choices += [(t, t) for t in targets.values() if isinstance(t, str) and t not in known]
        builder.target_choices = choices
        return builder

    @classmethod
    def from_post(cls, data: Any, step_keys: list[str], op: str = "") -> TreeBuilder:
        """Return the section as posted, after the builder button or view switch `op`."""
        mode = JSON_VIEW if _text(data, "tree_mode") != BUILDER else BUILDER
        tree_text, targets_text = _text(data, "tree"), _text(data, "leaf_targets")
        tree, tree_error = _parse(tree_text)
        targets, targets_error = _parse(targets_text)
        error = tree_error or targets_error
        if mode == BUILDER and not error:
            tree, targets = read_tree(data, tree, targets)
            tree_apply(tree, op)
        wanted = {f"{TREE}-json": JSON_VIEW, f"{TREE}-builder": BUILDER}.get(op, mode)
        if error:
            return cls(JSON_VIEW, tree_text, targets_text, note=error)
        return cls.from_value(tree, targets, wanted, step_keys)


@dataclass
class RoutesBuilder:
    """The routes section of a classify step's panel: the table, or the JSON as text."""

    mode: str
    routes_text: str
    rows: list[RouteView] | None = None
    note: str = ""

    @classmethod
    def from_value(
        cls, routes: Any, mode: str, branch_targets: Mapping[str, list[str]], note: str = ""
    ) -> RoutesBuilder:
        builder = cls(mode, _pretty(routes), note=note)
        if mode == BUILDER:
            builder.rows = routes_view(routes, branch_targets)
            if builder.rows is None:
                builder.mode = JSON_VIEW
                builder.note = note or "These routes can only be edited as JSON until fixed."
        return builder

    @classmethod
    def from_post(
        cls, data: Any, branch_targets: Mapping[str, list[str]], op: str = ""
    ) -> RoutesBuilder:
        """Return the section as posted, after the table button or view switch `op`."""
        mode = JSON_VIEW if _text(data, "routes_mode") != BUILDER else BUILDER
        text = _text(data, "routes")
        routes, error = _parse(text)
        if error:
            return cls(JSON_VIEW, text, note=error)
        if mode == BUILDER:
            routes = read_routes(data, routes, keep_blank=True)
            routes_apply(routes, op)
        wanted = {f"{ROUTES}-json": JSON_VIEW, f"{ROUTES}-builder": BUILDER}.get(op, mode)
        return cls.from_value(routes, wanted, branch_targets)


def route_targets(step: Mapping[str, Any]) -> dict[str, list[str]]:
    """Return, per route name, the targets of the step's `route_selected` branches."""
    found: dict[str, list[str]] = {}
    branches = step.get("branches")
    for branch in branches if isinstance(branches, list) else []:
        when = branch.get("when") if isinstance(branch, Mapping) else None
        if isinstance(when, Mapping) and when.get("type") == "route_selected":
            name, target = when.get("value"), branch.get("target")
            if isinstance(name, str) and isinstance(target, str):
                found.setdefault(name, []).append(target)
    return found
