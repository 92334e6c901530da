"""Choose the actor to retry a step with, from what past runs learned about each actor."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Laplace smoothing: every actor starts as if it had one success and one failure, so a single
# lucky success (2/3 ≈ 0.67) does not outrank a long good record (46/52 ≈ 0.88).
PRIOR_SUCCESSES = 1
PRIOR_ATTEMPTS = 2


@dataclass(frozen=True, slots=True)
class ActorStats:
    """What is known of an actor: successes out of attempts, and mean latency (None: unknown)."""

    actor: str
    successes: int = 0
    attempts: int = 0
    mean_latency_ms: float | None = None

    @property
    def success_rate(self) -> float:
        """Return the smoothed success rate, 0.5 for an actor never tried."""
        return (self.successes + PRIOR_SUCCESSES) / (self.attempts + PRIOR_ATTEMPTS)


def _merge(stats: Sequence[ActorStats]) -> list[ActorStats]:
    """Sum the entries given for the same actor, latency weighted by attempts."""
    by_actor: dict[str, ActorStats] = {}
    for entry in stats:
        seen = by_actor.get(entry.actor)
        if seen is None:
            by_actor[entry.actor] = entry
            continue
        latencies = [
            (s.mean_latency_ms, max(s.attempts, 1))
            for s in (seen, entry)
            if s.mean_latency_ms is not None
        ]
        weight = sum(w for _, w in latencies)
        latency = sum(v * w for v, w in latencies) / weight if latencies else None
        by_actor[entry.actor] = ActorStats(
            entry.actor,
            seen.successes + entry.successes,
            seen.attempts + entry.attempts,
            latency,
        )
    return list(by_actor.values())


def choose_actor(stats: Sequence[ActorStats], *, exclude: str) -> str | None:
    """Return the best actor other than `exclude`, or None when there is no other.

    Best means the highest smoothed success rate, then the lower mean latency (unknown
    latency last), then the name, so equal records always give the same choice.
    """
    candidates = [s for s in _merge(stats) if s.actor != exclude]
    if not candidates:
        return None
    best = min(
        candidates,
        key=lambda s: (
            -s.success_rate,
            math.inf if s.mean_latency_ms is None else s.mean_latency_ms,
            s.actor,
        ),
    )
    return best.actor
