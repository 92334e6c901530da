"""How long a branch that runs its step again waits before it does (DESIGN §9 "Retry delays").

A branch that runs its step again (its target `@repeat`, say on a RETRIABLE `error_severity`,
or a repeat action) may wait first: `params.delay_seconds` before its first retry in a visit
of the step, `delay_seconds * backoff_factor ** n` before retry n + 1 (`backoff_factor` defaults to
1: the same wait each time), plus at random up to `params.jitter` (a fraction, default 0) of
that wait, so that the retries of many runs failing together do not all come back at once.
A wait is at most MAX_DELAY_SECONDS, whatever the backoff makes of it.

The engine only says how long; the runner waits in the queue (a message due later), never
in a worker.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from workflows.engine.checks import is_number

DELAY_PARAM = "delay_seconds"
BACKOFF_PARAM = "backoff_factor"
JITTER_PARAM = "jitter"
DELAY_PARAMS: tuple[str, ...] = (DELAY_PARAM, BACKOFF_PARAM, JITTER_PARAM)

# An hour: the longest a run waits in the queue for a retry (and the broker's visibility
# timeout, past which a message due later would be delivered twice).
MAX_DELAY_SECONDS = 3600.0
MAX_BACKOFF_FACTOR = 10.0


def delay_problems(params: Mapping[str, object], *, repeats: bool) -> list[tuple[str, str]]:
    """Return (param, message) for each delay parameter of a branch that is not valid.

    `repeats`: the branch runs its step again, the only kind of branch that waits.
    """
    present = [name for name in DELAY_PARAMS if params.get(name) is not None]
    if not present:
        return []
    if not repeats:
        return [
            (name, "only a branch that runs its step again (@repeat or a retry) waits")
            for name in present
        ]
    problems: list[tuple[str, str]] = []
    bounds = {
        DELAY_PARAM: (0.0, MAX_DELAY_SECONDS, "seconds"),
        BACKOFF_PARAM: (1.0, MAX_BACKOFF_FACTOR, "a factor"),
        JITTER_PARAM: (0.0, 1.0, "a fraction of the wait"),
    }
    for name in present:
        value = params[name]
        low, high, what = bounds[name]
        if not is_number(value) or not low <= value <= high:  # type: ignore[operator]
            problems.append(
                (name, f"must be a number from {low:g} to {high:g} ({what}), got {value!r}")
            )
    if params.get(DELAY_PARAM) is None:
        problems += [
            (name, f"needs params.{DELAY_PARAM}, the first wait")
            for name in present
            if name != DELAY_PARAM
        ]
    return problems


def retry_delay(
    params: Mapping[str, object], retries_used: int, rng: random.Random | None = None
) -> float:
    """Return the seconds to wait before the branch's next retry, its `retries_used`
    earlier retries in this visit of the step taken (0: no wait asked)."""
    delay = _number(params.get(DELAY_PARAM), 0.0)
    if delay <= 0:
        return 0.0
    factor = _number(params.get(BACKOFF_PARAM), 1.0)
    # Capped before the power can overflow: a factor >= 1 only grows the wait.
    wait = delay
    for _ in range(max(retries_used, 0)):
        wait *= factor
        if wait >= MAX_DELAY_SECONDS:
            break
    jitter = _number(params.get(JITTER_PARAM), 0.0)
    if jitter > 0:
        wait += wait * jitter * (rng or random.Random()).random()
    return min(wait, MAX_DELAY_SECONDS)


def _number(value: object, default: float) -> float:
    return float(value) if is_number(value) else default  # type: ignore[arg-type]


def describe(delay_s: float) -> str:
    """The wait as the branch evaluation's reason tells it."""
    return f"waits {round(delay_s, 1):g} s before running the step again"
