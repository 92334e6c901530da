"""`Idempotency-Key` on run starts and decisions: a repeat gets the first answer, nothing twice."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from runner import idempotency, services
from runner.models import HumanTask, IdempotentRequest, Run, RunEvent
from runner.status import RunStatus
from tests.runner.conftest import STORY, story_document, wait_for
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("runs_settled")]

SCRIPT = {"writer": [STORY], "judge": ["2"]}


def client(user: Any) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def start(api: APIClient, recipe: Recipe, key: str | None, topic: str = "owls") -> Any:
    headers = {} if key is None else {"Idempotency-Key": key}
    return api.post(
        f"/api/recipes/{recipe.slug}/runs",
        {"inputs": {"topic": topic}},
        format="json",
        headers=headers,
    )


def test_a_repeated_run_start_returns_the_first_run_and_starts_no_other(
    story_recipe: Recipe, owner: Any
) -> None:
    api = client(owner)

    first = start(api, story_recipe, "start-7f3a")
    again = start(api, story_recipe, "start-7f3a")

    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Run.objects.count() == 1
    assert RunEvent.objects.filter(type="run.queued").count() == 1


def test_requests_without_a_key_are_not_deduplicated(story_recipe: Recipe, owner: Any) -> None:
    api = client(owner)

    start(api, story_recipe, None)
    start(api, story_recipe, None)

    assert Run.objects.count() == 2


def test_a_key_is_per_user(story_recipe: Recipe, owner: Any, reviewer: Any) -> None:
    story_recipe.shared_with_users.add(reviewer)

    start(client(owner), story_recipe, "same-key")
    start(client(reviewer), story_recipe, "same-key")

    assert Run.objects.count() == 2


def test_it_refuses_a_key_reused_for_another_request(story_recipe: Recipe, owner: Any) -> None:
    api = client(owner)
    start(api, story_recipe, "start-1", topic="owls")

    answer = start(api, story_recipe, "start-1", topic="bats")

    assert answer.status_code == 422
    assert answer.json() == {
        "errors": ["Idempotency-Key: this key was used for a different request"]
    }
    assert Run.objects.count() == 1


@pytest.mark.parametrize("key", ["", "x" * 256, "has space", "tab\there", "é-accent"])
def test_it_refuses_a_malformed_key(story_recipe: Recipe, owner: Any, key: str) -> None:
    answer = start(client(owner), story_recipe, key)

    assert answer.status_code == 400
    assert answer.json()["errors"][0].startswith("Idempotency-Key: ")
    assert Run.objects.count() == 0


def test_a_refused_request_keeps_no_key_so_it_can_be_sent_again(
    story_recipe: Recipe, owner: Any
) -> None:
    draft = recipe_import(user=owner, data={**story_document(), "slug": "draft"}).recipe
    api = client(owner)

    refused = start(api, draft, "start-2")
    recipe_publish(recipe=draft, user=owner)
    accepted = start(api, draft, "start-2")

    assert (refused.status_code, accepted.status_code) == (409, 201)
    assert Run.objects.count() == 1


def test_concurrent_starts_with_one_key_start_one_run(story_recipe: Recipe, owner: Any) -> None:
    answers: list[Any] = []
    barrier = threading.Barrier(4)

    def send() -> None:
        try:
            barrier.wait()
            answers.append(start(client(owner), story_recipe, "start-concurrent"))
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(a.status_code for a in answers) == [201, 201, 201, 201]
    assert len({a.json()["id"] for a in answers}) == 1
    assert Run.objects.count() == 1


def test_a_repeated_decision_returns_the_first_answer(
    worker: Any, story_recipe: Recipe, owner: Any, reviewer: Any
) -> None:
    run = services.run_start(
        user=owner, recipe=story_recipe, inputs={"topic": "owls"}, script=SCRIPT
    )
    task = wait_for(run, RunStatus.WAITING_HUMAN).tasks.get()
    api = client(reviewer)
    decide = f"/api/tasks/{task.pk}/decide"

    first = api.post(
        decide, {"decision": "reject"}, format="json", headers={"Idempotency-Key": "d1"}
    )
    again = api.post(
        decide, {"decision": "reject"}, format="json", headers={"Idempotency-Key": "d1"}
    )
    other = api.post(
        decide, {"decision": "reject"}, format="json", headers={"Idempotency-Key": "d2"}
    )

    assert (first.status_code, again.status_code, other.status_code) == (200, 200, 409)
    assert again.json() == first.json()
    assert HumanTask.objects.get(pk=task.pk).decision == "reject"
    assert wait_for(run, RunStatus.ENDED).status == RunStatus.ENDED
    assert RunEvent.objects.filter(run=run, type="human_task.decided").count() == 1


def test_keys_are_forgotten_after_a_day(story_recipe: Recipe, owner: Any) -> None:
    start(client(owner), story_recipe, "old-key")
    IdempotentRequest.objects.update(created_at=timezone.now() - timedelta(hours=25))

    assert idempotency.forget_old_keys() == 1
    assert start(client(owner), story_recipe, "old-key").status_code == 201
    assert Run.objects.count() == 2
