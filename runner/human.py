"""Human tasks: claim, decide, escalate, time out. A decision resumes its run exactly once."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from . import events, notifications, store
from .dispatch import enqueue
from .models import HumanTask, Run
from .status import RunStatus, TaskStatus


class TaskClosed(Exception):
    """The task was already decided, timed out or closed."""


class NotInGroup(Exception):
    """The user is not a reviewer of the task's group."""


class BadDecision(Exception):
    """The decision is not one of the task's options."""


class ClaimedByAnother(Exception):
    """Another reviewer is on the task: only they may let it go, and nobody else claim it."""


def task_claim(*, task_id: int, user: AbstractBaseUser) -> HumanTask:
    """Say the user is on an open task, so that the group's other reviewers see it live.

    A claim informs, it does not lock: any reviewer of the group may still decide (a claimer who
    left for the day must not hold a run up). Claiming one's own claim again changes nothing.
    """
    with transaction.atomic():
        task = _task_of_reviewer(task_id, user)
        # One conditional UPDATE (STYLE habit 5): of two reviewers claiming at once, one wins.
        took = HumanTask.objects.filter(
            pk=task_id, status=TaskStatus.OPEN, claimed_by__isnull=True
        ).update(claimed_by=user, claimed_at=timezone.now())
        task.refresh_from_db()
        if not took:
            _check_claimable(task, user)
            return task  # the user's own claim already
        events.push_task_change([task.group_id], "claimed", events.task_payload(task))
    return task


def task_unclaim(*, task_id: int, user: AbstractBaseUser) -> HumanTask:
    """Let go of the user's claim on an open task; a task nobody claimed is left as it is."""
    with transaction.atomic():
        task = _task_of_reviewer(task_id, user)
        released = HumanTask.objects.filter(
            pk=task_id, status=TaskStatus.OPEN, claimed_by=user
        ).update(claimed_by=None, claimed_at=None)
        task.refresh_from_db()
        if not released:
            if task.claimed_by_id is None and task.status == TaskStatus.OPEN:
                return task
            _check_claimable(task, user)
        events.push_task_change([task.group_id], "claimed", events.task_payload(task))
    return task


def _task_of_reviewer(task_id: int, user: AbstractBaseUser) -> HumanTask:
    task = HumanTask.objects.select_related("group", "claimed_by").get(pk=task_id)
    if not user.groups.filter(pk=task.group_id).exists():
        raise NotInGroup("You are not a reviewer of this task's group.")
    return task


def _check_claimable(task: HumanTask, user: AbstractBaseUser) -> None:
    """Raise why a claim of `task` (read after the UPDATE that missed it) cannot change."""
    if task.status != TaskStatus.OPEN:
        raise TaskClosed(f"This task is {task.status.replace('_', ' ')} already.")
    if task.claimed_by_id is not None and task.claimed_by_id != user.pk:
        since = timezone.localtime(task.claimed_at).strftime("%H:%M") if task.claimed_at else ""
        who = task.claimed_by.username if task.claimed_by else "another reviewer"
        raise ClaimedByAnother(f"{who} is on this task{f' since {since}' if since else ''}.")


def task_decide(
    *, task_id: int, user: AbstractBaseUser, decision: str, comment: str = ""
) -> HumanTask:
    """Record a reviewer's decision and hand the run back to the workers."""
    with transaction.atomic():
        run = _lock_run_of(task_id)
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
        _resume(run, task, events.human_task_decided(task))
    return task


def _lock_run_of(task_id: int) -> Run:
    """Lock the task's run before the task (as `store.lock` asks)."""
    return store.lock(HumanTask.objects.values_list("run_id", flat=True).get(pk=task_id))


def _resume(run: Run, task: HumanTask, event: events.Event) -> None:
    """Record the task's `event` and hand its run back to the workers, if it waits for it."""
    if run.status == RunStatus.WAITING_HUMAN:
        store.resume(run, task, [event, events.run_status(RunStatus.RUNNING)])
    else:
        store.add_events(run, [event])
    events.push_task_change([task.group_id], "closed", event.data)
    if run.status == RunStatus.RUNNING:
        enqueue(run.pk)


def tasks_expire(*, now: datetime | None = None) -> int:
    """Escalate or time out open tasks past their due time; return how many were handled."""
    now = now or timezone.now()
    handled = 0
    due = HumanTask.objects.filter(status=TaskStatus.OPEN, due_at__lte=now).values_list(
        "pk", flat=True
    )
    for task_id in list(due):
        with transaction.atomic():
            run = _lock_run_of(task_id)
            task = (
                HumanTask.objects.select_for_update().select_related("group", "run").get(pk=task_id)
            )
            if task.status != TaskStatus.OPEN or task.due_at is None or task.due_at > now:
                continue
            if task.escalation_group_id and task.escalated_at is None:
                _escalate(run, task, now)
            else:
                task.status = TaskStatus.TIMED_OUT
                task.save()
                _resume(run, task, events.human_task_timed_out(task))
            handled += 1
    return handled


def _escalate(run: Run, task: HumanTask, now: datetime) -> None:
    old_group = task.group_id
    wait = (task.due_at - task.created_at) if task.due_at else timedelta(hours=1)
    task.group_id = task.escalation_group_id
    # A claimer of the old group is not one of the new group's reviewers.
    task.claimed_by, task.claimed_at = None, None
    task.escalated_at = now
    task.due_at = now + wait
    task.save()
    task.refresh_from_db(fields=["group"])
    event = events.human_task_escalated(task)
    store.add_events(run, [event])
    events.push_task_change([old_group], "closed", event.data)
    events.push_task_change([task.group_id], "created", event.data)
    notifications.mail_reviewers_on_commit(task)


def tasks_close_for_run(run: Run) -> list[events.Event]:
    """Close a stopped run's open tasks; return their events (the caller records them)."""
    pending = []
    for task in (
        HumanTask.objects.select_for_update()
        .select_related("group")
        .filter(run=run, status=TaskStatus.OPEN)
    ):
        task.status = TaskStatus.CANCELLED
        task.save(update_fields=["status"])
        event = events.human_task_closed(task)
        pending.append(event)
        events.push_task_change([task.group_id], "closed", event.data)
    return pending
