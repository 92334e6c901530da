"""How long each phase of a step took, for its record (`details["execution"]`).

The phases of an llm step are those of note 001's loop: `sources` (searching its knowledge
bases), `tools` (the tool calls its model asked for), `build` (rendering the prompt), `call`
(the model's answers), `validate` (the judge, or checking answers against the output schema)
and `finalise` (putting the record together). A phase that did not happen is left out; one
that happened more than once (each attempt of a validation loop) adds up, and is `failed`
if any of its turns failed. Timed with `time.monotonic`: no query, no clock of the database.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

OK, FAILED = "ok", "failed"
# Where the step's details keep its phases, attempts and duration.
DETAILS = "execution"


class Phases:
    """The phases of one execution of a step, in the order they first ran."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self._phases: dict[str, dict[str, Any]] = {}
        # How many answers the step asked its model for (1 unless a loop asked again).
        self.attempts = 0

    def add(self, name: str, seconds: float, status: str = OK) -> None:
        """Add `seconds` of phase `name` (a failed turn marks the whole phase failed)."""
        phase = self._phases.setdefault(name, {"name": name, "status": OK, "seconds": 0.0})
        phase["seconds"] += max(seconds, 0.0)
        if status == FAILED:
            phase["status"] = FAILED

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as phase `name`; it failed if the block raised."""
        started = time.monotonic()
        status = FAILED
        try:
            yield
            status = OK
        finally:
            self.add(name, time.monotonic() - started, status)

    def seconds(self, name: str) -> float:
        """Return the time phase `name` took so far (0 when it has not run)."""
        phase = self._phases.get(name)
        return phase["seconds"] if phase else 0.0

    def ran(self) -> bool:
        return bool(self._phases)

    def as_json(self) -> dict[str, Any]:
        """Return the record: each phase with its ms and status, the attempts, the duration."""
        return {
            "steps": [
                {"name": p["name"], "status": p["status"], "duration_ms": _ms(p["seconds"])}
                for p in sorted(self._phases.values(), key=_order)
            ],
            "attempts": self.attempts,
            "duration_ms": _ms(time.monotonic() - self.began),
        }


ORDER = ("sources", "tools", "build", "call", "validate", "finalise")


def _order(phase: dict[str, Any]) -> int:
    name = phase["name"]
    return ORDER.index(name) if name in ORDER else len(ORDER)


def _ms(seconds: float) -> int:
    return round(seconds * 1000)
