"""Object permissions on knowledge bases (django-rules), the same as on recipes: the owner, the
users and groups it is shared with, and staff may read and change one; only the owner and
staff may delete it. `selectors` applies the same rule to querysets."""

from __future__ import annotations

import rules

from workflows.rules import is_owner, is_shared_with

can_use_base = rules.is_authenticated & (rules.is_staff | is_owner | is_shared_with)

rules.add_perm("knowledge.view_knowledgebase", can_use_base)
rules.add_perm("knowledge.change_knowledgebase", can_use_base)
rules.add_perm(
    "knowledge.delete_knowledgebase", rules.is_authenticated & (rules.is_staff | is_owner)
)
