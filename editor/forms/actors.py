"""The actor pickers of the panels (step actor, judge, reviewers to escalate to, retry actor,
a branch condition's evaluator).

Every picker lists the recipe's aliases and then every other actor the user may name; picking
one of those (`+REFERENCE`) adds an alias for it, named after it. One menu and one way of
adding the alias, whatever field the picker is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from workflows.validators import HUMAN_PREFIX

from ..selectors import ActorChoice, actor_choices, human_references
from .document import DocumentContext

# The value of a menu entry that adds an alias for the actor after it.
NEW_ALIAS = "+"


def new_alias(reference: str, taken: set[str]) -> str:
    """Return an alias for `reference`, named after it, not among `taken`."""
    base = reference.removeprefix(HUMAN_PREFIX).split(":")[0]
    base = re.sub(r"[^A-Za-z0-9_-]+", "_", base).strip("_-") or "actor"
    if not base[0].isalpha() and base[0] != "_":
        base = f"a_{base}"
    alias, n = base, 2
    while alias in taken:
        alias, n = f"{base}_{n}", n + 1
    return alias


@dataclass
class ActorPicker:
    """The actors a document's pickers offer, and the aliases picking them added."""

    context: DocumentContext
    added: dict[str, str] = field(default_factory=dict)
    everyone: list[ActorChoice] = field(default_factory=actor_choices)

    def aliases(self) -> dict[str, str]:
        return {**self.context.actors, **self.added}

    def choices(
        self, blank: str, current: str = "", *, reviewers_only: bool = False
    ) -> list[tuple[str, Any]]:
        """Return the menu: `blank`, the recipe's aliases, then every other actor.

        `current`, a value the document holds that is no alias, stays in the menu (marked), so
        applying the form never drops it unseen. `reviewers_only`: the actors offered are
        reviewers (the engine says so of an alias of a model picked there).
        """
        aliases = self.context.actors
        humans = human_references(list(aliases.values()))
        own = [
            (a, f"{a} → {ref}{' (reviewers)' if ref in humans else ''}")
            for a, ref in aliases.items()
        ]
        if current and current not in aliases and not current.startswith(NEW_ALIAS):
            own.append((current, f"{current} (no such alias)"))
        menu: list[tuple[str, Any]] = [("", blank), ("Aliases of this recipe", own)]
        named = set(aliases.values())
        others = [
            (f"{NEW_ALIAS}{c.reference}", c.label)
            for c in self.everyone
            if c.reference not in named and (c.is_human or not reviewers_only)
        ]
        if others:
            menu.append(("Add an alias for", others))
        return menu

    def is_reference(self, value: str) -> bool:
        """Tell whether `value` names an actor the menu offers (rather than an alias)."""
        return any(c.reference == value for c in self.everyone)

    def resolve(self, value: str) -> str:
        """Return the alias a picked value stands for, adding one for a `+REFERENCE` pick.

        An actor that has an alias already is named by it: picking it twice adds one alias.
        """
        if not value.startswith(NEW_ALIAS):
            return value
        reference = value.removeprefix(NEW_ALIAS)
        aliases = self.aliases()
        for alias, named in aliases.items():
            if named == reference:
                return alias
        alias = new_alias(reference, set(aliases))
        self.added[alias] = reference
        return alias


def starter_actors(aliases: dict[str, str]) -> dict[str, dict[str, str]]:
    """Return the actor a new step starts with when no alias of the recipe suits it: the first
    model ("model") and the first reviewers ("reviewers"), each with the alias it would be
    added under (named as a picker names it)."""
    starters: dict[str, dict[str, str]] = {}
    for choice in actor_choices():
        role = "reviewers" if choice.is_human else "model"
        if role not in starters:
            alias = new_alias(choice.reference, set(aliases))
            starters[role] = {"alias": alias, "reference": choice.reference}
    return starters
