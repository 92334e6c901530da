"""Recording a run's events: numbered in its log, pushed to its groups only after commit."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from runner import events
from runner.models import Run
from runner.publisher import publisher
from runner.status import RunStatus
from workflows.models import Recipe

pytestmark = pytest.mark.django_db


@pytest.fixture
def pushed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """The (group, message) pairs sent to the channel layer."""
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(publisher, "send", lambda group, message: sent.append((group, message)))
    return sent


@pytest.fixture
def run(story_recipe: Recipe, owner: Any) -> Run:
    return Run.objects.create(
        recipe=story_recipe, version=story_recipe.latest_version, created_by=owner, event_seq=2
    )


def started(seq: int) -> events.Event:
    return events.step_started(
        seq=seq, step="write", name="Write", kind="llm", actor="writer", attempt=1
    )


def test_events_are_numbered_after_the_runs_last_and_pushed_once_committed(
    run: Run, pushed: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        rows = events.record(run, [started(1), started(2)])
        run.save(update_fields=["event_seq"])
        assert pushed == []

    assert [row.seq for row in rows] == [3, 4]
    assert run.event_seq == 4
    assert list(run.events.values_list("seq", "type")) == [(3, "step.started"), (4, "step.started")]
    assert pushed == [
        (
            f"run-{run.pk}",
            {
                "type": "run.events",
                "run": run.pk,
                "events": [events.serialize_event(r) for r in rows],
            },
        )
    ]


def test_a_rolled_back_transaction_stores_and_pushes_nothing(
    run: Run, pushed: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    with (
        django_capture_on_commit_callbacks(execute=True),
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        events.record(run, [started(1)])
        raise RuntimeError("the step's commit failed")

    assert not run.events.exists()
    assert pushed == []


def test_a_status_event_also_tells_the_owners_run_list(
    run: Run, pushed: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        events.append(run.pk, run.created_by_id, 0, [events.run_started(), started(1)])

    assert pushed[1] == (
        f"runs-user-{run.created_by_id}",
        {"type": "run.status", "run": run.pk, "status": RunStatus.RUNNING},
    )


def test_a_streamed_token_is_pushed_at_once_and_never_stored(run: Run, pushed: list[Any]) -> None:
    events.push_token(run.pk, 1, "Once upon", 0)

    assert pushed == [
        (
            f"run-{run.pk}",
            {
                "type": "run.token",
                "event": {
                    "type": "step.token",
                    "data": {"seq": 1, "text": "Once upon", "offset": 0},
                },
            },
        )
    ]
    assert not run.events.exists()


def test_a_task_change_reaches_each_group_once_after_commit(
    pushed: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    task = {"id": 7}
    with django_capture_on_commit_callbacks(execute=True):
        events.push_task_change([2, 1, 2], "created", task)
        assert pushed == []

    assert pushed == [
        ("reviews-1", {"type": "task.changed", "kind": "created", "task": task}),
        ("reviews-2", {"type": "task.changed", "kind": "created", "task": task}),
    ]
