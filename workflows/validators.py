"""Check a recipe document in full before anything is written: structure, meaning, actors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group

from . import engine
from .models import Actor
from .recipe_format import json_value_errors, structure_errors

HUMAN_PREFIX = "@human:"

# Recipe slugs that name pages or API routes of their own.
RESERVED_SLUGS = frozenset({"new", "import", "format-schema"})


def whole_number(text: str) -> int | None:
    """Return `text` as a whole number if it is one in ASCII digits (not "²", not 5000 digits)."""
    if text.isascii() and text.isdigit() and len(text) <= 18:
        return int(text)
    return None


@dataclass
class CheckedDocument:
    """A document that passed every check, with its actor aliases resolved to rows."""

    document: dict[str, Any]
    graph: engine.RecipeGraph
    actors: dict[str, Actor | Group]


class RecipeRejected(Exception):
    """A recipe document with errors; `errors` lists every one as `path: message`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def check_document(doc: dict[str, Any]) -> CheckedDocument:
    """Return the checked document, or raise RecipeRejected listing every error found."""
    junk = json_value_errors(doc)
    if junk:
        # Not plain JSON (or absurdly deep): the other checks would trip over it.
        raise RecipeRejected(junk)
    errors = structure_errors(doc)
    if doc.get("slug") in RESERVED_SLUGS:
        errors.append(f"slug: '{doc['slug']}' is reserved; choose another")
    graph = None
    try:
        graph = engine.parse_recipe(doc)
    except engine.RecipeInvalid as exc:
        # The structure check and the engine may both see one mistake: report it once.
        seen = {e.split(": ", 1)[0] for e in errors}
        errors += [e for e in exc.errors if e.split(": ", 1)[0] not in seen]
    actors, actor_errors = _resolve_actors(doc)
    errors += actor_errors
    if graph is not None and not actor_errors:
        errors += _actor_kind_errors(graph, actors, doc["steps"])
    if errors or graph is None:
        raise RecipeRejected(errors or ["$: the recipe is not valid"])
    return CheckedDocument(document=doc, graph=graph, actors=actors)


def _resolve_actors(doc: dict[str, Any]) -> tuple[dict[str, Actor | Group], list[str]]:
    references = doc.get("actors")
    if not isinstance(references, dict):
        return {}, []  # reported by the structure check
    names = {r for r in references.values() if isinstance(r, str)}
    by_name = {a.name: a for a in Actor.objects.filter(name__in=names)}
    group_names = {n.removeprefix(HUMAN_PREFIX) for n in names if n.startswith(HUMAN_PREFIX)}
    groups = {g.name: g for g in Group.objects.filter(name__in=group_names)}
    resolved: dict[str, Actor | Group] = {}
    errors = []
    for alias, reference in references.items():
        if not isinstance(reference, str):
            continue
        if reference.startswith(HUMAN_PREFIX):
            group_name = reference.removeprefix(HUMAN_PREFIX)
            if group_name in groups:
                resolved[alias] = groups[group_name]
            else:
                errors.append(f"actors.{alias}: unknown reviewer group '{group_name}'")
        elif reference in by_name:
            resolved[alias] = by_name[reference]
        else:
            errors.append(f"actors.{alias}: unknown actor '{reference}'")
    return resolved, errors


def _is_human(target: Actor | Group) -> bool:
    return isinstance(target, Group) or target.kind == Actor.Kind.HUMAN


def _actor_kind_errors(
    graph: engine.RecipeGraph,
    actors: dict[str, Actor | Group],
    document_steps: list[dict[str, Any]],
) -> list[str]:
    errors = []
    for i, step in enumerate(graph.steps):
        target = actors.get(step.actor) if step.actor else None
        if step.kind == "human":
            if target is None or not _is_human(target):
                errors.append(f"steps[{i}].actor: a human step needs a reviewer group actor")
            escalate_to = document_steps[i].get("escalate_to")
            if escalate_to and not (escalate_to in actors and _is_human(actors[escalate_to])):
                errors.append(
                    f"steps[{i}].escalate_to: '{escalate_to}' is not a reviewer group alias"
                )
        elif step.kind in ("llm", "classify"):
            if target is None:
                errors.append(f"steps[{i}].actor: a {step.kind} step needs an actor")
            elif _is_human(target):
                errors.append(f"steps[{i}].actor: '{step.actor}' is a reviewer group, not a model")
    return errors
