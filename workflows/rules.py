"""Object permissions on recipes (django-rules); `selectors` applies the same rule to querysets.

`is_owner` and `is_shared_with` read `owner_id`, `shared_with_users` and `shared_with_groups`,
so every object owned and shared like a recipe (a knowledge base) uses them too."""

from __future__ import annotations

import rules


@rules.predicate
def is_owner(user, obj) -> bool:  # type: ignore[no-untyped-def]
    return obj is not None and obj.owner_id == user.pk


@rules.predicate
def is_shared_with(user, obj) -> bool:  # type: ignore[no-untyped-def]
    if obj is None:
        return False
    return (
        obj.shared_with_users.filter(pk=user.pk).exists()
        or obj.shared_with_groups.filter(user=user).exists()
    )


can_edit_recipe = rules.is_authenticated & (rules.is_staff | is_owner | is_shared_with)

rules.add_perm("workflows.view_recipe", can_edit_recipe)
rules.add_perm("workflows.change_recipe", can_edit_recipe)
rules.add_perm("workflows.delete_recipe", rules.is_authenticated & (rules.is_staff | is_owner))
