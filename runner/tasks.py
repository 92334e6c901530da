"""Celery tasks: thin, they take ids, and being delivered twice does no harm."""

from __future__ import annotations

import logging
import random

from celery import Task, shared_task

from . import advance, dispatch, maintenance, notifications
from .human import tasks_expire

log = logging.getLogger(__name__)

# A run interrupted by a database outage is retried after 0.5, 1, 2, 4, then every 5 s (with a
# little jitter so that the runs of one outage do not all come back in the same instant), for
# about five minutes; after that the reaper hands it back once its lease has run out.
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 5.0
RETRY_ATTEMPTS = 60


def retry_delay(retries: int) -> float:
    """Return the wait before retry number `retries + 1` of an interrupted run."""
    return min(RETRY_FIRST_S * 2**retries, RETRY_MAX_S) + random.uniform(0, RETRY_FIRST_S)


@shared_task(bind=True, name="runner.advance_run", acks_late=True, reject_on_worker_lost=True)
def advance_run(self: Task, run_id: int, resume_token: str = "") -> None:
    """Execute the run's next steps (claiming them; a duplicate delivery finds nothing to do).

    A database outage does not lose the run: the task is retried with backoff, and the retry
    takes back the lease it held (`resume_token`) instead of waiting for it to run out.
    """
    try:
        advance.advance(run_id, resume_token=resume_token)
    except advance.Interrupted as exc:
        if self.request.retries >= RETRY_ATTEMPTS:
            log.error(
                "run %s: still interrupted after %d retries; left to the reaper",
                run_id,
                self.request.retries,
            )
            return
        log.warning("run %s: %s; retrying", run_id, exc.__cause__ or exc)
        raise self.retry(
            args=(run_id,),
            kwargs={"resume_token": exc.token},
            countdown=retry_delay(self.request.retries),
            max_retries=RETRY_ATTEMPTS,
            priority=dispatch.RECOVERY_PRIORITY,
            exc=exc,
        ) from None


@shared_task(name="runner.reap_runs")
def reap_runs() -> int:
    """Re-enqueue runs whose worker died or whose message was lost."""
    return maintenance.reap()


@shared_task(name="runner.expire_tasks")
def expire_tasks() -> int:
    """Escalate or time out human tasks past their due time."""
    return tasks_expire()


@shared_task(name=notifications.EMAIL_TASK)
def email_task_reviewers(task_id: int) -> int:
    """E-mail the reviewers of an open task's group (a second delivery mails them again)."""
    return notifications.task_email_reviewers(task_id=task_id)
