"""Write recipes: import, create, replace, publish, share and delete."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import IntegrityError, transaction

from . import engine, selectors
from .adapters import document_from_recipe, write_recipe_rows
from .models import SNAPSHOT_NUMBER, Actor, Recipe, RecipeActor, RecipeVersion
from .recipe_format import DocumentError, document_size_errors, load_document
from .validators import CheckedDocument, RecipeRejected, check_document, json_value_errors


class RecipeConflict(Exception):
    """The draft changed since the caller read it, or the slug is taken."""


@dataclass
class ImportResult:
    recipe: Recipe
    created: bool
    warnings: list[str] = field(default_factory=list)


def recipe_lint(*, recipe: Recipe) -> list[str]:
    """Return the draft's lint warnings as `path: message` (they never block a save)."""
    doc = document_from_recipe(recipe)
    try:
        graph = engine.parse_recipe(doc)
    except engine.RecipeInvalid as exc:
        return [f"{e} (error)" for e in exc.errors]
    return [f"{e} (error)" for e in engine.lint_errors(graph)] + engine.lint_recipe(graph)


def recipe_import(
    *, user: AbstractBaseUser, data: str | bytes | dict[str, Any], replace: bool = False
) -> ImportResult:
    """Validate a recipe file whole, then create the recipe (or replace its draft).

    Nothing is written unless every check passes; the errors are listed in RecipeRejected.
    """
    max_bytes = settings.RECIPE_MAX_BYTES
    if isinstance(data, dict):
        # A parsed API body is held to the limit a file is held to.
        if errors := document_size_errors(data, max_bytes=max_bytes):
            raise RecipeRejected(errors)
        doc = data
    else:
        try:
            doc = load_document(data, max_bytes=max_bytes)
        except DocumentError as exc:
            raise RecipeRejected(exc.errors) from None
    checked = check_document(doc)
    with transaction.atomic():
        recipe = Recipe.objects.select_for_update().filter(slug=doc["slug"]).first()
        created = recipe is None
        if recipe is None:
            recipe = Recipe(slug=doc["slug"], owner=user)
        elif not replace:
            raise RecipeConflict(
                f"slug: a recipe '{doc['slug']}' exists already; import with replace to update its draft"
            )
        elif not user.has_perm("workflows.change_recipe", recipe):
            raise RecipeConflict(f"slug: the recipe '{doc['slug']}' belongs to someone else")
        else:
            recipe.revision += 1
        try:
            write_recipe_rows(recipe, checked.document, checked.actors)
        except IntegrityError:
            raise RecipeConflict(f"slug: a recipe '{doc['slug']}' exists already") from None
    return ImportResult(recipe=recipe, created=created, warnings=engine.lint_recipe(checked.graph))


def recipe_update(
    *, recipe: Recipe, document: dict[str, Any], expected_revision: int | None = None
) -> list[str]:
    """Replace a draft with a document; refuse if someone saved since `expected_revision`.

    Returns the lint warnings of the new draft.
    """
    checked = _check_draft(recipe, document)
    _write_draft(recipe, checked, expected_revision)
    return engine.lint_recipe(checked.graph)


@dataclass
class DraftSaved:
    """What saving a draft found: its errors (kept as written until fixed) and lint warnings."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def recipe_draft_save(
    *, recipe: Recipe, document: dict[str, Any], expected_revision: int | None = None
) -> DraftSaved:
    """Save the draft as its author holds it; refuse if someone saved since `expected_revision`.

    A valid draft replaces the rows, as recipe_update does. A draft with errors is saved as
    written (Recipe.draft_document) and its errors returned: unfinished work is never lost, and
    only publishing (or a test run) needs it clean. Refused (RecipeRejected) is only what cannot
    be stored or drawn: a new slug, a document over the size limit, values no database column
    holds, steps or branches that are not lists of objects.
    """
    if refusals := _unsaveable(recipe, document):
        raise RecipeRejected(refusals)
    try:
        checked = _check_draft(recipe, document)
    except RecipeRejected as exc:
        _keep_unfinished(recipe, document, expected_revision)
        return DraftSaved(errors=exc.errors)
    _write_draft(recipe, checked, expected_revision)
    return DraftSaved(warnings=engine.lint_recipe(checked.graph))


def _write_draft(recipe: Recipe, checked: CheckedDocument, expected_revision: int | None) -> None:
    """Make the checked document the draft's rows, on the locked row, at the next revision."""
    with transaction.atomic():
        current = Recipe.objects.select_for_update().get(pk=recipe.pk)
        _check_revision(current, expected_revision, doing="saving")
        current.revision += 1
        write_recipe_rows(current, checked.document, checked.actors)
    recipe.refresh_from_db()


