"""Retries through real runs: a named alternative asked up to `max_retries` times, and a
retry that waits in the queue (`delay_seconds`, `backoff_factor`) while the worker is free."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from runner import advance, maintenance, services, store
from runner.models import Run, RunEvent, StepRun
from runner.status import RunStatus, StepStatus
from tests.factories import ActorFactory
from tests.runner.conftest import STORY, wait_for
from tests.runner.recipes import DEFAULT, branch, drive, publish_document
from workflows.models import Recipe

TIMEOUT = {"type": "execution_timeout", "operator": "equals", "value": True}


def model_timeout(**params: Any) -> dict[str, Any]:
    """The reference design's branch: on a timeout, retry with the alternative actor."""
    return branch(
        "model_timeout",
        5,
        TIMEOUT,
        "@repeat",
        action="RETRY_DIFFERENT_ACTOR",
        params={"max_retries": 2, **params},
    )


def document(slug: str, *branches: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": "branchline.recipe/v1",
        "slug": slug,
        "name": slug,
        "inputs": {"topic": {"type": "string", "required": True}},
        "actors": {"writer": "retry-writer", "backup": "retry-backup", "spare": "retry-spare"},
        "steps": [
            {
                "key": "write",
                "name": "Write",
                "actor": "writer",
                "prompt": "Write about {topic}",
                "branches": [
                    *branches,
                    branch("gave_up", 50, TIMEOUT, "@end", action="ERROR_HANDLER"),
                    branch("done", 999, DEFAULT, "@complete"),
                ],
            }
        ],
    }


def actors(writer: list[str], backup: list[str], spare: list[str] | None = None) -> None:
    ActorFactory(name="retry-writer", config={"replies": writer})
    ActorFactory(name="retry-backup", config={"replies": backup})
    ActorFactory(name="retry-spare", config={"replies": spare or [STORY]})


def attempts(run: Run) -> list[tuple[str, str]]:
    return [(s.actor_alias, s.status) for s in run.steps.order_by("seq")]


@pytest.mark.django_db
def test_a_timeout_takes_model_timeout_with_its_alternative_tried_twice(owner: Any) -> None:
    actors(writer=["@timeout"], backup=["@timeout"])
    recipe = publish_document(owner, document("twice", model_timeout(alternative_actor="backup")))

    run = drive(services.run_start(user=owner, recipe=recipe, inputs={"topic": "owls"}))

    timed_out = StepStatus.TIMED_OUT
    assert attempts(run) == [("writer", timed_out), ("backup", timed_out), ("backup", timed_out)]
    last = run.steps.order_by("seq").last()
    assert last is not None
    reasons = {e.branch: e.reason for e in last.evaluations.all()}
    assert reasons["model_timeout"] == "exhausted after 2 retries"
    assert (run.status, run.outcome) == (RunStatus.ENDED, "error_handled")


@pytest.mark.django_db
def test_a_list_of_alternatives_is_tried_in_order_then_its_last_one_again(owner: Any) -> None:
    actors(writer=["@timeout"], backup=["@timeout"], spare=["@timeout", "@timeout", STORY])
    retry = model_timeout(alternative_actor=["backup", "spare"], max_retries=4)
    recipe = publish_document(owner, document("list", retry))

    run = drive(services.run_start(user=owner, recipe=recipe, inputs={"topic": "owls"}))

    assert [alias for alias, _ in attempts(run)] == ["writer", "backup", "spare", "spare", "spare"]
    assert (run.status, run.steps.order_by("seq").last().response) == (  # type: ignore[union-attr]
        RunStatus.SUCCEEDED,
        STORY,
    )


def delayed(owner: Any) -> Recipe:
    """Two timeouts retried after 1 s, then 2 s; the third attempt answers."""
    actors(writer=["@timeout"], backup=["@timeout", STORY])
    retry = model_timeout(alternative_actor="backup", delay_seconds=1, backoff_factor=2)
    return publish_document(owner, document("delayed", retry))


