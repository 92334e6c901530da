"""Starting many runs in one request: `POST /api/recipes/{slug}/runs/batch`."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from runner.models import Run, RunEvent
from runner.status import RunStatus
from tests.conftest import api_client
from tests.runner.conftest import wait_for
from workflows.models import Recipe

pytestmark = pytest.mark.django_db(transaction=True)

BATCH = "/api/recipes/story/runs/batch"


def test_a_batch_starts_every_run_in_order_and_each_runs_to_its_end(
    worker: Any, story_recipe: Recipe, owner: Any
) -> None:
    topics = ["owls", "tides", "lamps"]
    body = {"runs": [{"inputs": {"topic": topic}} for topic in topics]}

    answer = api_client(owner).post(BATCH, body, format="json")

    assert answer.status_code == 201, answer.content
    started = answer.json()["runs"]
    assert [run["status"] for run in started] == ["queued"] * 3
    runs = [Run.objects.get(pk=run["id"]) for run in started]
    assert [run.inputs["topic"] for run in runs] == topics
    for run in runs:
        finished = wait_for(run, RunStatus.SUCCEEDED)
        assert finished.steps.get().prompt == f"Write a story about {run.inputs['topic']}"
        types = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("type", "seq"))
        assert types[0] == ("run.queued", 1) and types[-1][0] == "run.finished"
        assert [seq for _, seq in types] == list(range(1, len(types) + 1))


def test_one_bad_item_refuses_the_whole_batch_naming_every_item_at_fault(
    story_recipe: Recipe, owner: Any
) -> None:
    body = {
        "runs": [
            {"inputs": {"topic": "owls"}},
            {"inputs": {}},
            {"inputs": {"topic": "x"}, "script": {"ghost": ["boo"]}},
        ]
    }

    answer = api_client(owner).post(BATCH, body, format="json")

    assert answer.status_code == 400
    errors = answer.json()["errors"]
    assert any(e.startswith("runs[1].inputs.topic: required") for e in errors), errors
    assert any(e.startswith("runs[2].script.ghost: not an actor alias") for e in errors), errors
    assert not any(e.startswith("runs[0]") for e in errors)
    assert Run.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"runs": []}, "runs: This list may not be empty."),
        (
            {"runs": [{"inputs": {"topic": "a"}}] * 4},
            "runs: Ensure this field has no more than 3 elements.",
        ),
        ({"runs": "owls"}, "runs: Expected a list of items"),
        ({"runs": [{"inputs": "owls"}]}, "runs[0].inputs: must be an object"),
        ({}, "runs: This field is required."),
        ({"runs": [{"inputs": {"topic": "a"}}], "version": 0}, "version: Ensure this value"),
    ],
)
@override_settings(RUN_BATCH_MAX_RUNS=3)
def test_a_batch_that_is_not_a_list_of_runs_within_the_limit_is_a_400(
    story_recipe: Recipe, owner: Any, body: dict[str, Any], error: str
) -> None:
    answer = api_client(owner).post(BATCH, body, format="json")

    assert answer.status_code == 400, answer.content
    assert any(e.startswith(error) for e in answer.json()["errors"]), answer.json()
    assert Run.objects.count() == 0


def test_a_batch_of_a_version_that_does_not_exist_is_a_409(
    story_recipe: Recipe, owner: Any
) -> None:
    body = {"runs": [{"inputs": {"topic": "a"}}, {"inputs": {"topic": "b"}}], "version": 7}

    answer = api_client(owner).post(BATCH, body, format="json")

    assert answer.status_code == 409
    assert answer.json()["errors"] == ["version: 'story' has no version 7"]
    assert Run.objects.count() == 0


def test_a_batch_on_a_recipe_the_caller_may_not_see_is_a_404_and_starts_nothing(
    story_recipe: Recipe, reviewer: Any
) -> None:
    body = {"runs": [{"inputs": {"topic": "a"}}]}

    assert api_client(reviewer).post(BATCH, body, format="json").status_code == 404
    assert APIClient().post(BATCH, body, format="json").status_code in {401, 403}
    assert Run.objects.count() == 0


def test_a_batch_sent_twice_with_one_idempotency_key_starts_its_runs_once(
    story_recipe: Recipe, owner: Any
) -> None:
    api = api_client(owner)
    body = {"runs": [{"inputs": {"topic": "a"}}, {"inputs": {"topic": "b"}}]}

    first = api.post(BATCH, body, format="json", HTTP_IDEMPOTENCY_KEY="nightly-42")
    again = api.post(BATCH, body, format="json", HTTP_IDEMPOTENCY_KEY="nightly-42")

    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert Run.objects.count() == 2