def _keep_unfinished(
    recipe: Recipe, document: dict[str, Any], expected_revision: int | None
) -> None:
    """Keep a draft with errors as written, at the next revision; its rows keep the last draft
    that was valid. Its name and description, where usable, are the recipe's (lists show them).
    """
    with transaction.atomic():
        current = Recipe.objects.select_for_update().get(pk=recipe.pk)
        _check_revision(current, expected_revision, doing="saving")
        current.revision += 1
        current.draft_document = {**document, "slug": recipe.slug}
        name, description = document.get("name"), document.get("description", "")
        longest = Recipe._meta.get_field("name").max_length or 0
        if isinstance(name, str) and name.strip() and len(name) <= longest:
            current.name = name
        if isinstance(description, str):
            current.description = description
        current.save(
            update_fields=["revision", "draft_document", "name", "description", "updated_at"]
        )
    recipe.refresh_from_db()


def _unsaveable(recipe: Recipe, document: dict[str, Any]) -> list[str]:
    """Return why `document` cannot be kept even as an unfinished draft (empty: it can)."""
    if document.get("slug", recipe.slug) != recipe.slug:
        return ["slug: the slug of a recipe cannot change"]
    if errors := document_size_errors(document, max_bytes=settings.RECIPE_MAX_BYTES):
        return errors
    if errors := json_value_errors(document):
        return errors
    # The editor draws steps and their branches from these lists: anything else cannot be shown.
    steps = document.get("steps", [])
    if not isinstance(steps, list):
        return ["steps: a list of step objects"]
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            return [f"steps[{i}]: a step object"]
        branches = step.get("branches", [])
        if not isinstance(branches, list) or not all(isinstance(b, dict) for b in branches):
            return [f"steps[{i}].branches: a list of branch objects"]
    return []


def _check_draft(recipe: Recipe, document: dict[str, Any]) -> CheckedDocument:
    """Check a document as the recipe's new draft: its slug, its size, then every rule."""
    if document.get("slug", recipe.slug) != recipe.slug:
        raise RecipeRejected(["slug: the slug of a recipe cannot change"])
    document = {**document, "slug": recipe.slug}
    if errors := document_size_errors(document, max_bytes=settings.RECIPE_MAX_BYTES):
        raise RecipeRejected(errors)
    return check_document(document)


def document_hash(document: dict[str, Any]) -> str:
    """Return the SHA-256 of a document's canonical JSON (keys sorted), in hex."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def recipe_draft_snapshot(
    *, recipe: Recipe, user: AbstractBaseUser, document: dict[str, Any] | None = None
) -> RecipeVersion:
    """Return a hidden, immutable version holding `document` (default: the saved draft).

    What a test run of an unpublished draft pins: the document is checked exactly as saving it
    would be (RecipeRejected lists every error) and nothing is written unless it passes. The
    draft itself is left as it is. A snapshot of the same document is reused, not written again.
    """
    checked = _check_draft(recipe, document_from_recipe(recipe) if document is None else document)
    digest = document_hash(checked.document)
    snapshots = RecipeVersion.objects.draft_snapshots().filter(recipe=recipe, document_hash=digest)
    existing = snapshots.first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            return RecipeVersion.objects.create(
                recipe=recipe,
                number=SNAPSHOT_NUMBER,
                is_draft_snapshot=True,
                document=checked.document,
                document_hash=digest,
                created_by=user,
            )
    except IntegrityError:
        # The same document was snapshotted by another request meanwhile: use that one.
        return snapshots.get()


def recipe_publish(
    *,
    recipe: Recipe,
    user: AbstractBaseUser,
    note: str = "",
    expected_revision: int | None = None,
) -> RecipeVersion:
    """Freeze the draft into a new immutable version (it must be free of errors).

    With `expected_revision`, refuse if the draft was saved since that revision: the caller
    would publish something other than what it showed.
    """
    with transaction.atomic():
        locked = Recipe.objects.select_for_update().get(pk=recipe.pk)
        _check_revision(locked, expected_revision, doing="publishing")
        document = document_from_recipe(locked)
        checked = check_document(document)
        if locked.draft_document is not None:
            # A draft saved with errors that has become valid since (an actor it names was
            # created): it becomes the draft's rows, and is published as they give it.
            write_recipe_rows(locked, checked.document, checked.actors)
            document = document_from_recipe(locked)
        published = locked.versions.published()
        last = published.order_by("-number").values_list("number", flat=True).first()
        return RecipeVersion.objects.create(
            recipe=locked, number=(last or 0) + 1, document=document, note=note, created_by=user
        )


def _check_revision(current: Recipe, expected_revision: int | None, *, doing: str) -> None:
    if expected_revision is not None and current.revision != expected_revision:
        raise RecipeConflict(
            f"revision: the draft was saved elsewhere (revision {current.revision}, "
            f"you edited {expected_revision}); reload it before {doing}"
        )


def recipe_share(*, recipe: Recipe, users: list[AbstractBaseUser], groups: list[Group]) -> None:
    """Set who the recipe is shared with (users and groups may view and edit it)."""
    recipe.shared_with_users.set(users)
    recipe.shared_with_groups.set(groups)


def recipe_delete(*, recipe: Recipe) -> None:
    """Delete a recipe with its versions."""
    recipe.delete()


class ActorInUse(Exception):
    """An actor that recipes name cannot be deleted, renamed or change kind; says which."""


class ActorInvalid(Exception):
    """The actor, as changed, could not run; `errors` are `path: message`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def actor_change_refusal(*, actor: Actor, changes: dict[str, Any]) -> tuple[str, str] | None:
    """Return the field and the reason `changes` may not be made to `actor`, or None.

    Published versions name their actors (and every run pins a version): while one names
    this actor, its name and kind stay, or those versions could no longer run.
    """
    moved = [f for f in ("name", "kind") if f in changes and changes[f] != getattr(actor, f)]
    if not moved:
        return None
    users = selectors.actor_users(name=actor.name)
    if not users.published:
        return None
    change = "renaming it" if moved[0] == "name" else "changing its kind"
    return moved[0], f"{users.describe(actor.name, drafts=False)}; {change} would break them"


