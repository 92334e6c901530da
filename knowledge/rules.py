"""Object permissions on knowledge bases (django-rules), the same as on recipes: the owner, the
users and groups it is shared with, and staff may read and change one; only the owner and
staff may delete it. `selectors` applies the same rule to querysets."""

from __future__ import annotations

import rules


@rules.predicate
def is_base_owner(user, base) -> bool:  # type: ignore[no-untyped-def]
    return base is not None and base.owner_id == user.pk


@rules.predicate
def is_shared_with(user, base) -> bool:  # type: ignore[no-untyped-def]
    if base is None:
        return False
    return (
        base.shared_with_users.filter(pk=user.pk).exists()
        or base.shared_with_groups.filter(user=user).exists()
    )


can_use_base = rules.is_authenticated & (rules.is_staff | is_base_owner | is_shared_with)

rules.add_perm("knowledge.view_knowledgebase", can_use_base)
rules.add_perm("knowledge.change_knowledgebase", can_use_base)
rules.add_perm(
    "knowledge.delete_knowledgebase", rules.is_authenticated & (rules.is_staff | is_base_owner)
)
