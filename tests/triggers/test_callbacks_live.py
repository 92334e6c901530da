"""Callbacks through real runs and a real Celery worker: a run's events reach a receiver on
loopback that verifies each message with the Standard Webhooks library; a receiver that
answers 500 gets the message again after the backoff; "Send again" sends it again."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from runner import human, services
from runner.models import Run
from runner.status import RunStatus
from tests.conftest import api_client
from tests.factories import UserFactory
from tests.runner.conftest import wait_for
from tests.triggers.receiver import Receiver
from tests.triggers.recipes import EDITORS, STORY, callback, editors, publish
from triggers.callbacks import backoff
from triggers.callbacks.models import CallbackDelivery
from workflows.models import Recipe

pytestmark = pytest.mark.usefixtures("worker", "runs_settled")


def wait_until(check: Callable[[], Any], what: str, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting until {what}")


def delivered(run: Run, event_type: str) -> CallbackDelivery | None:
    return CallbackDelivery.objects.filter(
        run=run, event_type=event_type, status=CallbackDelivery.Status.DELIVERED
    ).first()


def start(owner: Any, recipe: Recipe) -> Run:
    return services.run_start(user=owner, recipe=recipe, inputs={"topic": "the sea"})


def test_a_run_tells_a_receiver_that_verifies_each_message(receiver: Receiver) -> None:
    owner = UserFactory(username="cb-owner")
    reviewer = UserFactory(username="cb-reviewer", groups=[editors()])
    recipe = publish(owner, [callback(receiver.url, "human_task.created", "run.finished")])
    run = wait_for(start(owner, recipe), RunStatus.WAITING_HUMAN)

    wait_until(lambda: delivered(run, "human_task.created"), "the task's message was taken")
    [task_message] = receiver.verified
    task = run.tasks.get()
    assert task_message["type"] == "human_task.created"
    assert task_message["data"]["run"] == run.pk
    assert task_message["data"]["recipe"] == "notify"
    assert task_message["data"]["status"] == RunStatus.WAITING_HUMAN
    assert task_message["data"]["task"]["id"] == task.pk
    assert task_message["data"]["task"]["group"] == EDITORS
    assert (
        STORY in task_message["data"]["task"]["material"] + task_message["data"]["task"]["question"]
    )

    human.task_decide(task_id=task.pk, user=reviewer, decision="approve")
    run = wait_for(run, RunStatus.SUCCEEDED)
    finished = wait_until(lambda: delivered(run, "run.finished"), "run.finished was taken")
    assert [r.refused for r in receiver.received] == ["", ""]
    last = receiver.received[-1]
    assert last.headers["webhook-id"] == str(finished.pk)
    assert last.verified == finished.payload
    assert last.verified["data"] | {"run_url": ""} == {
        "run": run.pk,
        "recipe": "notify",
        "version": 1,
        "status": "succeeded",
        "dry_run": False,
        "seq": finished.event_seq,
        "run_url": "",
        "outcome": "approved",
        "error": "",
        "answer": STORY,
        "answer_step": "write",
    }
    assert last.verified["data"]["run_url"].endswith(f"/runs/{run.pk}/")
    [attempt] = finished.attempt_log.all()
    assert attempt.status_code == 204 and attempt.error == "" and attempt.latency_ms is not None
    assert attempt.next_attempt_at is None


def test_a_receiver_answering_500_gets_the_message_again_after_the_backoff(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real schedule waits 30 s first; the worker's countdown is the same code path.
    monkeypatch.setattr(backoff, "FIRST_RETRY_S", 0.3)
    receiver.statuses = [500, 200]
    owner = UserFactory(username="cb-owner")
    recipe = publish(owner, [callback(receiver.url)], review=False)
    run = wait_for(start(owner, recipe), RunStatus.SUCCEEDED)

    delivery = wait_until(lambda: delivered(run, "run.finished"), "the retry was taken")
    first, second = delivery.attempt_log.all()
    assert (first.status_code, first.error) == (500, "the receiver answered 500")
    assert first.next_attempt_at is not None
    waited = (first.next_attempt_at - first.started_at).total_seconds()
    assert 0.3 <= waited < 5
    assert second.started_at >= first.next_attempt_at
    assert (second.status_code, second.error, second.next_attempt_at) == (200, "", None)
    ids = {r.headers["webhook-id"] for r in receiver.received}
    assert ids == {str(delivery.pk)} and len(receiver.verified) == 2


def test_send_again_sends_the_same_message_once_more(receiver: Receiver) -> None:
    owner = UserFactory(username="cb-owner")
    recipe = publish(owner, [callback(receiver.url)], review=False)
    run = wait_for(start(owner, recipe), RunStatus.SUCCEEDED)
    delivery = wait_until(lambda: delivered(run, "run.finished"), "the message was taken")

    answer = api_client(owner).post(f"/api/runs/{run.pk}/callbacks/{delivery.pk}/resend")
    assert answer.status_code == 202, answer.content
    assert answer.json()["status"] == "pending"
    wait_until(
        lambda: delivered(run, "run.finished") and delivery.attempt_log.count() == 2,
        "the message was sent again",
    )
    again = delivery.attempt_log.get(number=2)
    assert again.manual and again.status_code == 204
    assert receiver.verified == [delivery.payload, delivery.payload]
    assert {r.headers["webhook-id"] for r in receiver.received} == {str(delivery.pk)}