@pytest.mark.django_db
def test_a_retry_that_waits_is_left_in_the_queue_until_its_time(owner: Any, client: Any) -> None:
    recipe = delayed(owner)
    run = services.run_start(user=owner, recipe=recipe, inputs={"topic": "owls"})

    advance.advance(run.pk, time_slice=60)  # the first attempt times out

    run.refresh_from_db()
    first = run.steps.get()
    wake = datetime.fromisoformat(run.next[store.NOT_BEFORE])
    assert (run.status, run.next["step"], run.next["actor"]) == (
        RunStatus.RUNNING,
        "write",
        "backup",
    )
    assert first.finished_at + timedelta(seconds=1) <= wake  # type: ignore[operator]
    # The reaper counts from the wake time: it does not send the run again meanwhile.
    assert run.enqueued_at == wake and not run.lease_token
    assert maintenance.reap() == 0
    # A message that comes early claims nothing, and tells the reaper the wake time again
    # (a resume or a broker hiccup may have reset it meanwhile).
    store.mark_unsent(run.pk)
    advance.advance(run.pk, time_slice=60)
    assert run.steps.count() == 1
    run.refresh_from_db()
    assert run.enqueued_at == wake and maintenance.reap() == 0

    taken = RunEvent.objects.get(run=run, type="branch.taken").data
    assert taken["delay_s"] == 1.0
    assert datetime.fromisoformat(taken["resume_at"]) == wake
    assert taken["reason"].endswith("; waits 1 s before running the step again")
    evaluation = first.evaluations.get(branch="model_timeout")
    assert evaluation.reason.endswith(f", until {wake.isoformat(timespec='seconds')}")
    # The monitor shows the wait with the evaluation.
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert (
        f"waits 1 s before running the step again, until {wake.isoformat(timespec='seconds')}"
        in page
    )


@pytest.mark.django_db(transaction=True)
def test_retries_wait_in_the_queue_and_the_worker_runs_other_runs_meanwhile(
    owner: Any, worker: Any, runs_settled: None
) -> None:
    """The worker is solo (one task at a time): a run that finishes during the waits ran
    while the delayed run held no worker."""
    recipe = delayed(owner)
    quick = publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": "quick",
            "name": "quick",
            "actors": {"writer": "retry-spare"},
            "steps": [{"key": "say", "name": "Say", "actor": "writer", "prompt": "Hi"}],
        },
    )
    slow = services.run_start(user=owner, recipe=recipe, inputs={"topic": "owls"})
    wait_until_steps(slow, 1)
    other = wait_for(
        services.run_start(user=owner, recipe=quick, inputs={}), RunStatus.SUCCEEDED, timeout=5
    )

    slow = wait_for(slow, RunStatus.SUCCEEDED, timeout=20)

    first, second, third = slow.steps.order_by("seq")
    assert [s.actor_alias for s in (first, second, third)] == ["writer", "backup", "backup"]
    assert second.started_at - first.finished_at >= timedelta(seconds=1)  # type: ignore[operator]
    assert third.started_at - second.finished_at >= timedelta(seconds=2)  # type: ignore[operator]
    # The other run started during the first wait; on a busy machine it may end in the second.
    waits = [(first.finished_at, second.started_at), (second.finished_at, third.started_at)]
    assert any(start < other.finished_at < end for start, end in waits)  # type: ignore[operator]
    delays = [e.data["delay_s"] for e in RunEvent.objects.filter(run=slow, type="branch.taken")]
    assert delays == [1.0, 2.0, 0.0]


def wait_until_steps(run: Run, count: int, timeout: float = 10) -> None:
    deadline = timezone.now() + timedelta(seconds=timeout)
    while StepRun.objects.filter(run=run).count() < count:
        assert timezone.now() < deadline, f"run {run.pk} has not run {count} steps"
        time.sleep(0.02)
