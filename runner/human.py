"""Human tasks: decide, escalate, time out. A decision resumes its run exactly once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from . import events
from .execution import enqueue
from .models import HumanTask, Run
from .status import RunStatus, TaskStatus, check_transition


class TaskClosed(Exception):
    """The task was already decided, timed out or closed."""


class NotInGroup(Exception):
    """The user is not a reviewer of the task's group."""


class BadDecision(Exception):
    """The decision is not one of the task's options."""


def task_payload(task: HumanTask) -> dict[str, Any]:
    """Return what reviewers' pages and the API show of a task."""
    return {
        "id": task.pk,
        "run": task.run_id,
        "step": task.step_key,
        "group": task.group.name if task.group_id else None,
        "question": task.question,
        "material": task.material,
        "options": task.options,
        "due_at": task.due_at.isoformat() if task.due_at else None,
        "status": task.status,
        "decision": task.decision,
        "comment": task.comment,
        "decided_by": task.decided_by.username if task.decided_by_id else None,
    }


def task_decide(
    *, task_id: int, user: AbstractBaseUser, decision: str, comment: str = ""
) -> HumanTask:
    """Record a reviewer's decision and hand the run back to the workers."""
    with transaction.atomic():
        _lock_run_of(task_id)
        task = HumanTask.objects.select_for_update().select_related("group").get(pk=task_id)
        if not user.groups.filter(pk=task.group_id).exists():
            raise NotInGroup("You are not a reviewer of this task's group.")
        if task.status != TaskStatus.OPEN:
            raise TaskClosed(f"This task is {task.status.replace('_', ' ')} already.")
        if decision not in task.options:
            raise BadDecision(f"decision: choose one of {', '.join(task.options)}")
        task.status = TaskStatus.DECIDED
        task.decision, task.comment = decision, comment
        task.decided_by, task.decided_at = user, timezone.now()
        task.save()
        _resume(task, "human_task.decided")
    return task


def _lock_run_of(task_id: int) -> None:
    """Lock the task's run before the task: cancelling a run locks them in that order too, and
    the opposite order would deadlock against it."""
    run_id = HumanTask.objects.values_list("run_id", flat=True).get(pk=task_id)
    list(Run.objects.select_for_update().filter(pk=run_id).values_list("pk", flat=True))


def _resume(task: HumanTask, event_type: str) -> None:
    run = Run.objects.select_for_update().get(pk=task.run_id)
    payload = task_payload(task)
    pending: list[tuple[str, dict[str, Any]]] = [(event_type, payload)]
    if run.status == RunStatus.WAITING_HUMAN:
        check_transition(run.status, RunStatus.RUNNING)
        run.status = RunStatus.RUNNING
        run.next = {"step": task.step_key, "resume_task": task.pk}
        pending.append(("run.status", {"status": run.status}))
    events.record(run, pending)
    run.save(update_fields=["status", "next", "event_seq"])
    events.push_task_change([task.group_id], "closed", payload)
    if run.status == RunStatus.RUNNING:
        enqueue(run.pk)


def tasks_expire(*, now: Any = None) -> int:
    """Escalate or time out open tasks past their due time; return how many were handled."""
    now = now or timezone.now()
    handled = 0
    due = HumanTask.objects.filter(status=TaskStatus.OPEN, due_at__lte=now).values_list(
        "pk", flat=True
    )
    for task_id in list(due):
        with transaction.atomic():
            _lock_run_of(task_id)
            task = (
                HumanTask.objects.select_for_update().select_related("group", "run").get(pk=task_id)
            )
            if task.status != TaskStatus.OPEN or task.due_at is None or task.due_at > now:
                continue
            if task.escalation_group_id and task.escalated_at is None:
                _escalate(task, now)
            else:
                task.status = TaskStatus.TIMED_OUT
                task.save()
                _resume(task, "human_task.timed_out")
            handled += 1
    return handled


def _escalate(task: HumanTask, now: Any) -> None:
    old_group = task.group_id
    wait = (task.due_at - task.created_at) if task.due_at else timedelta(hours=1)
    task.group_id = task.escalation_group_id
    task.escalated_at = now
    task.due_at = now + wait
    task.save()
    task.refresh_from_db(fields=["group"])
    run = Run.objects.select_for_update().get(pk=task.run_id)
    payload = task_payload(task)
    events.record(run, [("human_task.escalated", payload)])
    run.save(update_fields=["event_seq"])
    events.push_task_change([old_group], "closed", payload)
    events.push_task_change([task.group_id], "created", payload)


def tasks_close_for_run(run: Run) -> list[tuple[str, dict[str, Any]]]:
    """Close a stopped run's open tasks; return their events (the caller records them)."""
    pending = []
    for task in (
        HumanTask.objects.select_for_update()
        .select_related("group")
        .filter(run=run, status=TaskStatus.OPEN)
    ):
        task.status = TaskStatus.CANCELLED
        task.save(update_fields=["status"])
        payload = task_payload(task)
        pending.append(("human_task.closed", payload))
        events.push_task_change([task.group_id], "closed", payload)
    return pending
