"""The condition builder's tree: a `ConditionForm` per node, and/or/not nodes holding operands.

The tree is bound to the posted fields when the branch is applied; it is rebuilt from them as
form initials when a builder button (add, remove an operand) or a type change asks the panel
to re-render what was typed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from workflows.engine import SEVERAL_OPERANDS, combinator
from workflows.validators import whole_number

from ..catalog import condition_type, logical_types, new_operand
from .actors import ActorPicker
from .condition import ConditionForm, initial_of, posted_initial
from .document import DocumentContext

MAX_CONDITION_DEPTH = 8
MAX_OPERANDS = 50


def initial_tree(when: Any) -> dict[str, Any]:
    """Return a condition document as a tree of form initials: {"initial", "children"}."""
    if not isinstance(when, dict):
        when = {"type": "default"}
    logical = combinator(when.get("type"), when.get("operator"))
    if logical is None:
        return {"initial": initial_of(when), "children": []}
    extra = {k: v for k, v in when.items() if k not in ("type", "conditions")}
    if when.get("type") != logical:
        extra["type"] = when.get("type")
    children = [initial_tree(c) for c in when.get("conditions") or []]
    return {
        "initial": {
            "type": logical,
            "prev_type": logical,
            "extra": json.dumps(extra) if extra else "",
            "count": len(children),
        },
        "children": children,
    }


def posted_tree(data: Any, prefix: str = "c", depth: int = 0) -> dict[str, Any]:
    """Read the builder's posted fields back into a tree of initials (to re-render it).

    A node whose type just changed is adapted: a condition turned into and/or/not becomes its
    first operand; an operator that the new type lacks is replaced by the type's first one.
    """
    kind = str(data.get(f"{prefix}-type") or "default")
    prev = str(data.get(f"{prefix}-prev_type") or kind)
    initial = posted_initial(data, prefix, (prev, kind))
    logical = logical_types()
    children: list[dict[str, Any]] = []
    if kind in logical:
        if prev in logical and depth < MAX_CONDITION_DEPTH:
            children = [
                posted_tree(data, f"{prefix}.{k}", depth + 1)
                for k in range(min(initial["count"], MAX_OPERANDS))
            ]
        elif prev not in logical:
            leaf = {**initial, "type": prev, "prev_type": prev, "count": 0}
            children = [{"initial": leaf, "children": []}]
        if kind not in SEVERAL_OPERANDS:
            children = children[:1]
        if not children:
            children = [initial_tree({"type": "default"})]
        initial.update(operator="", count=len(children))
    else:
        spec = condition_type(kind)
        operators = spec["operators"] if spec else []
        accepted = [op["name"] for op in operators] + list(spec["operator_aliases"] if spec else [])
        if initial["operator"] not in accepted:
            initial["operator"] = operators[0]["name"] if len(operators) > 1 else ""
    if prev != kind:
        initial["extra"] = ""
    initial["prev_type"] = kind
    return {"initial": initial, "children": children}


def tree_apply(tree: dict[str, Any], op: str, prefix: str = "c") -> dict[str, Any]:
    """Apply a builder button (`add:PREFIX`, `remove:PREFIX`) to a tree of initials."""
    action, _, where = op.partition(":")
    addable = tree["initial"]["type"] in SEVERAL_OPERANDS and len(tree["children"]) < MAX_OPERANDS
    if action == "add" and where == prefix and addable:
        tree["children"].append(initial_tree(new_operand()))
    children = []
    for k, child in enumerate(tree["children"]):
        child_prefix = f"{prefix}.{k}"
        if action == "remove" and where == child_prefix:
            continue
        children.append(tree_apply(child, op, child_prefix))
    if not children and tree["initial"]["type"] in logical_types():
        children = [initial_tree({"type": "default"})]
    tree["children"] = children
    tree["initial"]["count"] = len(children)
    return tree


@dataclass
class ConditionNode:
    """A condition form with its operand nodes, rendered recursively by the branch panel."""

    form: ConditionForm
    children: list[ConditionNode]
    prefix: str
    depth: int

    @property
    def can_add(self) -> bool:
        return self.form.kind in SEVERAL_OPERANDS and self.depth < MAX_CONDITION_DEPTH

    @property
    def can_remove_children(self) -> bool:
        return self.form.kind in SEVERAL_OPERANDS and len(self.children) > 1

    def is_valid(self) -> bool:
        valid = self.form.is_valid()
        for child in self.children:
            valid = child.is_valid() and valid
        if valid and self.form.is_logical:
            if self.form.kind not in SEVERAL_OPERANDS and len(self.children) != 1:
                self.form.add_error(None, "Not takes exactly one condition.")
                return False
            if not self.children:
                self.form.add_error(None, "Add at least one condition.")
                return False
        return valid

    def condition(self) -> dict[str, Any]:
        return self.form.condition([c.condition() for c in self.children])

    def add_error(self, parts: list[str], message: str) -> None:
        """Show an error whose document path (below this condition) is `parts`."""
        if len(parts) >= 2 and parts[0] == "conditions" and whole_number(parts[1]) is not None:
            k = int(parts[1])
            if k < len(self.children):
                self.children[k].add_error(parts[2:], message)
                return
        name = parts[0] if parts else None
        if name not in self.form.fields or name in ("extra", "count", "prev_type"):
            name = None
        self.form.add_error(name, message)

    @property
    def has_errors(self) -> bool:
        return bool(self.form.errors) or any(c.has_errors for c in self.children)


def bound_node(
    data: Any,
    context: DocumentContext,
    prefix: str = "c",
    depth: int = 0,
    picker: ActorPicker | None = None,
) -> ConditionNode:
    """Return the tree of forms bound to the posted fields, from the node `prefix` down."""
    form = ConditionForm(data, prefix=prefix, context=context, picker=picker)
    children: list[ConditionNode] = []
    if form.is_logical and depth < MAX_CONDITION_DEPTH:
        raw = str(data.get(f"{prefix}-count") or "0")
        count = min(whole_number(raw) or 0, MAX_OPERANDS)
        children = [
            bound_node(data, context, f"{prefix}.{k}", depth + 1, form.picker) for k in range(count)
        ]
    return ConditionNode(form=form, children=children, prefix=prefix, depth=depth)


def unbound_node(
    tree: dict[str, Any],
    context: DocumentContext,
    prefix: str = "c",
    depth: int = 0,
    picker: ActorPicker | None = None,
) -> ConditionNode:
    """Return the tree of forms showing a tree of initials."""
    form = ConditionForm(initial=tree["initial"], prefix=prefix, context=context, picker=picker)
    children = [
        unbound_node(child, context, f"{prefix}.{k}", depth + 1, form.picker)
        for k, child in enumerate(tree["children"])
    ]
    return ConditionNode(form=form, children=children, prefix=prefix, depth=depth)
