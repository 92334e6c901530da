"""Describe the fields of a condition type or a step kind, for the editor, lint and docs.

A field spec is data: the editor builds its form from it, the canvas its labels, and the
format documentation its tables (see `workflows.engine.catalog`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

FieldKind = Literal[
    "text",  # plain text
    "regex",  # a pattern (RE2 syntax)
    "number",
    "integer",
    "boolean",
    "choice",  # one of `choices`
    "actor",  # an actor alias of the recipe
    "path",  # a dotted field path (`document.image_count`)
    "step",  # a step key
    "list",  # a list of text
    "template",  # text with {name} placeholders (see templating.py)
]


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One key of a condition or step document: what it holds and how people see it.

    `display` maps a value (as text: JSON true/false as "true"/"false", a missing value as
    "") to what a summary shows for it. `aliases` are other keys read as this field (the
    reference seeds' spellings); a document may give both only with the same value.
    """

    name: str
    label: str
    kind: FieldKind
    required: bool = False
    choices: tuple[str, ...] = ()
    default: Any = None
    help: str = ""
    display: Mapping[str, str] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()

    def value_in(self, doc: Mapping[str, Any]) -> Any:
        """Return the field's value in `doc`: under its name, else under its first alias given."""
        for key in (self.name, *self.aliases):
            if doc.get(key) is not None:
                return doc[key]
        return None

    def as_json(self) -> dict[str, Any]:
        """Return the spec as the catalog publishes it."""
        return {
            "name": self.name,
            "label": self.label,
            "kind": self.kind,
            "required": self.required,
            "choices": list(self.choices),
            # A tuple keeps the spec immutable; JSON has lists.
            "default": list(self.default) if isinstance(self.default, tuple) else self.default,
            "help": self.help,
            "display": dict(self.display),
            "aliases": list(self.aliases),
        }
