"""Claims on human tasks ("I am on it"), the services and the API; the tasks API's filters."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from runner import human
from runner.models import HumanTask
from runner.status import TaskStatus
from tests.factories import GroupFactory, UserFactory
from tests.runner.conftest import story_document
from tests.runner.open_tasks import park_runs
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

pytestmark = pytest.mark.django_db


@pytest.fixture
def tasks(story_recipe: Recipe, owner: Any, editors: Group) -> list[HumanTask]:
    return park_runs(story_recipe, owner, editors, 3)


@pytest.fixture
def colleague(editors: Group) -> Any:
    user = UserFactory(username="carl")
    user.groups.add(editors)
    return user


def client(user: Any) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


# --- the services ------------------------------------------------------------------------------


def test_it_claims_an_open_task_for_the_reviewer(tasks: list[HumanTask], reviewer: Any) -> None:
    claimed = human.task_claim(task_id=tasks[0].pk, user=reviewer)

    tasks[0].refresh_from_db()
    assert claimed.claimed_by == reviewer == tasks[0].claimed_by
    assert tasks[0].claimed_at is not None


def test_claiming_ones_own_claim_again_changes_nothing(
    tasks: list[HumanTask], reviewer: Any, django_capture_on_commit_callbacks: Any
) -> None:
    first = human.task_claim(task_id=tasks[0].pk, user=reviewer)

    with django_capture_on_commit_callbacks() as pushes:
        again = human.task_claim(task_id=tasks[0].pk, user=reviewer)

    assert again.claimed_at == first.claimed_at
    assert pushes == []


def test_it_refuses_a_claim_on_a_task_another_reviewer_is_on(
    tasks: list[HumanTask], reviewer: Any, colleague: Any
) -> None:
    human.task_claim(task_id=tasks[0].pk, user=reviewer)

    with pytest.raises(human.ClaimedByAnother, match=r"^rita is on this task since \d\d:\d\d\.$"):
        human.task_claim(task_id=tasks[0].pk, user=colleague)
    with pytest.raises(human.ClaimedByAnother):
        human.task_unclaim(task_id=tasks[0].pk, user=colleague)
    tasks[0].refresh_from_db()
    assert tasks[0].claimed_by == reviewer


def test_letting_go_frees_the_task_for_another(
    tasks: list[HumanTask], reviewer: Any, colleague: Any
) -> None:
    human.task_claim(task_id=tasks[0].pk, user=reviewer)

    released = human.task_unclaim(task_id=tasks[0].pk, user=reviewer)
    taken = human.task_claim(task_id=tasks[0].pk, user=colleague)

    assert (released.claimed_by, released.claimed_at) == (None, None)
    assert taken.claimed_by == colleague


def test_letting_go_of_an_unclaimed_task_changes_nothing(
    tasks: list[HumanTask], reviewer: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks() as pushes:
        task = human.task_unclaim(task_id=tasks[0].pk, user=reviewer)

    assert task.claimed_by is None
    assert pushes == []


def test_a_claim_and_a_release_are_pushed_to_the_group_after_commit(
    tasks: list[HumanTask], reviewer: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks() as pushes:
        human.task_claim(task_id=tasks[0].pk, user=reviewer)
        human.task_unclaim(task_id=tasks[0].pk, user=reviewer)

    assert len(pushes) == 2


@pytest.mark.parametrize("change", [human.task_claim, human.task_unclaim])
def test_a_closed_task_cannot_be_claimed_nor_let_go(
    tasks: list[HumanTask], reviewer: Any, change: Any
) -> None:
    HumanTask.objects.filter(pk=tasks[0].pk).update(status=TaskStatus.DECIDED)

    with pytest.raises(human.TaskClosed, match="decided already"):
        change(task_id=tasks[0].pk, user=reviewer)


@pytest.mark.parametrize("change", [human.task_claim, human.task_unclaim])
def test_someone_outside_the_group_cannot_claim(tasks: list[HumanTask], change: Any) -> None:
    outsider = UserFactory(username="otto")

    with pytest.raises(human.NotInGroup):
        change(task_id=tasks[0].pk, user=outsider)
    tasks[0].refresh_from_db()
    assert tasks[0].claimed_by is None


def test_a_claimed_task_may_still_be_decided_by_another_reviewer(
    tasks: list[HumanTask], reviewer: Any, colleague: Any
) -> None:
    human.task_claim(task_id=tasks[0].pk, user=reviewer)

    decided = human.task_decide(task_id=tasks[0].pk, user=colleague, decision="approve")

    assert (decided.status, decided.decided_by) == (TaskStatus.DECIDED, colleague)


def test_escalation_drops_the_claim_of_the_old_groups_reviewer(
    tasks: list[HumanTask], reviewer: Any
) -> None:
    chiefs = GroupFactory(name="chiefs")
    human.task_claim(task_id=tasks[0].pk, user=reviewer)
    HumanTask.objects.filter(pk=tasks[0].pk).update(
        escalation_group=chiefs, due_at=timezone.now() - timedelta(seconds=1)
    )

    human.tasks_expire()

    tasks[0].refresh_from_db()
    assert tasks[0].group == chiefs
    assert (tasks[0].claimed_by, tasks[0].claimed_at) == (None, None)


@pytest.mark.django_db(transaction=True)
def test_of_two_reviewers_claiming_at_once_one_wins(
    tasks: list[HumanTask], reviewer: Any, colleague: Any
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("a race of two connections needs PostgreSQL (DATABASE_URL)")
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def claim(user: Any) -> None:
        barrier.wait()
        try:
            human.task_claim(task_id=tasks[0].pk, user=user)
            outcomes[user.username] = "claimed"
        except human.ClaimedByAnother:
            outcomes[user.username] = "refused"
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(u,)) for u in (reviewer, colleague)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes.values()) == ["claimed", "refused"]
    tasks[0].refresh_from_db()
    assert outcomes[tasks[0].claimed_by.username] == "claimed"


# --- the API -----------------------------------------------------------------------------------


def test_the_api_claims_and_lets_go(tasks: list[HumanTask], reviewer: Any) -> None:
    api = client(reviewer)

    claimed = api.post(f"/api/tasks/{tasks[0].pk}/claim")
    listed = api.get("/api/tasks/")
    released = api.post(f"/api/tasks/{tasks[0].pk}/unclaim")

    assert claimed.status_code == 200, claimed.content
    assert claimed.json()["claimed_by"] == "rita" and claimed.json()["claimed_at"]
    assert [t["claimed_by"] for t in listed.json()] == ["rita", None, None]
    assert released.status_code == 200
    assert (released.json()["claimed_by"], released.json()["claimed_at"]) == (None, None)


def test_the_api_answers_409_when_another_reviewer_is_on_it(
    tasks: list[HumanTask], reviewer: Any, colleague: Any
) -> None:
    client(reviewer).post(f"/api/tasks/{tasks[0].pk}/claim")

    response = client(colleague).post(f"/api/tasks/{tasks[0].pk}/claim")

    assert response.status_code == 409
    assert response.json()["errors"][0].startswith("rita is on this task since")


def test_the_api_answers_409_for_a_closed_task(tasks: list[HumanTask], reviewer: Any) -> None:
    HumanTask.objects.filter(pk=tasks[0].pk).update(status=TaskStatus.TIMED_OUT)

    response = client(reviewer).post(f"/api/tasks/{tasks[0].pk}/claim")

    assert response.status_code == 409
    assert response.json() == {"errors": ["This task is timed out already."]}


@pytest.mark.parametrize("action", ["claim", "unclaim"])
def test_the_api_refuses_someone_outside_the_group(tasks: list[HumanTask], action: str) -> None:
    outsider = UserFactory(username="otto")

    response = client(outsider).post(f"/api/tasks/{tasks[0].pk}/{action}")
    missing = client(outsider).post(f"/api/tasks/999999/{action}")

    assert response.status_code == 403
    assert missing.status_code == 404
    assert APIClient().post(f"/api/tasks/{tasks[0].pk}/{action}").status_code in (401, 403)


def test_a_repeated_claim_with_its_idempotency_key_gets_the_first_answer(
    tasks: list[HumanTask], reviewer: Any
) -> None:
    api = client(reviewer)
    headers = {"Idempotency-Key": "claim-1"}

    first = api.post(f"/api/tasks/{tasks[0].pk}/claim", headers=headers)
    api.post(f"/api/tasks/{tasks[0].pk}/unclaim")
    again = api.post(f"/api/tasks/{tasks[0].pk}/claim", headers=headers)

    assert again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    tasks[0].refresh_from_db()
    assert tasks[0].claimed_by is None  # the repeat did nothing


def test_the_schema_documents_claims_and_the_task_filters(reviewer: Any) -> None:
    response = client(reviewer).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    schema = response.json()

    for action in ("claim", "unclaim"):
        operation = schema["paths"][f"/api/tasks/{{task_id}}/{action}/"]["post"]
        assert {"200", "403", "404", "409"} <= set(operation["responses"])
    listing = schema["paths"]["/api/tasks/"]["get"]
    names = {p["name"] for p in listing["parameters"]}
    assert {"recipe", "group", "due", "q", "sort", "cursor"} <= names
    task = schema["components"]["schemas"]["TaskOutput"]["properties"]
    assert {"claimed_by", "claimed_at"} <= set(task)


# --- the tasks API's filters -------------------------------------------------------------------


@pytest.fixture
def other_recipe(owner: Any, editors: Group, story_recipe: Recipe) -> Recipe:
    document = {**story_document(), "slug": "fables", "name": "Fables of the sea"}
    recipe = recipe_import(user=owner, data=document).recipe
    recipe_publish(recipe=recipe, user=owner)
    return recipe


def ids(response: Any) -> list[int]:
    assert response.status_code == 200, response.content
    return [task["id"] for task in response.json()]


def test_the_tasks_api_filters_sorts_and_searches(
    tasks: list[HumanTask], other_recipe: Recipe, owner: Any, editors: Group, reviewer: Any
) -> None:
    lawyers = GroupFactory(name="lawyers")
    reviewer.groups.add(lawyers)
    fable = park_runs(other_recipe, owner, lawyers, 1, material="A whale sang to a gull.")[0]
    now = timezone.now()
    HumanTask.objects.filter(pk=tasks[0].pk).update(due_at=now - timedelta(minutes=1))
    HumanTask.objects.filter(pk=tasks[1].pk).update(due_at=now + timedelta(minutes=30))
    HumanTask.objects.filter(pk=fable.pk).update(due_at=now + timedelta(days=1))
    api = client(reviewer)

    assert ids(api.get("/api/tasks/", {"recipe": "fables"})) == [fable.pk]
    assert ids(api.get("/api/tasks/", {"group": "lawyers"})) == [fable.pk]
    assert ids(api.get("/api/tasks/", {"group": "no-such-group"})) == []
    assert ids(api.get("/api/tasks/", {"due": "overdue"})) == [tasks[0].pk]
    assert ids(api.get("/api/tasks/", {"due": "soon"})) == [tasks[1].pk]
    assert ids(api.get("/api/tasks/", {"due": "later"})) == [fable.pk]
    assert ids(api.get("/api/tasks/", {"due": "none"})) == [tasks[2].pk]
    assert ids(api.get("/api/tasks/", {"q": "WHALE"})) == [fable.pk]
    assert ids(api.get("/api/tasks/", {"sort": "newest"})) == [
        fable.pk,
        *[t.pk for t in tasks][::-1],
    ]
    assert ids(api.get("/api/tasks/", {"sort": "due"})) == [tasks[0].pk, tasks[1].pk, fable.pk]


def test_the_tasks_api_pages_a_sorted_view_by_cursor(
    story_recipe: Recipe, owner: Any, editors: Group, reviewer: Any
) -> None:
    parked = park_runs(story_recipe, owner, editors, 5)
    api = client(reviewer)

    first = api.get("/api/tasks/", {"sort": "newest", "limit": 3})
    link = first.headers["Link"]
    second = api.get(link[1 : link.index(">")])

    assert "sort=newest" in link
    assert ids(first) + ids(second) == [t.pk for t in parked][::-1]


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"due": "tomorrow"}, "due: one of overdue, soon, later, none"),
        ({"sort": "random"}, "sort: one of oldest, newest, due"),
        ({"q": "x" * 201}, "q: at most 200 characters"),
        ({"q": "a\x00b"}, "q: contains a NUL character"),
    ],
)
def test_the_tasks_api_refuses_a_filter_it_cannot_read_naming_it(
    tasks: list[HumanTask], reviewer: Any, params: dict[str, str], error: str
) -> None:
    response = client(reviewer).get("/api/tasks/", params)

    assert response.status_code == 400
    assert error in response.json()["errors"]
