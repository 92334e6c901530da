"""Warn about recipes that are valid but probably not what their author meant.

Warnings never block a save; each reads `path: message`, like the parser's errors. The few
`lint_errors` do: they refuse what parses but cannot run as meant (a run that would succeed
with an empty answer). The
rules about one condition type are the type's own (`ConditionType.lint`, in its module).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from workflows.engine.conditions import asks_about_failure, error_severity
from workflows.engine.conditions.base import ConditionUse
from workflows.engine.conditions.registry import TYPES
from workflows.engine.conditions.values import as_number, format_number
from workflows.engine.decision_tree import leaves
from workflows.engine.errors import TemplateError
from workflows.engine.graph import BranchSpec, Condition, RecipeGraph, StepSpec
from workflows.engine.priority_bands import band_notes
from workflows.engine.self_check import Scoring
from workflows.engine.shadowing import shadowed_branches
from workflows.engine.step_kinds.decision_tree import load_errors as tree_load_errors
from workflows.engine.templating import SOURCES_NAME, step_sources_reference, template_names
from workflows.engine.vocabulary import COMPLETE, DEFAULT_MAX_RETRIES, END, REPEAT


def lint_errors(graph: RecipeGraph) -> list[str]:
    """Return what a recipe may not be saved with, though it parses, as `path: message`.

    Published versions are parsed again at run time without these checks: a rule added
    here refuses new imports and saves, never a version that already runs.
    """
    errors: list[str] = []
    for i, step in enumerate(graph.steps):
        errors += _fallback_missing(step, f"steps[{i}]")
        errors += tree_load_errors(step, f"steps[{i}]")
    errors += error_severity.target_errors(graph)
    return errors


def _fallback_missing(step: StepSpec, path: str) -> list[str]:
    """A validation loop that can end below its threshold needs a fallback: without one the
    run would go on with an empty answer as if it had been validated."""
    settings = step.validation
    if settings is None or not settings.get("threshold"):
        return []  # a threshold of 0 is always reached
    if str(settings.get("fallback") or "").strip():
        return []
    return [
        f"{path}.validation.fallback: required: the loop can end below its threshold "
        f"{format_number(settings['threshold'])}, and the answer would then be empty"
    ]


def lint_recipe(graph: RecipeGraph) -> list[str]:
    """Return every warning about `graph` as `path: message`."""
    warnings = _unreachable(graph) + error_severity.target_warnings(graph)
    for i, step in enumerate(graph.steps):
        path = f"steps[{i}]"
        warnings += _stuck(step, path)
        warnings += _shadowed_by_default(step, path)
        warnings += shadowed_branches(step, partial(_branch_path, path, step))
        warnings += _branch_warnings(graph, step, path)
        warnings += _condition_warnings(step, path)
        warnings += _unmapped_leaves(graph, step, path)
        warnings += _hits_never_shown(graph, step, path)
        warnings += _beyond_budget(graph, step, path)
        warnings += _threshold_out_of_reach(step, path)
        warnings += _equal_priorities(step, path)
        warnings += _failure_caught_first(step, path)
        warnings += _loop_without_stop(graph, step, path)
    return warnings


def _threshold_out_of_reach(step: StepSpec, path: str) -> list[str]:
    """Warn about a validation threshold above what a perfect answer scores: the fallback
    always replaces the answer (0.9 was reachable under the old 0-1 rule scale)."""
    if step.validation is None:
        return []
    scoring = Scoring.of(step.validation)
    if scoring.threshold <= scoring.best:
        return []
    return [
        f"{path}.validation.threshold: {format_number(scoring.threshold)} is never reached: "
        f"a perfect answer scores {scoring.arithmetic(scoring.rule_base, 100)}, so every "
        "answer is replaced by the fallback"
    ]


def lint_notes(graph: RecipeGraph) -> list[str]:
    """Return notes about `graph`, as `path: message`: less than warnings (priority bands)."""
    return band_notes(graph)


def _equal_priorities(step: StepSpec, path: str) -> list[str]:
    """Note branches that share a priority: they are evaluated in document order."""
    first: dict[int, BranchSpec] = {}
    notes: list[str] = []
    for branch in step.branches:
        earlier = first.setdefault(branch.priority, branch)
        if earlier is not branch:
            notes.append(
                f"{_branch_path(path, step, branch)}.priority: priority {branch.priority} "
                f"also has '{earlier.name}'; equal priorities are evaluated in document "
                "order, so this branch comes after it"
            )
    return notes


def _holds_on_failure(condition: Condition) -> bool:
    """Tell whether `condition` surely holds on a failed step without asking about failure."""
    if condition.type == "default":
        return True
    if condition.type == "and":
        return all(_holds_on_failure(c) for c in condition.conditions)
    if condition.type == "or":
        return any(_holds_on_failure(c) for c in condition.conditions)
    return False


def _failure_caught_first(step: StepSpec, path: str) -> list[str]:
    """Warn when a failure of the step can reach no branch that handles it: an earlier branch
    that does not handle failures always holds, so the run fails there. (A default that does
    not repeat is already reported as hiding every branch after it.)"""
    active = step.active_branches
    for k, handler in enumerate(active):
        if not asks_about_failure(handler.when):
            continue
        for blocker in active[:k]:
            if asks_about_failure(blocker.when) or not _holds_on_failure(blocker.when):
                continue
            if _is_default(blocker) and blocker.target != REPEAT:
                return []
            return [
                f"{_branch_path(path, step, handler)}: a failure of the step never reaches "
                f"this branch: '{blocker.name}' (priority {blocker.priority}) holds first and "
                "does not handle a failure, so the run fails there"
            ]
    return []


def _branch_path(step_path: str, step: StepSpec, branch: BranchSpec) -> str:
    index = branch.source_index if branch.source_index is not None else step.branches.index(branch)
    return f"{step_path}.branches[{index}]"


def _is_default(branch: BranchSpec) -> bool:
    return branch.when.type == "default"


def _leaf_targets(graph: RecipeGraph, step: StepSpec) -> tuple[list[str], bool]:
    """Return the steps a tree's leaves lead to, and whether some leaf leads to none."""
    if step.kind != "decision_tree" or step.tree is None:
        return [], True
    targets, unmapped = [], False
    for leaf in leaves(step.tree):
        target = step.leaf_targets.get(leaf, leaf)
        if graph.has_step(target):
            targets.append(target)
        elif target not in (END, COMPLETE):
            unmapped = True
    return targets, unmapped


