"""The reviewers' inbox: open tasks of one's groups, decisions posted with htmx, the nav count."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from runner.models import HumanTask, Run
from runner.status import RunStatus, TaskStatus
from tests.editor.test_runs_pages import client_for, start
from tests.factories import GroupFactory, UserFactory
from workflows.models import Recipe
from workflows.services import recipe_publish


@pytest.fixture
def published(story: Recipe, author: Any, reviewers: Group) -> Recipe:
    recipe_publish(recipe=story, user=author)
    story.shared_with_groups.add(reviewers)
    return story


@pytest.fixture
def reviewer(reviewers: Group) -> Any:
    user = UserFactory(username="rita")
    user.groups.add(reviewers)
    return user


@pytest.fixture
def rita(reviewer: Any) -> Client:
    return client_for(reviewer)


@pytest.fixture
def task(author: Any, published: Recipe) -> HumanTask:
    run = start(author, published, judge=["5"])
    assert run.status == RunStatus.WAITING_HUMAN
    return HumanTask.objects.get(run=run)


def decide(client: Client, task: HumanTask, decision: str, comment: str = "") -> Any:
    return client.post(
        f"/inbox/tasks/{task.pk}/decide/",
        {"decision": decision, "comment": comment},
        HTTP_HX_REQUEST="true",
    )


def test_the_inbox_shows_the_open_tasks_of_the_users_groups(rita: Client, task: HumanTask) -> None:
    html = rita.get("/inbox/").content.decode()

    assert f'id="task-{task.pk}"' in html
    assert "Is this story good?" in html  # the question
    assert "lighthouse keeper" in html  # the material to review
    for label in ("Approve", "Reject", "Revise"):
        assert f">{label}</button>" in html
    assert "<title>(1) Inbox · Branchline</title>" in html


def test_the_inbox_of_someone_outside_the_group_is_empty(web: Client, task: HumanTask) -> None:
    html = web.get("/inbox/").content.decode()

    assert f'id="task-{task.pk}"' not in html
    assert "Nothing to review right now." in html


def test_the_navigation_counts_the_open_tasks(rita: Client, task: HumanTask) -> None:
    html = rita.get("/runs/").content.decode()

    assert '<span class="badge count" data-inbox-count>1</span>' in html


def test_a_reviewer_revises_with_a_comment_and_the_run_goes_on(
    rita: Client, task: HumanTask, reviewer: Any
) -> None:
    response = decide(rita, task, "revise", "Add an owl.")

    task.refresh_from_db()
    html = response.content.decode()
    assert response.status_code == 200
    assert (task.status, task.decision, task.comment) == ("decided", "revise", "Add an owl.")
    assert task.decided_by == reviewer
    assert "You chose <strong>revise</strong>" in html
    assert "<form" not in html
    assert Run.objects.get(pk=task.run_id).status == RunStatus.RUNNING


def test_revise_needs_a_comment(rita: Client, task: HumanTask) -> None:
    response = decide(rita, task, "revise", "   ")

    task.refresh_from_db()
    assert response.status_code == 400
    assert "Say what to revise" in response.content.decode()
    assert task.status == TaskStatus.OPEN


def test_a_decision_that_is_not_an_option_is_refused(rita: Client, task: HumanTask) -> None:
    response = decide(rita, task, "shrug")

    assert response.status_code == 400
    assert "choose one of approve, reject, revise" in response.content.decode()


def test_a_decided_task_cannot_be_decided_again(
    rita: Client, task: HumanTask, reviewers: Group
) -> None:
    colleague = UserFactory(username="carl")
    colleague.groups.add(reviewers)
    decide(rita, task, "approve")

    response = decide(client_for(colleague), task, "reject")

    task.refresh_from_db()
    html = response.content.decode()
    assert response.status_code == 409
    assert "This task is decided already. Nothing was recorded." in html
    assert "rita chose <strong>approve</strong>" in html
    assert task.decision == "approve"


@pytest.mark.parametrize("decision", ["approve", "", "revise", "x" * 60])
def test_a_user_outside_the_group_cannot_decide_nor_read_the_task(
    web: Client, task: HumanTask, decision: str
) -> None:
    response = decide(web, task, decision)

    assert response.status_code == 404
    assert "lighthouse keeper" not in response.content.decode()
    assert web.get(f"/inbox/tasks/{task.pk}/").status_code == 404
    task.refresh_from_db()
    assert task.status == TaskStatus.OPEN


def test_a_task_card_renders_alone_for_a_reviewer(rita: Client, task: HumanTask) -> None:
    html = rita.get(f"/inbox/tasks/{task.pk}/", HTTP_HX_REQUEST="true").content.decode()

    assert html.lstrip().startswith('<article class="task-card card"')
    assert 'data-status="open"' in html


def test_a_task_of_another_group_is_not_found(task: HumanTask) -> None:
    outsider = UserFactory(username="otto")
    outsider.groups.add(GroupFactory(name="lawyers"))

    assert client_for(outsider).get(f"/inbox/tasks/{task.pk}/").status_code == 404
    assert client_for(outsider).post("/inbox/tasks/999999/decide/").status_code == 404


def test_without_htmx_a_decision_redirects_to_the_inbox_with_a_message(
    rita: Client, task: HumanTask
) -> None:
    response = rita.post(
        f"/inbox/tasks/{task.pk}/decide/", {"decision": "approve", "comment": ""}, follow=True
    )

    assert response.redirect_chain == [("/inbox/", 302)]
    assert f"Recorded: approve on task {task.pk}." in response.content.decode()


def test_a_cancelled_runs_task_says_it_is_closed(
    rita: Client, web: Client, task: HumanTask
) -> None:
    web.post(f"/runs/{task.run_id}/cancel/")

    response = decide(rita, task, "approve")

    assert response.status_code == 409
    assert "This task is cancelled already." in response.content.decode()
    assert "it can no longer be decided" in response.content.decode()