def actor_delete_refusal(*, actor: Actor) -> str | None:
    """Return why `actor` may not be deleted (recipes name it), or None."""
    users = selectors.actor_users(name=actor.name)
    if users.published or users.drafts:
        return users.describe(actor.name)
    return None


def actor_update(*, actor: Actor, changes: dict[str, Any]) -> Actor:
    """Apply validated `changes` to `actor` and save it; return the saved row.

    Raise ActorInUse when `actor_change_refusal` refuses them, ActorInvalid when the actor as
    changed could not run.
    """
    with transaction.atomic():
        locked = _lock_actor(actor)
        refusal = actor_change_refusal(actor=locked, changes=changes)
        if refusal is not None:
            raise ActorInUse(f"{refusal[0]}: {refusal[1]}")
        renamed_from = locked.name
        for field, value in changes.items():
            setattr(locked, field, value)
        if locked.name != renamed_from:
            _rename_in_unfinished_drafts(renamed_from, locked.name)
        # Checked again on the locked row: two changes made at once, each valid on the row it
        # read, may together make an actor that cannot run.
        if problems := locked.problems(resolve=False):
            raise ActorInvalid([f"{path}: {message}" for path, message in problems])
        locked.save()
    return locked


def _rename_in_unfinished_drafts(old: str, new: str) -> None:
    """Make the drafts saved with errors that name actor `old` name `new`, as rows follow a
    rename through their foreign key."""
    unfinished = Recipe.objects.select_for_update().filter(draft_document__isnull=False)
    for recipe in unfinished.order_by("pk"):
        actors = recipe.draft_document.get("actors")
        if isinstance(actors, dict) and old in actors.values():
            renamed = {alias: new if ref == old else ref for alias, ref in actors.items()}
            recipe.draft_document = {**recipe.draft_document, "actors": renamed}
            recipe.save(update_fields=["draft_document"])


def actor_delete(*, actor: Actor) -> None:
    """Delete `actor`, unless a published version or a draft names it (ActorInUse)."""
    with transaction.atomic():
        locked = _lock_actor(actor)
        refusal = actor_delete_refusal(actor=locked)
        if refusal is not None:
            raise ActorInUse(f"$: {refusal}")
        locked.delete()


def _lock_actor(actor: Actor) -> Actor:
    """Lock the actor's row, and the recipes whose drafts point at it.

    A publish locks its recipe, then writes the names of the actors its draft points at: with
    those recipes locked here, a publish either committed before (and is seen by the check)
    or reads the actor after this transaction. A draft that starts pointing at the actor
    meanwhile waits on the actor's row (its foreign key).
    """
    # Recipes first, in the order a draft's save takes its locks (its recipe, then its actors'
    # rows through their foreign keys): the opposite order deadlocks against a draft being saved.
    drafts = RecipeActor.objects.filter(actor_id=actor.pk).values("recipe_id")
    recipes = Recipe.objects.select_for_update().filter(pk__in=drafts).order_by("pk")
    list(recipes.values_list("pk", flat=True))
    return Actor.objects.select_for_update().get(pk=actor.pk)
