"""Read what the editor pages show: a document's problems, outline, template names, coverage."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import Group
from django.db.models import QuerySet

from runner.models import Run
from runner.selectors import run_steps
from workflows import engine
from workflows.engine.errors import TemplateError
from workflows.engine.file_templates import file_reference
from workflows.engine.files import is_file_type
from workflows.engine.next_step import HUMAN_KIND
from workflows.engine.templating import (
    SOURCES_NAME,
    step_number,
    step_reference,
    step_sources_reference,
    template_names,
)
from workflows.models import Actor, Recipe
from workflows.validators import HUMAN_PREFIX, RecipeRejected, check_document

from .models import RecipeTest

_PATH = re.compile(r"^steps\[(\d+)\](?:\.branches\[(\d+)\])?")


@dataclass(frozen=True)
class Problem:
    """One error or lint warning, with the step and branch its path points at (if any)."""

    path: str
    message: str
    severity: str  # "error" or "warning"
    step: int | None = None
    branch: int | None = None

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


def problem_from_text(text: str, severity: str) -> Problem:
    """Split a `path: message` string and locate the step/branch its path names."""
    path, sep, message = text.partition(": ")
    if not sep:
        path, message = "$", text
    if message.endswith(" (error)"):
        message = message.removesuffix(" (error)")
    found = _PATH.match(path)
    step = int(found.group(1)) if found else None
    branch = int(found.group(2)) if found and found.group(2) is not None else None
    return Problem(path=path, message=message, severity=severity, step=step, branch=branch)


def document_errors(document: dict[str, Any]) -> list[str]:
    """Return every error that would refuse `document` at save (`[]` when it is valid)."""
    try:
        check_document(document)
    except RecipeRejected as exc:
        return list(exc.errors)
    return []


def document_problems(document: dict[str, Any]) -> list[Problem]:
    """Return the document's errors (which block a save) and then its lint warnings."""
    errors = document_errors(document)
    warnings: list[str] = []
    notes: list[str] = []
    try:
        graph = engine.parse_recipe(document)
    except engine.RecipeInvalid:
        graph = None
    if graph is not None:
        warnings = list(engine.lint_recipe(graph))
        notes = engine.lint_notes(graph)
    return (
        [problem_from_text(e, "error") for e in errors]
        + [problem_from_text(w, "warning") for w in warnings]
        + [problem_from_text(n, "note") for n in notes]
    )


# -- outline ---------------------------------------------------------------------------------


@dataclass
class OutlineBranch:
    index: int
    name: str
    priority: Any
    summary: str
    active: bool


@dataclass
class OutlineStep:
    index: int
    key: str
    branches: list[OutlineBranch] = field(default_factory=list)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def document_outline(document: dict[str, Any]) -> list[OutlineStep]:
    """Return the steps in sequence order with their branches in the order the document lists
    (the step panel's branch list and the test coverage read it; the page draws its own)."""
    outline = []
    for i, step in enumerate(_list(document.get("steps"))):
        if not isinstance(step, dict):
            continue
        row = OutlineStep(index=i, key=_text(step.get("key")))
        for j, branch in enumerate(_list(step.get("branches"))):
            if not isinstance(branch, dict):
                continue
            row.branches.append(
                OutlineBranch(
                    index=j,
                    name=_text(branch.get("name")),
                    priority=branch.get("priority"),
                    summary=engine.condition_summary(branch.get("when")),
                    active=branch.get("active", True) is not False,
                )
            )
        outline.append(row)
    return outline


# -- template names --------------------------------------------------------------------------


@dataclass(frozen=True)
class TemplateName:
    name: str
    description: str


