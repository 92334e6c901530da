"""Say what changed between two recipe documents: steps and branches added, removed, changed.

Steps are matched by key, branches by (step key, branch name). Moving a step on the canvas is
reported apart from what it does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workflows.engine import condition_summary

RECIPE_FIELDS = (
    "name",
    "description",
    "inputs",
    "actors",
    "budget",
    "learning",
    "webhooks",
    "callbacks",
    "validation",
)


@dataclass
class Change:
    """One added, removed or changed step or branch; `fields` names what changed."""

    step: str
    name: str
    branch: str = ""
    fields: list[str] = field(default_factory=list)
    summary: str = ""


@dataclass
class DocumentDiff:
    recipe_fields: list[str] = field(default_factory=list)
    steps_added: list[Change] = field(default_factory=list)
    steps_removed: list[Change] = field(default_factory=list)
    steps_changed: list[Change] = field(default_factory=list)
    steps_moved: list[str] = field(default_factory=list)
    branches_added: list[Change] = field(default_factory=list)
    branches_removed: list[Change] = field(default_factory=list)
    branches_changed: list[Change] = field(default_factory=list)
    order_changed: bool = False

    @property
    def is_empty(self) -> bool:
        return not (
            self.recipe_fields
            or self.steps_added
            or self.steps_removed
            or self.steps_changed
            or self.branches_added
            or self.branches_removed
            or self.branches_changed
            or self.order_changed
        )


def _steps(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    steps = doc.get("steps") if isinstance(doc.get("steps"), list) else []
    return {s["key"]: s for s in steps if isinstance(s, dict) and isinstance(s.get("key"), str)}


def _branches(step: dict[str, Any]) -> dict[str, dict[str, Any]]:
    branches = step.get("branches") if isinstance(step.get("branches"), list) else []
    return {
        b["name"]: b for b in branches if isinstance(b, dict) and isinstance(b.get("name"), str)
    }


def _changed_fields(old: dict[str, Any], new: dict[str, Any], ignore: set[str]) -> list[str]:
    names = (set(old) | set(new)) - ignore
    return sorted(n for n in names if old.get(n) != new.get(n))


def documents_diff(old: dict[str, Any], new: dict[str, Any]) -> DocumentDiff:
    """Return what changed from document `old` to document `new`."""
    diff = DocumentDiff()
    diff.recipe_fields = [f for f in RECIPE_FIELDS if old.get(f) != new.get(f)]
    old_steps, new_steps = _steps(old), _steps(new)
    for key, step in new_steps.items():
        if key not in old_steps:
            diff.steps_added.append(Change(step=key, name=step.get("name", key)))
            for name, branch in _branches(step).items():
                diff.branches_added.append(
                    Change(
                        step=key,
                        name=step.get("name", key),
                        branch=name,
                        summary=condition_summary(branch.get("when")),
                    )
                )
    for key, step in old_steps.items():
        if key not in new_steps:
            diff.steps_removed.append(Change(step=key, name=step.get("name", key)))
            for name, branch in _branches(step).items():
                diff.branches_removed.append(
                    Change(
                        step=key,
                        name=step.get("name", key),
                        branch=name,
                        summary=condition_summary(branch.get("when")),
                    )
                )
    for key in new_steps.keys() & old_steps.keys():
        before, after = old_steps[key], new_steps[key]
        label = after.get("name", key)
        changed = _changed_fields(before, after, {"branches", "position"})
        if changed:
            diff.steps_changed.append(Change(step=key, name=label, fields=changed))
        if before.get("position") != after.get("position"):
            diff.steps_moved.append(key)
        old_branches, new_branches = _branches(before), _branches(after)
        for name, branch in new_branches.items():
            summary = condition_summary(branch.get("when"))
            if name not in old_branches:
                diff.branches_added.append(
                    Change(step=key, name=label, branch=name, summary=summary)
                )
            else:
                fields = _changed_fields(old_branches[name], branch, set())
                if fields:
                    diff.branches_changed.append(
                        Change(step=key, name=label, branch=name, fields=fields, summary=summary)
                    )
        for name, branch in old_branches.items():
            if name not in new_branches:
                diff.branches_removed.append(
                    Change(
                        step=key,
                        name=label,
                        branch=name,
                        summary=condition_summary(branch.get("when")),
                    )
                )
    shared_old = [k for k in old_steps if k in new_steps]
    shared_new = [k for k in new_steps if k in old_steps]
    diff.order_changed = shared_old != shared_new
    for bucket in (diff.steps_added, diff.steps_removed, diff.steps_changed):
        bucket.sort(key=lambda c: c.step)
    for bucket in (diff.branches_added, diff.branches_removed, diff.branches_changed):
        bucket.sort(key=lambda c: (c.step, c.branch))
    diff.steps_moved.sort()
    return diff
