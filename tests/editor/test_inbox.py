"""The reviewers' inbox: open tasks of one's groups, decisions posted with htmx, the nav count."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from editor.views.inbox import PAGE_SIZE
from runner.models import HumanTask, Run
from runner.status import RunStatus, TaskStatus
from tests.editor.test_runs_pages import client_for, start
from tests.factories import GroupFactory, UserFactory
from tests.runner.open_tasks import park_runs
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


# --- many open tasks: a page at a time ---------------------------------------------------------

MORE_THAN_A_PAGE = PAGE_SIZE + 5


@pytest.fixture
def parked(published: Recipe, author: Any, reviewers: Group) -> list[HumanTask]:
    return park_runs(published, author, reviewers, MORE_THAN_A_PAGE)


def card_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<article class="task-card card" id="task-(\d+)"', html)]


def more_link(html: str) -> str:
    """Return the query of the page's "Load more" link ("" when it is hidden: no next page)."""
    found = re.search(
        r'<p id="inbox-more-row" class="more"( hidden)?><a id="inbox-more" class="button" '
        r'href="\?([^"]*)" rel="next">',
        html,
    )
    assert found is not None
    return "" if found[1] else found[2].replace("&amp;", "&")


def test_the_inbox_shows_the_open_count_and_the_oldest_page(
    rita: Client, parked: list[HumanTask]
) -> None:
    html = rita.get("/inbox/").content.decode()

    assert card_ids(html) == [task.pk for task in parked[:PAGE_SIZE]]
    assert (
        f"<strong data-inbox-total>{MORE_THAN_A_PAGE}</strong> open task<span data-inbox-plural>s</span>"
        in html
    )
    assert f"<title>({MORE_THAN_A_PAGE}) Inbox · Branchline</title>" in html
    assert f'<span class="badge count" data-inbox-count>{MORE_THAN_A_PAGE}</span>' in html
    assert more_link(html).startswith("cursor=")
    assert 'data-from-oldest="true"' in html


def test_load_more_answers_the_cards_after_a_cursor_and_nothing_else(
    rita: Client, parked: list[HumanTask]
) -> None:
    first = rita.get("/inbox/").content.decode()
    last_cursor = re.findall(r'data-cursor="([^"]+)"', first)[-1]

    response = rita.get("/inbox/", {"cursor": last_cursor}, HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<article class="task-card card"')
    assert card_ids(html) == [task.pk for task in parked[PAGE_SIZE:]]
    assert "inbox-more" not in html and "<title>" not in html


def test_the_next_links_walk_every_task_once_while_tasks_open_meanwhile(
    rita: Client, parked: list[HumanTask], published: Recipe, author: Any, reviewers: Group
) -> None:
    seen: list[int] = []
    query = ""
    opened: list[HumanTask] = []
    while True:
        html = rita.get(f"/inbox/?{query}").content.decode()
        seen += card_ids(html)
        query = more_link(html)
        if not query:
            break
        # A task opens between two pages: it is the newest, so it comes last, once.
        opened += park_runs(published, author, reviewers, 1)

    assert seen == [task.pk for task in parked + opened]


def test_the_cards_say_their_place_in_the_order(rita: Client, parked: list[HumanTask]) -> None:
    # An older task with a newer id comes first: the order is by creation, then id.
    HumanTask.objects.filter(pk=parked[-1].pk).update(
        created_at=parked[0].created_at - timedelta(seconds=1)
    )

    html = rita.get("/inbox/").content.decode()

    orders = re.findall(r'data-order="([^"]+)"', html)
    assert card_ids(html)[0] == parked[-1].pk
    assert orders == sorted(orders) and len(set(orders)) == PAGE_SIZE


@pytest.mark.parametrize("cursor", ["", "nonsense", "W10", "WyIyMDI2Il0", "x" * 5000, "é"])
@pytest.mark.parametrize("htmx", [False, True])
def test_a_cursor_the_inbox_did_not_give_is_refused_naming_it(
    rita: Client, parked: list[HumanTask], cursor: str, htmx: bool
) -> None:
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}

    response = rita.get("/inbox/", {"cursor": cursor}, **headers)

    assert response.status_code == 400
    if not htmx:
        assert "cursor: this link does not name a place in your inbox." in response.content.decode()


def test_the_inbox_reads_as_many_queries_for_many_tasks_as_for_a_few(
    rita: Client, published: Recipe, author: Any, reviewers: Group
) -> None:
    park_runs(published, author, reviewers, 3)
    rita.get("/inbox/")  # the session and the like, read once
    with CaptureQueriesContext(connection) as few:
        rita.get("/inbox/")
    park_runs(published, author, reviewers, 3 * PAGE_SIZE)

    with CaptureQueriesContext(connection) as many:
        response = rita.get("/inbox/")

    assert len(card_ids(response.content.decode())) == PAGE_SIZE
    assert len(many) == len(few)


def test_a_question_that_includes_the_material_shows_it_once(
    rita: Client, published: Recipe, author: Any, reviewers: Group
) -> None:
    draft = "The storm asked for tea."
    [task] = park_runs(published, author, reviewers, 1, material=draft)
    HumanTask.objects.filter(pk=task.pk).update(question=f"Is this good?\n\n{draft}")

    html = rita.get("/inbox/").content.decode()

    assert html.count(draft) == 2  # the question, and the row's snippet (data-snippet)
    assert f'data-snippet="{draft}"' in html
    assert "The text to review is in the question." in html
    assert "To review <span" not in html


def test_the_comment_is_said_to_become_the_feedback_of_the_next_step(
    rita: Client, task: HumanTask
) -> None:
    html = rita.get("/inbox/").content.decode()
    refused = decide(rita, task, "revise").content.decode()

    reaches = "the comment becomes the {feedback} of the step the run goes to next"
    assert reaches in html and reaches in refused