def names_in_scope(document: dict[str, Any], step_index: int) -> list[TemplateName]:
    """Return the template names a step's prompt may use: inputs, earlier steps, feedback.

    `feedback` is described as the engine fills it here: a reviewer's comment when a human step
    sends the run to this step (`next_step.with_reviewer_comment`), else what a retry sends
    back. The step's own earlier answer and the reviewers' answers are offered too.
    """
    names = []
    inputs = document.get("inputs")
    if isinstance(inputs, dict):
        for name, spec in inputs.items():
            kind = spec.get("type", "string") if isinstance(spec, dict) else "string"
            names.append(TemplateName(str(name), f"input ({kind})"))
            if is_file_type(kind):
                names += _file_names(str(name))
    steps = [s if isinstance(s, dict) else {} for s in _list(document.get("steps"))]
    for n, step in enumerate(steps[:step_index], start=1):
        if isinstance(step.get("key"), str):
            label = _label(step)
            names.append(TemplateName(f"step{n}_response", f"response of step {n}, {label}"))
            names.append(
                TemplateName(f"steps.{step['key']}.response", f"latest response of {label}")
            )
            if step.get("sources"):
                names.append(
                    TemplateName(f"steps.{step['key']}.sources", f"the hits {label} found")
                )
    step = steps[step_index] if step_index < len(steps) else {}
    reviewers = reviewers_leading_to(steps, step_index)
    if isinstance(step.get("key"), str):
        names.append(
            TemplateName(
                f"steps.{step['key']}.response",
                "this step's earlier answer, when the run comes back to it (empty at first)",
            )
        )
    shown = {n.name for n in names}
    for reviewer in reviewers:
        name = f"steps.{reviewer['key']}.response"
        if name not in shown:
            names.append(TemplateName(name, f"the answer of the reviewers of {_label(reviewer)}"))
    names.append(TemplateName("feedback", _feedback_description(reviewers)))
    names.append(
        TemplateName(SOURCES_NAME, "this step's hits as numbered citations (else the latest hits)")
    )
    return names


def _label(step: dict[str, Any]) -> str:
    return _text(step.get("name")) or _text(step.get("key"))


def _feedback_description(reviewers: list[dict[str, Any]]) -> str:
    if not reviewers:
        return "what a retry sends back to this step (the validator's feedback, the failure)"
    who = ", ".join(_label(r) for r in reviewers)
    return f"the reviewer's comment when {who} sends the run here (a revise), else a retry's"


def reviewers_leading_to(steps: list[dict[str, Any]], index: int) -> list[dict[str, Any]]:
    """Return the human steps whose decision may run step `index` next: a branch of theirs
    targets it, or it follows them in sequence."""
    key = steps[index].get("key") if index < len(steps) else None
    found = []
    for n, step in enumerate(steps):
        if step.get("kind") != HUMAN_KIND or not isinstance(step.get("key"), str):
            continue
        branches = [b for b in _list(step.get("branches")) if isinstance(b, dict)]
        if n + 1 == index or any(b.get("target") == key for b in branches):
            found.append(step)
    return found


def _file_names(name: str) -> list[TemplateName]:
    """The template names of a file input's documents."""
    return [
        TemplateName(f"files.{name}.text", f"the text of {name}"),
        TemplateName(f"files.{name}.pages", f"every page of {name}, each under its number"),
        TemplateName(f"files.{name}.pages.1-2", f"pages 1 to 2 of {name} (any range)"),
        TemplateName(f"files.{name}.name", f"the file name of {name}"),
    ]


@dataclass(frozen=True)
class NameProblem:
    """Why a prompt's placeholder cannot be filled; `undeclared`: an input could fill it."""

    message: str
    undeclared: str = ""


def template_name_problems(document: dict[str, Any], prompt: str) -> list[NameProblem]:
    """Return why the prompt's placeholders cannot be filled (unknown or refused names)."""
    try:
        used = template_names(prompt)
    except TemplateError as exc:
        return [NameProblem(exc.message)]
    inputs = document.get("inputs") if isinstance(document.get("inputs"), dict) else {}
    steps = [s for s in _list(document.get("steps")) if isinstance(s, dict)]
    keys = {s["key"] for s in steps if isinstance(s.get("key"), str)}
    problems = []
    for name in used:
        if name in ("feedback", SOURCES_NAME) or name in inputs:
            continue
        reference = file_reference(name)
        if reference is not None:
            spec = inputs.get(reference.input)
            if not (isinstance(spec, dict) and is_file_type(spec.get("type"))):
                problems.append(NameProblem(f"{{{name}}}: '{reference.input}' is not a file input"))
            continue
        source_key = step_sources_reference(name)
        if source_key is not None:
            if source_key not in keys:
                problems.append(NameProblem(f"{{{name}}}: there is no step '{source_key}'"))
            continue
        number = step_number(name)
        if number is not None:
            if number > len(steps):
                problems.append(NameProblem(f"{{{name}}}: the recipe has {len(steps)} steps"))
            continue
        key = step_reference(name)
        if key is not None:
            if key not in keys:
                problems.append(NameProblem(f"{{{name}}}: there is no step '{key}'"))
            continue
        problems.append(NameProblem(f"{{{name}}}: not an input of this recipe", undeclared=name))
    return problems


