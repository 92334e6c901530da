"""Runs executed by a real Celery worker, through every path of a branching recipe."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from runner import advance, services
from runner.human import tasks_expire
from runner.inputs import InputsInvalid, check_inputs
from runner.models import HumanTask, Run, RunEvent, StepRun
from runner.status import RunStatus, TaskStatus
from tests.runner.conftest import STORY, wait_for
from workflows.models import Recipe

pytestmark = pytest.mark.django_db(transaction=True)


def start(
    recipe: Recipe, owner: Any, script: dict[str, Any] | None = None, topic: str = "sea"
) -> Run:
    return services.run_start(user=owner, recipe=recipe, inputs={"topic": topic}, script=script)


def path(run: Run) -> list[str]:
    return list(run.steps.order_by("seq").values_list("step_key", flat=True))


def taken(run: Run) -> list[str]:
    return [e.branch for s in run.steps.order_by("seq") for e in s.evaluations.filter(taken=True)]


def test_it_completes_a_run_the_judge_approves(
    worker: Any, story_recipe: Recipe, owner: Any
) -> None:
    run = wait_for(start(story_recipe, owner), RunStatus.SUCCEEDED)

    assert run.outcome == "approved"
    assert path(run) == ["write"]
    step = run.steps.get()
    assert step.prompt == "Write a story about sea"
    assert step.response == STORY
    reasons = {e.branch: e.reason for e in step.evaluations.all()}
    assert set(reasons) == {"too_short", "broken", "great"}
    assert "judge scored 9" in reasons["great"]
    assert taken(run) == ["great"]


def test_it_repeats_a_short_answer_with_the_retry_suffix(
    worker: Any, story_recipe: Recipe, owner: Any
) -> None:
    run = start(story_recipe, owner, script={"writer": ["Too short.", STORY], "judge": ["9"]})
    run = wait_for(run, RunStatus.SUCCEEDED)

    first, second = run.steps.order_by("seq")
    assert (first.step_key, first.attempt, second.step_key, second.attempt) == (
        "write",
        1,
        "write",
        2,
    )
    assert second.prompt.endswith("Please write a longer story.")
    assert taken(run) == ["too_short", "great"]


def test_it_ends_the_run_on_an_error_pattern(worker: Any, story_recipe: Recipe, owner: Any) -> None:
    script = {"writer": ["The generation failed with an error, sorry about that."]}
    run = wait_for(start(story_recipe, owner, script=script), RunStatus.ENDED)

    assert run.outcome == "ended"
    assert taken(run) == ["broken"]


def test_it_waits_for_a_reviewer_and_resumes_once_on_revise(
    worker: Any, story_recipe: Recipe, owner: Any, reviewer: Any
) -> None:
    script = {
        "writer": [STORY, "A revised story in which a dragon guards the lighthouse."],
        "judge": ["4"],
    }
    run = wait_for(start(story_recipe, owner, script=script), RunStatus.WAITING_HUMAN)
    api = APIClient()
    api.force_authenticate(reviewer)

    tasks = api.get("/api/tasks/").json()
    assert [t["step"] for t in tasks] == ["review"]
    assert tasks[0]["question"].startswith("Is this story good?")
    answer = api.post(
        f"/api/tasks/{tasks[0]['id']}/decide",
        {"decision": "revise", "comment": "add a dragon"},
        format="json",
    )
    assert answer.status_code == 200, answer.content
    again = api.post(f"/api/tasks/{tasks[0]['id']}/decide", {"decision": "approve"}, format="json")
    assert again.status_code == 409

    run = wait_for(run, RunStatus.SUCCEEDED)
    assert path(run) == ["write", "review", "revise"]
    review = run.steps.get(step_key="review")
    assert (review.decision, review.response, review.status) == (
        "revise",
        "add a dragon",
        "decided",
    )
    revised = run.steps.get(step_key="revise").prompt
    # The comment reaches the writer both ways: as the review's response and as {feedback}.
    assert "Editor says: add a dragon" in revised and "Feedback: add a dragon" in revised
    assert StepRun.objects.filter(run=run).count() == 3
    assert api.get("/api/tasks/").json() == []


def test_it_follows_a_scripted_reviewer_in_a_dry_run(
    worker: Any, story_recipe: Recipe, owner: Any
) -> None:
    script = {"writer": [STORY], "judge": ["2"], "editors": ["reject"]}
    run = wait_for(start(story_recipe, owner, script=script), RunStatus.ENDED)

    assert taken(run) == ["to_review", "rejected"]
    assert run.tasks.get().status == TaskStatus.DECIDED


def test_it_times_out_a_task_and_takes_the_timeout_branch(
    worker: Any, story_recipe: Recipe, owner: Any
) -> None:
    run = wait_for(start(story_recipe, owner, script={"judge": ["1"]}), RunStatus.WAITING_HUMAN)

    assert tasks_expire(now=timezone.now() + timedelta(hours=2)) == 1

    run = wait_for(run, RunStatus.ENDED)
    assert run.tasks.get().status == TaskStatus.TIMED_OUT
    assert taken(run) == ["to_review", "no_answer"]


def test_it_refuses_a_decision_from_outside_the_group(
    worker: Any, story_recipe: Recipe, owner: Any
) -> None:
    run = wait_for(start(story_recipe, owner, script={"judge": ["1"]}), RunStatus.WAITING_HUMAN)
    api = APIClient()
    api.force_authenticate(owner)  # the owner is not a reviewer
    task = run.tasks.get()

    answer = api.post(f"/api/tasks/{task.pk}/decide", {"decision": "approve"}, format="json")

    assert answer.status_code == 403
    assert HumanTask.objects.get(pk=task.pk).status == TaskStatus.OPEN


@pytest.mark.parametrize("decision", [1, True, ["approve"]])
def test_it_refuses_a_decision_that_is_no_text(
    worker: Any, story_recipe: Recipe, owner: Any, reviewer: Any, decision: Any
) -> None:
    run = wait_for(start(story_recipe, owner, script={"judge": ["1"]}), RunStatus.WAITING_HUMAN)
    api = APIClient()
    api.force_authenticate(reviewer)
    task = run.tasks.get()

    answer = api.post(f"/api/tasks/{task.pk}/decide", {"decision": decision}, format="json")

    assert answer.status_code == 400
    assert answer.json()["errors"] == ["decision: Not a valid string."]
    assert HumanTask.objects.get(pk=task.pk).status == TaskStatus.OPEN


def test_cancelling_a_waiting_run_closes_its_task(
    worker: Any, story_recipe: Recipe, owner: Any
) -> None:
    run = wait_for(start(story_recipe, owner, script={"judge": ["1"]}), RunStatus.WAITING_HUMAN)
    api = APIClient()
    api.force_authenticate(owner)

    assert api.post(f"/api/runs/{run.pk}/cancel").status_code == 200
    assert api.post(f"/api/runs/{run.pk}/cancel").status_code == 409

    run.refresh_from_db()
    assert (run.status, run.outcome) == ("cancelled", "cancelled")
    assert run.tasks.get().status == TaskStatus.CANCELLED


def test_a_repeated_delivery_changes_nothing(worker: Any, story_recipe: Recipe, owner: Any) -> None:
    run = wait_for(start(story_recipe, owner), RunStatus.SUCCEEDED)
    events_before = RunEvent.objects.filter(run=run).count()

    advance.advance(run.pk)
    advance.advance(run.pk)

    assert StepRun.objects.filter(run=run).count() == 1
    assert RunEvent.objects.filter(run=run).count() == events_before


def test_the_run_api_shows_steps_with_evaluations_and_events(
    worker: Any, story_recipe: Recipe, owner: Any
) -> None:
    api = APIClient()
    api.force_authenticate(owner)
    created = api.post("/api/recipes/story/runs", {"inputs": {"topic": "owls"}}, format="json")
    assert created.status_code == 201, created.content
    run = wait_for(Run.objects.get(pk=created.json()["id"]), RunStatus.SUCCEEDED)

    detail = api.get(f"/api/runs/{run.pk}/").json()
    assert detail["status"] == "succeeded"
    assert detail["steps"][0]["step"] == "write"
    assert [e["taken"] for e in detail["steps"][0]["evaluations"]] == [False, False, True]
    events = api.get(f"/api/runs/{run.pk}/events?after=0").json()
    types = [e["type"] for e in events]
    assert types[0] == "run.queued" and types[-1] == "run.finished"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    later = api.get(f"/api/runs/{run.pk}/events?after=3").json()
    assert [e["seq"] for e in later] == list(range(4, len(events) + 1))
    assert api.get("/api/runs/?status=succeeded&recipe=story").json()[0]["id"] == run.pk


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"inputs": {}}, "inputs.topic: required"),
        ({"inputs": {"topic": 3}}, "inputs.topic: must be a string"),
        ({"inputs": {"topic": "x", "colour": "red"}}, "inputs.colour: not an input of this recipe"),
        (
            {"inputs": {"topic": "x"}, "script": {"ghost": ["boo"]}},
            "script.ghost: not an actor alias",
        ),
        (
            {"inputs": {"topic": "x"}, "script": {"writer": []}},
            "script.writer: must be a non-empty list",
        ),
        ({"inputs": "topic"}, "inputs: must be an object"),
        ({"inputs": None}, "inputs: This field may not be null."),
        (
            {"inputs": {"topic": "x"}, "script": {"editors": ["aprove"]}},
            "script.editors[0]: 'aprove' is not one of",
        ),
    ],
)
def test_it_refuses_bad_run_inputs_with_the_field(
    story_recipe: Recipe, owner: Any, body: dict[str, Any], error: str
) -> None:
    api = APIClient()
    api.force_authenticate(owner)

    answer = api.post("/api/recipes/story/runs", body, format="json")

    assert answer.status_code == 400
    assert any(e.startswith(error) for e in answer.json()["errors"]), answer.json()
    assert Run.objects.count() == 0


def test_another_users_run_is_not_found(
    worker: Any, story_recipe: Recipe, owner: Any, reviewer: Any
) -> None:
    run = wait_for(start(story_recipe, owner), RunStatus.SUCCEEDED)
    api = APIClient()
    api.force_authenticate(reviewer)

    assert api.get(f"/api/runs/{run.pk}/").status_code == 404
    assert api.post(f"/api/runs/{run.pk}/cancel").status_code == 404
    assert api.get(f"/api/runs/{run.pk}/events").status_code == 404
    assert (
        api.post("/api/recipes/story/runs", {"inputs": {"topic": "x"}}, format="json").status_code
        == 404
    )


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_it_refuses_a_number_input_that_is_not_finite(value: float) -> None:
    with pytest.raises(InputsInvalid, match=r"inputs\.n: must be a finite number"):
        check_inputs({"n": {"type": "number"}}, {"n": value})


@pytest.mark.parametrize("status", ["", "done", "SUCCEEDED"])
def test_the_run_list_refuses_a_status_it_does_not_know(
    story_recipe: Recipe, owner: Any, status: str
) -> None:
    api = APIClient()
    api.force_authenticate(owner)

    answer = api.get("/api/runs/", {"status": status})

    assert answer.status_code == 400
    assert answer.json()["errors"][0].startswith("status: one of queued, ")


@pytest.mark.parametrize("after", ["x", "-1", "²", "1.5"])
def test_the_events_api_refuses_an_after_that_is_not_a_whole_number(
    worker: Any, story_recipe: Recipe, owner: Any, after: str
) -> None:
    run = wait_for(start(story_recipe, owner), RunStatus.SUCCEEDED)
    api = APIClient()
    api.force_authenticate(owner)

    answer = api.get(f"/api/runs/{run.pk}/events", {"after": after})

    assert answer.status_code == 400
    assert answer.json()["errors"] == ["after: a whole number"]
