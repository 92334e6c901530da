"""E-mail to the reviewers of a group when a task waits for them (TASK_EMAILS=1)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone

from runner import notifications, tasks
from runner.advance import advance
from runner.human import task_decide, tasks_expire
from runner.models import HumanTask
from runner.notifications import task_email_reviewers
from runner.services import run_start
from tests.factories import GroupFactory, UserFactory
from workflows.models import Recipe

pytestmark = pytest.mark.django_db


class MailsAtOnce:
    """The Celery app, as `runner.notifications` sees it: the mail task runs at once."""

    def send_task(self, name: str, args: tuple[int]) -> None:
        assert name == tasks.email_task_reviewers.name
        tasks.email_task_reviewers(*args)


@pytest.fixture
def mail_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send the mails at once instead of through the Celery queue."""
    monkeypatch.setattr(notifications, "current_app", MailsAtOnce())


def wait_for_review(owner: Any, recipe: Recipe, capture: Any) -> HumanTask:
    """Run the story recipe here until it asks the reviewers, running its on-commit hooks."""
    with capture(execute=True):
        run = run_start(user=owner, recipe=recipe, inputs={"topic": "owls"}, script={"judge": "5"})
    with capture(execute=True):
        advance(run.pk, time_slice=60)
    return HumanTask.objects.get(run=run)


def test_each_reviewer_of_the_group_gets_a_mail_when_a_task_waits(
    story_recipe: Recipe,
    owner: Any,
    reviewer: Any,
    editors: Any,
    settings: Any,
    mail_now: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.TASK_EMAILS = True
    settings.SITE_URL = "https://branchline.example/"
    colleague = UserFactory(username="carl", email="carl@example.com")
    colleague.groups.add(editors)
    UserFactory(username="nomail", email="").groups.add(editors)
    UserFactory(username="gone", email="gone@example.com", is_active=False).groups.add(editors)

    task = wait_for_review(owner, story_recipe, django_capture_on_commit_callbacks)

    assert sorted(m.to[0] for m in mail.outbox) == ["carl@example.com", "rita@example.com"]
    message = mail.outbox[0]
    assert message.subject == "[Branchline] Story with review needs a decision from test-editors"
    assert f"Run {task.run_id} of “Story with review” waits for a reviewer" in message.body
    assert "Is this story good?" in message.body
    assert f"https://branchline.example/inbox/#task-{task.pk}" in message.body
    assert all(len(m.to) == 1 and not m.cc and not m.bcc for m in mail.outbox)


def test_nothing_is_mailed_unless_task_emails_are_on(
    story_recipe: Recipe,
    owner: Any,
    reviewer: Any,
    mail_now: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    wait_for_review(owner, story_recipe, django_capture_on_commit_callbacks)

    assert mail.outbox == []


def test_an_escalated_task_is_mailed_to_its_new_group(
    story_recipe: Recipe, owner: Any, reviewer: Any, django_capture_on_commit_callbacks: Any
) -> None:
    task = wait_for_review(owner, story_recipe, django_capture_on_commit_callbacks)
    chiefs = GroupFactory(name="chiefs")
    UserFactory(username="cleo", email="cleo@example.com").groups.add(chiefs)
    HumanTask.objects.filter(pk=task.pk).update(group=chiefs, escalated_at=timezone.now())

    sent = task_email_reviewers(task_id=task.pk)

    assert sent == 1
    assert mail.outbox[0].to == ["cleo@example.com"]
    assert mail.outbox[0].subject.startswith("[Branchline] Escalated to chiefs:")


def test_a_task_decided_before_its_mail_goes_out_is_not_mailed(
    story_recipe: Recipe, owner: Any, reviewer: Any, django_capture_on_commit_callbacks: Any
) -> None:
    task = wait_for_review(owner, story_recipe, django_capture_on_commit_callbacks)
    task_decide(task_id=task.pk, user=reviewer, decision="approve")

    assert task_email_reviewers(task_id=task.pk) == 0
    assert task_email_reviewers(task_id=999_999) == 0
    assert mail.outbox == []


def test_a_task_escalated_when_due_is_mailed_to_its_new_group(
    story_recipe: Recipe,
    owner: Any,
    reviewer: Any,
    settings: Any,
    mail_now: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    task = wait_for_review(owner, story_recipe, django_capture_on_commit_callbacks)
    chiefs = GroupFactory(name="chiefs")
    UserFactory(username="cleo", email="cleo@example.com").groups.add(chiefs)
    HumanTask.objects.filter(pk=task.pk).update(
        escalation_group=chiefs, due_at=timezone.now() - timedelta(seconds=1)
    )
    settings.TASK_EMAILS = True

    with django_capture_on_commit_callbacks(execute=True):
        assert tasks_expire() == 1

    assert [m.to for m in mail.outbox] == [["cleo@example.com"]]
    assert mail.outbox[0].subject.startswith("[Branchline] Escalated to chiefs:")
