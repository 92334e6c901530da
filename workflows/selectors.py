"""Read recipes and actors, always through what the user may see."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import rules
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Max, Q, QuerySet
from django.http import Http404

from .models import Actor, Recipe, RecipeVersion

# Recipes named in an "actor is used by" message before "and N more".
_USERS_SHOWN = 10


def recipes_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Recipe]:
    """Return the recipes a user owns or that are shared with them (staff: all)."""
    if not user.is_authenticated:
        return Recipe.objects.none()
    recipes = Recipe.objects.select_related("owner")
    if user.is_staff:
        return recipes
    return recipes.filter(
        Q(owner=user) | Q(shared_with_users=user) | Q(shared_with_groups__user=user)
    ).distinct()


def recipes_listed(user: AbstractBaseUser | AnonymousUser, *, query: str = "") -> QuerySet[Recipe]:
    """Return the user's recipes matching `query` (name, slug or description), with the number
    of their latest version as `latest_version_number` (one query, not one per recipe)."""
    recipes = recipes_visible_to(user).annotate(
        latest_version_number=Max("versions__number", filter=Q(versions__is_draft_snapshot=False))
    )
    if query:
        recipes = recipes.filter(
            Q(name__icontains=query) | Q(slug__icontains=query) | Q(description__icontains=query)
        )
    return recipes


def recipe_get(*, user: AbstractBaseUser | AnonymousUser, slug: str) -> Recipe:
    """Return one recipe the user may see; a recipe they may not see does not exist (404).

    Read by its slug, then held against the permission rule (`workflows.rules.can_edit_recipe`, the
    rule `recipes_visible_to` applies to querysets; asked of django-rules itself, since
    `User.has_perm` lets any superuser through): an owner's own recipe, the common case, costs
    one plain query instead of the sharing joins and their DISTINCT.
    """
    recipe = Recipe.objects.select_related("owner").filter(slug=slug).first()
    if recipe is None or not rules.has_perm("workflows.view_recipe", user, recipe):
        raise Http404(f"No recipe '{slug}'.")
    return recipe


def actors_list() -> QuerySet[Actor]:
    """Return every actor (actors are shared; their secrets live in env vars)."""
    return Actor.objects.select_related("group")


@dataclass(frozen=True)
class ActorUsers:
    """The recipes whose published versions, or whose drafts, name an actor (by slug)."""

    published: tuple[str, ...]
    drafts: tuple[str, ...]

    def describe(self, name: str, *, drafts: bool = True) -> str:
        """Say which recipes use actor `name`: `actor 'x' is used by published versions of: a`."""
        parts = []
        if self.published:
            parts.append(f"published versions of: {_listed(self.published)}")
        if drafts and self.drafts:
            parts.append(f"the drafts of: {_listed(self.drafts)}")
        return f"actor '{name}' is used by {' and by '.join(parts)}"


def actor_users(*, name: str) -> ActorUsers:
    """Return the recipes that use the actor called `name`.

    Published versions name actors in their document (`actors`: alias -> name), and every
    run, live or finished, pins one: they are read from there. Drafts point at the row, but a
    draft saved with errors names them in its document as written. A draft snapshot (a test
    run's) counts as its draft does: it does not hold an actor's name.
    """
    versions = RecipeVersion.objects.published()
    published = _named_in(versions.values_list("recipe__slug", "document__actors"), name)
    unfinished = Recipe.objects.filter(draft_document__isnull=False)
    drafts = _named_in(unfinished.values_list("slug", "draft_document__actors"), name)
    drafts.update(
        Recipe.objects.filter(draft_document__isnull=True, actor_aliases__actor__name=name)
        .values_list("slug", flat=True)
        .distinct()
    )
    return ActorUsers(tuple(sorted(published)), tuple(sorted(drafts)))


def _named_in(slugs_and_actors: Iterable[tuple[str, Any]], name: str) -> set[str]:
    """Return the slugs whose document's `actors` (alias -> name) names `name`."""
    return {
        slug
        for slug, actors in slugs_and_actors
        if isinstance(actors, dict) and name in actors.values()
    }


def _listed(slugs: tuple[str, ...]) -> str:
    shown = ", ".join(slugs[:_USERS_SHOWN])
    more = len(slugs) - _USERS_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown
