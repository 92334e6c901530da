"""Read recipes and actors, always through what the user may see."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Max, Q, QuerySet
from django.http import Http404

from .models import Actor, Recipe


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
    recipes = recipes_visible_to(user).annotate(latest_version_number=Max("versions__number"))
    if query:
        recipes = recipes.filter(
            Q(name__icontains=query) | Q(slug__icontains=query) | Q(description__icontains=query)
        )
    return recipes


def recipe_get(*, user: AbstractBaseUser | AnonymousUser, slug: str) -> Recipe:
    """Return one recipe the user may see; a recipe they may not see does not exist (404)."""
    recipe = recipes_visible_to(user).filter(slug=slug).first()
    if recipe is None:
        raise Http404(f"No recipe '{slug}'.")
    return recipe


def actors_list() -> QuerySet[Actor]:
    """Return every actor (actors are shared; their secrets live in env vars)."""
    return Actor.objects.select_related("group")
