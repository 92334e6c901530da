"""E-mail the reviewers of a group when a task is waiting for them (TASK_EMAILS=1).

Optional: the inbox and its live count are the main channel. Sent by a Celery task after the
task's commit, so a slow mail server never holds up a run.
"""

from __future__ import annotations

from celery import current_app
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage, get_connection
from django.db import transaction
from django.urls import reverse

from .models import HumanTask
from .status import TaskStatus

EXCERPT_CHARS = 1200

# runner.tasks.email_task_reviewers, sent by its name: the tasks module imports this one.
EMAIL_TASK = "runner.email_task_reviewers"


def mail_reviewers_on_commit(task: HumanTask) -> None:
    """Have a worker mail the reviewers of the task's group, once the current transaction
    commits (with TASK_EMAILS on); for a task just created for a group, or escalated to it."""
    if settings.TASK_EMAILS:
        task_id = task.pk
        transaction.on_commit(lambda: current_app.send_task(EMAIL_TASK, (task_id,)))


def task_email_reviewers(*, task_id: int) -> int:
    """Tell every reviewer of the task's group that it waits for them; return the mails sent.

    Nothing is sent for a task that is no longer open (decided before the mail went out).
    """
    task = HumanTask.objects.select_related("group", "run__recipe").filter(pk=task_id).first()
    if task is None or task.status != TaskStatus.OPEN:
        return 0
    recipients = list(
        get_user_model()
        .objects.filter(groups=task.group, is_active=True)
        .exclude(email="")
        .values_list("email", flat=True)
    )
    if not recipients:
        return 0
    recipe = task.run.recipe.name
    if task.escalated_at:
        subject = f"[Branchline] Escalated to {task.group.name}: {recipe} needs a decision"
    else:
        subject = f"[Branchline] {recipe} needs a decision from {task.group.name}"
    body = "\n\n".join(
        part
        for part in [
            f"Run {task.run_id} of “{recipe}” waits for a reviewer of {task.group.name} "
            f"at step “{task.step_key}”"
            + (f", until {task.due_at:%Y-%m-%d %H:%M} UTC." if task.due_at else "."),
            _excerpt(task.question),
            f"To review:\n{_excerpt(task.material)}" if task.material else "",
            f"Decide in your inbox: {settings.SITE_URL.rstrip('/')}{reverse('inbox')}"
            f"#task-{task.pk}",
        ]
        if part
    )
    # One message per reviewer: nobody sees the others' addresses.
    messages = [EmailMessage(subject, body, to=[address]) for address in recipients]
    return get_connection().send_messages(messages) or 0


def _excerpt(text: str) -> str:
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"