def _falls_through(step: StepSpec) -> bool:
    """Tell whether a step's branches can all fail to be taken (then the next step runs)."""
    # A default that repeats runs out of retries; any other default is always taken.
    return not any(_is_default(b) and b.target != REPEAT for b in step.active_branches)


def _successors(graph: RecipeGraph, step: StepSpec) -> Iterator[str]:
    tree_targets, unmapped = _leaf_targets(graph, step)
    yield from tree_targets
    if not unmapped:
        return  # every leaf goes somewhere: the step's branches are never used
    for branch in step.active_branches:
        if graph.has_step(branch.target):
            yield branch.target
    following = graph.next_in_sequence(step.key)
    if following is not None and _falls_through(step):
        yield following.key


def _unreachable(graph: RecipeGraph) -> list[str]:
    if not graph.steps:
        return []
    first = graph.first_step().key
    seen = {first}
    stack = [first]
    while stack:
        for key in _successors(graph, graph.step(stack.pop())):
            if key not in seen:
                seen.add(key)
                stack.append(key)
    return [
        f"steps[{i}]: step '{step.key}' is never reached from the first step '{first}'"
        for i, step in enumerate(graph.steps)
        if step.key not in seen
    ]


def _stuck(step: StepSpec, path: str) -> list[str]:
    active = step.active_branches
    if not active or not any(_is_default(b) for b in active):
        return []
    if any(b.target not in (REPEAT, step.key) for b in active):
        return []
    if any(b.target == step.key for b in active):
        return [
            f"{path}: the run never moves on from this step: every branch leads back to it and "
            "a default always matches, so only the step limit ends the loop"
        ]
    return [
        f"{path}: every branch repeats this step; the run moves on only when their retries "
        "are used up"
    ]


def _shadowed_by_default(step: StepSpec, path: str) -> list[str]:
    warnings: list[str] = []
    blocker: BranchSpec | None = None
    for branch in step.active_branches:
        if blocker is not None:
            warnings.append(
                f"{_branch_path(path, step, branch)}: never evaluated: the default branch "
                f"'{blocker.name}' (priority {blocker.priority}) always matches before it"
            )
        elif _is_default(branch) and branch.target != REPEAT:
            blocker = branch
    return warnings


def _conditions(condition: Condition, path: str) -> Iterator[tuple[Condition, str]]:
    yield condition, path
    for k, sub in enumerate(condition.conditions):
        yield from _conditions(sub, f"{path}.conditions[{k}]")


def _branch_warnings(graph: RecipeGraph, step: StepSpec, path: str) -> list[str]:
    warnings: list[str] = []
    for branch in step.branches:
        bpath = _branch_path(path, step, branch)
        if branch.target == REPEAT and branch.max_retries is None:
            warnings.append(
                f"{bpath}.params.max_retries: not set; the default bound of "
                f"{DEFAULT_MAX_RETRIES} retries applies"
            )
        warnings += _params_unread(branch, bpath)
        if branch.target == step.key:
            warnings.append(
                f"{bpath}.target: leads back to its own step without a bound; use @repeat so "
                "max_retries limits the loop"
            )
        if branch.action == "HUMAN_REVIEW" and not (
            graph.has_step(branch.target) and graph.step(branch.target).kind == "human"
        ):
            warnings.append(
                f"{bpath}.target: HUMAN_REVIEW goes to '{branch.target}', which is not a human step"
            )
    return warnings


