"""Read recipes and actors, always through what the user may see."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet
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


def recipe_get(*, user: AbstractBaseUser | AnonymousUser, slug: str) -> Recipe:
    """Return one recipe the user may see; a recipe they may not see does not exist (404)."""
    recipe = recipes_visible_to(user).filter(slug=slug).first()
    if recipe is None:
        raise Http404(f"No recipe '{slug}'.")
    return recipe


def actors_list() -> QuerySet[Actor]:
    """Return every actor (actors are shared; their secrets live in env vars)."""
    return Actor.objects.select_related("group")
