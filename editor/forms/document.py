"""What the side-panel forms share about the document they edit: its steps, actors and errors."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from workflows.engine.vocabulary import DEFAULT_HUMAN_OPTIONS


def _document_path(path: str) -> list[str]:
    """Split `steps[1].branches[0].when.value` into `['steps', '1', 'branches', '0', ...]`."""
    return [p for p in re.split(r"[.\[\]]+", path) if p]


def errors_under(errors: list[str], prefix: str) -> list[tuple[list[str], str]]:
    """Return (remaining path parts, message) of the errors at or below the path `prefix`."""
    base = _document_path(prefix)
    found = []
    for error in errors:
        path, _, message = error.partition(": ")
        parts = _document_path(path)
        if parts[: len(base)] == base:
            found.append((parts[len(base) :], message))
    return found


@dataclass
class DocumentContext:
    """The document a panel edits, with what its forms offer as choices."""

    document: dict[str, Any]
    # The options a reviewer picks from on the step whose branch is edited (a human step's).
    step_options: tuple[str, ...] | None = None

    @property
    def steps(self) -> list[dict[str, Any]]:
        steps = self.document.get("steps")
        return [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []

    @property
    def actors(self) -> dict[str, str]:
        actors = self.document.get("actors")
        return {str(k): str(v) for k, v in actors.items()} if isinstance(actors, dict) else {}

    @property
    def step_keys(self) -> list[str]:
        return [s["key"] for s in self.steps if isinstance(s.get("key"), str)]


def human_options(step: dict[str, Any]) -> tuple[str, ...] | None:
    """Return the options a human step offers its reviewer (the engine's default ones when it
    names none); None for any other kind of step."""
    if step.get("kind") != "human":
        return None
    options = step.get("options")
    if isinstance(options, list) and options and all(isinstance(o, str) for o in options):
        return tuple(options)
    return DEFAULT_HUMAN_OPTIONS
