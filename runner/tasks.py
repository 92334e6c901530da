"""Celery tasks: thin, they take ids, and being delivered twice does no harm."""

from __future__ import annotations

from celery import shared_task

from . import execution, maintenance, notifications
from .human import tasks_expire


@shared_task(name="runner.advance_run", acks_late=True, reject_on_worker_lost=True)
def advance_run(run_id: int) -> None:
    """Execute the run's next steps (claiming them; a duplicate delivery finds nothing to do)."""
    execution.advance(run_id)


@shared_task(name="runner.reap_runs")
def reap_runs() -> int:
    """Re-enqueue runs whose worker died or whose message was lost."""
    return maintenance.reap()


@shared_task(name="runner.expire_tasks")
def expire_tasks() -> int:
    """Escalate or time out human tasks past their due time."""
    return tasks_expire()


@shared_task(name="runner.email_task_reviewers")
def email_task_reviewers(task_id: int) -> int:
    """E-mail the reviewers of an open task's group (a second delivery mails them again)."""
    return notifications.task_email_reviewers(task_id=task_id)
