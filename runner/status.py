"""Run, step and task statuses, and the one table of allowed run transitions."""

from __future__ import annotations

from django.db import models


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING_HUMAN = "waiting_human"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ENDED = "ended"


TERMINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.ENDED})
RUNNABLE = frozenset({RunStatus.QUEUED, RunStatus.RUNNING})

RUN_TRANSITIONS: dict[str, frozenset[str]] = {
    RunStatus.QUEUED: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.FAILED}),
    RunStatus.RUNNING: frozenset(
        {RunStatus.RUNNING, RunStatus.WAITING_HUMAN, RunStatus.QUEUED} | TERMINAL
    ),
    RunStatus.WAITING_HUMAN: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.FAILED}),
    RunStatus.SUCCEEDED: frozenset(),
    # Resumed: queued again for a new attempt of the step it stopped at (runner.reruns).
    RunStatus.FAILED: frozenset({RunStatus.QUEUED}),
    RunStatus.CANCELLED: frozenset({RunStatus.QUEUED}),
    RunStatus.ENDED: frozenset(),
}


class IllegalTransition(Exception):
    """A run was asked to move to a status its current one does not allow."""


def check_transition(current: str, new: str) -> None:
    """Raise IllegalTransition unless a run may go from `current` to `new`."""
    if new not in RUN_TRANSITIONS[current]:
        raise IllegalTransition(f"a {current} run cannot become {new}")


class StepStatus(models.TextChoices):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    WAITING_HUMAN = "waiting_human"
    DECIDED = "decided"
    CANCELLED = "cancelled"


class TaskStatus(models.TextChoices):
    OPEN = "open"
    DECIDED = "decided"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


class Outcome(models.TextChoices):
    COMPLETED = "completed"
    APPROVED = "approved"
    ERROR_HANDLED = "error_handled"
    ENDED = "ended"
    FAILED = "failed"
    CANCELLED = "cancelled"
