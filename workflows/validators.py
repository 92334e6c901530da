"""Check input before anything is written: recipe documents in full (structure, meaning, actors),
and the text and numbers that requests carry."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group
from django.utils.datastructures import MultiValueDict

from . import engine
from .models import Actor
from .recipe_format import structure_errors
from .recipe_format.loading import format_path

HUMAN_PREFIX = "@human:"

# Recipe slugs that name pages or API routes of their own.
RESERVED_SLUGS = frozenset({"new", "import", "format-schema"})


# A whole number as a request may write one (a parameter, an id in an address): ASCII digits,
# not "²" or Arabic-Indic digits, and few enough to fit the database's 64-bit integers.
WHOLE_NUMBER = "[0-9]{1,18}"


def whole_number(text: str) -> int | None:
    """Return `text` as a whole number if it is one in ASCII digits (not "²", not 5000 digits)."""
    if re.fullmatch(WHOLE_NUMBER, text):
        return int(text)
    return None


# What no text column or jsonb value can hold: PostgreSQL refuses NUL, and a lone surrogate (from
# a JSON escape such as "\ud800") is not UTF-8. SQLite stores both, so both are refused on
# every database at the door: in API bodies (apis/parsers.py), query strings and form posts
# (config/middleware.py), the editor's JSON fields and recipe documents.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(value: Any) -> Any:
    """Return `value` (JSON-like) as the database can hold it: a NUL or a lone surrogate in
    any text replaced by U+FFFD, a number that is not finite (NaN, Infinity) by None."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


def text_problem(text: str) -> str | None:
    """Return why the database cannot hold `text` (a NUL, a lone surrogate), or None."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "contains a NUL character"
    return f"contains a lone surrogate (U+{ord(found.group()):04X})"


def fields_errors(fields: MultiValueDict[str, str]) -> list[str]:
    """Return `name: problem` for each query parameter or form field (a QueryDict) holding text
    the database cannot hold."""
    errors = []
    for name, values in fields.lists():
        if problem := text_problem(name):
            errors.append(f"$: a field name {problem}")
            continue
        for value in values:
            if isinstance(value, str) and (problem := text_problem(value)):
                errors.append(f"{name}: {problem}")
                break
    return errors


# Deeper documents are refused before the structure check and the engine recurse into them.
MAX_DEPTH = 64


def json_value_errors(doc: object, *, at: str = "") -> list[str]:
    """Return why `doc` is not plain JSON that every database can store, as `path: message`.

    YAML reads dates, sets and `.inf`, JSON reads 1e400 as infinity, and text may hold what no
    database column can (`text_problem`): each would otherwise fail only when the rows are
    written. `at` names where `doc` sits (a field of a larger input) in the paths.
    """
    errors: list[str] = []
    root: tuple[int | str, ...] = (at,) if at else ()
    stack: list[tuple[tuple[int | str, ...], object]] = [(root, doc)]
    while stack and len(errors) < 20:
        loc, value = stack.pop()
        where = format_path(loc)
        if len(loc) - len(root) > MAX_DEPTH:
            errors.append(f"{where}: nested deeper than {MAX_DEPTH} levels")
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                if not isinstance(key, str):
                    errors.append(f"{where}: the key {key!r} is not text")
                elif problem := text_problem(key):
                    errors.append(f"{where}: a key {problem}")
                else:
                    stack.append(((*loc, key), item))
        elif isinstance(value, list):
            stack += [((*loc, i), item) for i, item in reversed(list(enumerate(value)))]
        elif isinstance(value, str):
            if problem := text_problem(value):
                errors.append(f"{where}: {problem}")
        elif isinstance(value, float):
            if not math.isfinite(value):
                errors.append(f"{where}: the number {value} is out of range")
        elif value is not None and not isinstance(value, bool | int):
            errors.append(f"{where}: a {type(value).__name__} is not a JSON value")
    return errors


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
    if isinstance(doc.get("slug"), str) and doc["slug"] in RESERVED_SLUGS:
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
        errors += _actor_kind_errors(graph, actors)
        offered = {a: t.declared_capabilities for a, t in actors.items() if isinstance(t, Actor)}
        errors += engine.capability_errors(graph, offered)
    if graph is not None:
        errors += engine.lint_errors(graph)
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
            # Actors are checked when written; a row from before those checks cannot run.
            if problems := by_name[reference].problems(resolve=False):
                path, message = problems[0]
                errors.append(f"actors.{alias}: actor '{reference}' cannot run: {path}: {message}")
        else:
            errors.append(f"actors.{alias}: unknown actor '{reference}'")
    return resolved, errors


def _is_human(target: Actor | Group) -> bool:
    return isinstance(target, Group) or target.kind == Actor.Kind.HUMAN


def _actor_kind_errors(graph: engine.RecipeGraph, actors: dict[str, Actor | Group]) -> list[str]:
    """Check that each step's actor is what its kind needs: a model or a reviewer group."""
    errors = []
    for i, step in enumerate(graph.steps):
        kind = engine.step_kind(step.kind)
        needs = kind.actor_kind if kind is not None else None
        for j, alias in enumerate(step.candidates):
            if alias in actors and _is_human(actors[alias]):
                errors.append(f"steps[{i}].candidates[{j}]: '{alias}' is a reviewer group")
        if step.actor == engine.LEARNED:
            continue  # the learner chooses among model actors only (`candidates`)
        target = actors.get(step.actor) if step.actor else None
        if needs == "reviewers" and (target is None or not _is_human(target)):
            errors.append(f"steps[{i}].actor: a {step.kind} step needs a reviewer group actor")
        elif needs == "model" and target is None:
            errors.append(f"steps[{i}].actor: a {step.kind} step needs an actor")
        elif needs == "model" and target is not None and _is_human(target):
            errors.append(f"steps[{i}].actor: '{step.actor}' is a reviewer group, not a model")
        escalate_to = step.escalate_to
        if escalate_to and not (escalate_to in actors and _is_human(actors[escalate_to])):
            errors.append(f"steps[{i}].escalate_to: '{escalate_to}' is not a reviewer group alias")
    return errors
