"""What a model actor can do (its `capabilities`) and what a step needs of one (`requires`).

Both are lists in one form: capability names (`CAPABILITIES`, the one list the engine knows;
any other name is an error) and at most one `{"context": N}`, a context window in tokens. On
an actor it is the window the model has; on a step the least window the step needs.

An actor that declares no capabilities (None) is not checked: it is taken to meet every
requirement, so recipes and actors from before capabilities keep publishing and running. An
actor that declares them declares all it has; a context requirement is checked only against
an actor that declares its context. `json_schema` (answers held to a JSON Schema) implies
`json` (answers in JSON).

Requirements are checked when a recipe is published and when an actor
is chosen for a step (`actor_choice`: a candidate lacking one is skipped, with the reason).
The publish check is `capability_check.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from workflows.engine.checks import is_int

VISION, TOOLS, JSON, JSON_SCHEMA, AUDIO, REASONING = (
    "vision",
    "tools",
    "json",
    "json_schema",
    "audio",
    "reasoning",
)
# Every capability name, in the order messages list them.
CAPABILITIES = (VISION, TOOLS, JSON, JSON_SCHEMA, AUDIO, REASONING)
CONTEXT = "context"
# A capability another one brings with it.
_IMPLIED = {JSON_SCHEMA: (JSON,)}
MAX_CONTEXT = 100_000_000


@dataclass(frozen=True, slots=True)
class Capabilities:
    """Capability names and a context window in tokens (None: not given)."""

    names: frozenset[str] = frozenset()
    context: int | None = None

    def __bool__(self) -> bool:
        return bool(self.names) or self.context is not None

    def as_json(self) -> list[object]:
        """Return the list form, names in `CAPABILITIES` order."""
        items: list[object] = [n for n in CAPABILITIES if n in self.names]
        if self.context is not None:
            items.append({CONTEXT: self.context})
        return items


NONE = Capabilities()


def parse_capabilities(value: object) -> tuple[Capabilities, list[tuple[str, str]]]:
    """Read a capability list; return it and its problems as (index path, message) pairs.

    The path is "" for the list itself, else `[i]` (or `[i].context`).
    """
    if value is None:
        return NONE, []
    if not isinstance(value, list):
        return NONE, [("", f"must be a list of capability names, got {value!r}")]
    names: set[str] = set()
    context: int | None = None
    problems: list[tuple[str, str]] = []
    for i, item in enumerate(value):
        if isinstance(item, Mapping):
            if set(item) != {CONTEXT}:
                problems.append((f"[{i}]", f'an object must be {{"{CONTEXT}": TOKENS}}'))
            elif not is_int(item[CONTEXT]) or not 1 <= item[CONTEXT] <= MAX_CONTEXT:
                problems.append(
                    (
                        f"[{i}].{CONTEXT}",
                        f"must be a whole number of tokens from 1 to "
                        f"{MAX_CONTEXT}, got {item[CONTEXT]!r}",
                    )
                )
            elif context is not None:
                problems.append((f"[{i}]", f"{CONTEXT} is given twice"))
            else:
                context = item[CONTEXT]
        elif not isinstance(item, str) or item not in CAPABILITIES:
            problems.append(
                (
                    f"[{i}]",
                    f"unknown capability {item!r}; expected one of: "
                    f'{", ".join(CAPABILITIES)} or {{"{CONTEXT}": TOKENS}}',
                )
            )
        elif item in names:
            problems.append((f"[{i}]", f"{item} is listed twice"))
        else:
            names.add(item)
    return Capabilities(frozenset(names), context), problems


def missing(required: Capabilities, offered: Capabilities | None) -> list[str]:
    """Return what `offered` lacks of `required`, one phrase each (empty: it has it all).

    None offered (capabilities not declared) lacks nothing: it is not checked.
    """
    if offered is None or not required:
        return []
    has = set(offered.names)
    for name in offered.names:
        has.update(_IMPLIED.get(name, ()))
    lacking = [n for n in CAPABILITIES if n in required.names and n not in has]
    if (
        required.context is not None
        and offered.context is not None
        and offered.context < required.context
    ):
        lacking.append(f"{CONTEXT} >= {required.context} (it has {offered.context})")
    return lacking


def lacking_reason(alias: str, lacking: list[str]) -> str:
    """One line saying what actor `alias` lacks."""
    return f"actor '{alias}' lacks {', '.join(lacking)}"