def _params_unread(branch: BranchSpec, path: str) -> list[str]:
    """Warn about params that only a condition of another type reads (a judge's
    `evaluator_actor` on a branch whose condition is no `ai_evaluation`): they do nothing."""
    own = next((t for t in TYPES if t.name == branch.when.type), None)
    read_here = own.params if own else {}
    return [
        f"{path}.params.{key}: ignored: only a branch whose condition is {kind.name} reads it"
        for kind in TYPES
        for key in kind.params
        if key in branch.params and key not in read_here
    ]


def _condition_warnings(step: StepSpec, path: str) -> list[str]:
    """Ask each condition type with a lint rule about its uses in the step's branches."""
    uses: dict[str, list[ConditionUse]] = {}
    for branch in step.branches:
        bpath = f"{_branch_path(path, step, branch)}.when"
        for condition, condition_path in _conditions(branch.when, bpath):
            uses.setdefault(condition.type, []).append(
                ConditionUse(condition, condition_path, branch)
            )
    warnings: list[str] = []
    for kind in TYPES:
        if kind.lint is not None:
            warnings += kind.lint(step, uses.get(kind.name, []), path)
    return warnings


def _unmapped_leaves(graph: RecipeGraph, step: StepSpec, path: str) -> list[str]:
    if step.kind != "decision_tree" or step.tree is None:
        return []
    return [
        f"{path}.leaf_targets: the leaf '{leaf}' names no step; the step's branches or the "
        "next step in sequence decide where it goes"
        for leaf in dict.fromkeys(leaves(step.tree))
        if not graph.has_step(step.leaf_targets.get(leaf, leaf))
        and step.leaf_targets.get(leaf, leaf) not in (END, COMPLETE)
    ]


def _hits_never_shown(graph: RecipeGraph, step: StepSpec, path: str) -> list[str]:
    """Warn about templates that show hits no step can have found: they are always empty."""
    searching = any(s.sources for s in graph.steps)
    warnings: list[str] = []
    for field, template in (("prompt", step.prompt), ("material", step.material)):
        try:
            names = template_names(template)
        except TemplateError:
            continue  # refused at parse
        for name in names:
            key = step_sources_reference(name)
            if name == SOURCES_NAME and not searching and name not in graph.inputs:
                warnings.append(
                    f"{path}.{field}: {{sources}} is always empty: no step of the recipe "
                    "searches sources"
                )
            elif key is not None and graph.has_step(key) and not graph.step(key).sources:
                warnings.append(
                    f"{path}.{field}: {{{name}}} is always empty: step '{key}' searches no sources"
                )
    return warnings


def _beyond_budget(graph: RecipeGraph, step: StepSpec, path: str) -> list[str]:
    """Warn about `budget` conditions comparing with as much as the recipe's budget allows:
    the run is stopped before it spends that, so only a stopped step makes them hold."""
    budget = graph.budget
    if budget is None:
        return []
    limits = {"tokens": budget.max_tokens, "cost": budget.max_cost, "calls": budget.max_calls}
    warnings: list[str] = []
    for branch in step.branches:
        bpath = f"{_branch_path(path, step, branch)}.when"
        for condition, condition_path in _conditions(branch.when, bpath):
            if condition.type != "budget":
                continue
            measure = condition.fields.get("measure") or "tokens"
            limit, value = limits.get(measure), as_number(condition.value)
            if limit is None or value is None or value < limit:
                continue
            warnings.append(
                f"{condition_path}.value: the run never reaches {measure} "
                f"{format_number(value)}: budget.max_{measure} {limit} stops it first, so "
                "the condition holds only when the budget stops the step"
            )
    return warnings


# Conditions on what a model says (a progress figure, a score): nothing makes it ever hold.
_MODEL_SAYS = frozenset({"field_compare", "check_count", "ai_evaluation", "confidence"})


def _loop_without_stop(graph: RecipeGraph, step: StepSpec, path: str) -> list[str]:
    """Warn about a step that loops back to itself or an earlier step, unbounded, and leaves
    the loop only when a model's figure says so (adaptive mode's "progress: 100")."""
    order = [s.key for s in graph.steps]
    here = order.index(step.key)
    active = step.active_branches
    back = [b for b in active if b.target in order and order.index(b.target) <= here]
    exits = [b for b in active if b not in back]
    if not back or not exits or any(_is_default(b) for b in exits):
        return []
    leaves = [c for b in exits for c, _ in _conditions(b.when, "") if not c.conditions]
    if not leaves or any(c.type not in _MODEL_SAYS for c in leaves):
        return []
    names = ", ".join(f"'{b.name}'" for b in exits)
    return [
        f"{_branch_path(path, step, back[0])}: loops back to '{back[0].target}' with no bound, "
        f"and the loop ends only when {names} holds, on a figure a model gives: nothing "
        "guarantees it ever does, so the step limit may fail the run. Add an exit on "
        "criteria_met (the run's progress record) or attempts"
    ]