def unknown_template_names(document: dict[str, Any], prompt: str) -> list[str]:
    """Return why the prompt's placeholders cannot be filled (unknown or refused names)."""
    return [p.message for p in template_name_problems(document, prompt)]


def undeclared_inputs(document: dict[str, Any], prompt: str) -> list[str]:
    """Return the names the prompt uses that declaring them as inputs would fill."""
    return [p.undeclared for p in template_name_problems(document, prompt) if p.undeclared]


# -- actors ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ActorChoice:
    reference: str  # as written in a recipe: an actor name or `@human:GROUP`
    label: str
    is_human: bool


def actor_choices() -> list[ActorChoice]:
    """Return every actor and reviewer group a recipe may name."""
    choices = [
        ActorChoice(
            reference=a.name,
            label=f"{a.name} ({a.get_provider_display() or a.get_kind_display()})"
            if a.kind == Actor.Kind.LLM
            else f"{a.name} (reviewers)",
            is_human=a.kind == Actor.Kind.HUMAN,
        )
        for a in Actor.objects.order_by("name")
    ]
    choices += [
        ActorChoice(
            reference=f"{HUMAN_PREFIX}{g.name}", label=f"{g.name} (reviewer group)", is_human=True
        )
        for g in Group.objects.order_by("name")
    ]
    return choices


def human_references(references: list[str]) -> set[str]:
    """Return which of the actor references name reviewers rather than a model."""
    humans = {r for r in references if r.startswith(HUMAN_PREFIX)}
    names = [r for r in references if not r.startswith(HUMAN_PREFIX)]
    humans |= set(
        Actor.objects.filter(name__in=names, kind=Actor.Kind.HUMAN).values_list("name", flat=True)
    )
    return humans


# -- recipe tests and coverage ---------------------------------------------------------------


def run_path(run: Run) -> tuple[list[str], list[list[str]]]:
    """Return the step keys a run executed (one per sequence number) and the branches it took."""
    path: list[str] = []
    taken: list[list[str]] = []
    last_seq = None
    for step_run in run_steps(run):
        if step_run.seq != last_seq:
            path.append(step_run.step_key)
            last_seq = step_run.seq
        for evaluation in step_run.evaluations.all():
            pair = [step_run.step_key, evaluation.branch]
            if evaluation.taken and pair not in taken:
                taken.append(pair)
    return path, taken


def recipe_tests(*, recipe: Recipe) -> QuerySet[RecipeTest]:
    """Return a recipe's saved tests, by name."""
    return RecipeTest.objects.filter(recipe=recipe).order_by("name")


@dataclass
class CoverageRow:
    step_index: int
    branch_index: int
    step: str
    branch: str
    summary: str
    tests: list[str]


@dataclass
class Coverage:
    rows: list[CoverageRow]

    @property
    def covered(self) -> int:
        return sum(1 for r in self.rows if r.tests)

    @property
    def total(self) -> int:
        return len(self.rows)

    @property
    def percent(self) -> int:
        return round(100 * self.covered / self.total) if self.total else 0

    @property
    def untaken(self) -> list[CoverageRow]:
        return [r for r in self.rows if not r.tests]

    def as_data(self) -> dict[str, Any]:
        """Return what the canvas needs to mark the branches no test takes."""
        return {
            "untaken": [[r.step, r.branch] for r in self.untaken],
            "taken": [[r.step, r.branch] for r in self.rows if r.tests],
        }


def branch_coverage(document: dict[str, Any], tests: list[RecipeTest]) -> Coverage:
    """Return, for every active branch of `document`, the tests whose last run took it."""
    taken: dict[tuple[str, str], list[str]] = {}
    for test in tests:
        for step_key, branch_name in test.last_taken or []:
            taken.setdefault((step_key, branch_name), []).append(test.name)
    rows = []
    for step in document_outline(document):
        for branch in step.branches:
            if not branch.active:
                continue
            rows.append(
                CoverageRow(
                    step_index=step.index,
                    branch_index=branch.index,
                    step=step.key,
                    branch=branch.name,
                    summary=branch.summary,
                    tests=sorted(set(taken.get((step.key, branch.name), []))),
                )
            )
    return Coverage(rows=rows)
