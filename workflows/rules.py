"""Object permissions on recipes (django-rules); `selectors` applies the same rule to querysets."""

from __future__ import annotations

import rules


@rules.predicate
def is_recipe_owner(user, recipe) -> bool:  # type: ignore[no-untyped-def]
    return recipe is not None and recipe.owner_id == user.pk


@rules.predicate
def is_shared_with(user, recipe) -> bool:  # type: ignore[no-untyped-def]
    if recipe is None:
        return False
    return (
        recipe.shared_with_users.filter(pk=user.pk).exists()
        or recipe.shared_with_groups.filter(user=user).exists()
    )


can_edit_recipe = rules.is_authenticated & (rules.is_staff | is_recipe_owner | is_shared_with)

rules.add_perm("workflows.view_recipe", can_edit_recipe)
rules.add_perm("workflows.change_recipe", can_edit_recipe)
rules.add_perm(
    "workflows.delete_recipe", rules.is_authenticated & (rules.is_staff | is_recipe_owner)
)
