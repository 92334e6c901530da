"""/ws/reviews/ with many open tasks: the count and the first page, live counts, a cheap catch-up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group
from django.db import transaction

from runner import consumers, event_schema, events, human
from runner.consumers import REVIEWS_FIRST_PAGE
from runner.models import HumanTask
from runner.status import TaskStatus
from tests.factories import UserFactory
from tests.runner.open_tasks import park_runs
from tests.runner.test_consumers import connect
from workflows.models import Recipe

pytestmark = pytest.mark.django_db(transaction=True)

MORE_THAN_A_PAGE = REVIEWS_FIRST_PAGE + 5


@pytest.fixture(autouse=True)
async def fresh_channel_layer() -> AsyncIterator[None]:
    layer = get_channel_layer()
    await layer.flush()
    yield
    await layer.flush()


@pytest.fixture
def parked(story_recipe: Recipe, owner: Any, editors: Group) -> list[HumanTask]:
    return park_runs(story_recipe, owner, editors, MORE_THAN_A_PAGE)


async def open_inbox(user: Any) -> tuple[WebsocketCommunicator, dict[str, Any]]:
    """Connect to /ws/reviews/ as `user`; return the socket and its first message."""
    communicator, connected, _ = await connect("/ws/reviews/", user)
    assert connected
    return communicator, await communicator.receive_json_from(timeout=5)


def open_one(recipe: Recipe, owner: Any, group: Group, *, push: bool = True) -> HumanTask:
    """Park one more run on a human step, and tell its group the way the runner does."""
    with transaction.atomic():
        task = park_runs(recipe, owner, group, 1)[0]
        if push:
            events.push_task_change([group.pk], "created", events.task_payload(task))
    return task


def close(task: HumanTask, *, push: bool = True) -> None:
    """Decide the task without a reviewer (as a script would); tell its group unless not `push`."""
    with transaction.atomic():
        HumanTask.objects.filter(pk=task.pk).update(status=TaskStatus.DECIDED, decision="approve")
        task.refresh_from_db()
        if push:
            events.push_task_change([task.group_id], "closed", events.task_payload(task))


def count_calls(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Count the calls of `runner.consumers.<name>` from now on."""
    calls: list[int] = []
    original = getattr(consumers, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(consumers, name, counted)
    return calls


async def test_the_first_message_is_the_open_count_and_the_oldest_page(
    parked: list[HumanTask], reviewer: Any
) -> None:
    # The inbox's order is by creation, then id: an older task comes first whatever its id.
    newest = parked[-1]
    await sync_to_async(HumanTask.objects.filter(pk=newest.pk).update)(
        created_at=parked[0].created_at - timedelta(minutes=1)
    )

    communicator, snapshot = await open_inbox(reviewer)

    expected = [newest.pk] + [task.pk for task in parked[: REVIEWS_FIRST_PAGE - 1]]
    assert (snapshot["type"], snapshot["count"]) == ("tasks", MORE_THAN_A_PAGE)
    assert [task["id"] for task in snapshot["tasks"]] == expected
    assert snapshot["tasks"][0]["question"] == newest.question
    await communicator.disconnect()


async def test_each_change_carries_the_open_count_after_it(
    parked: list[HumanTask], story_recipe: Recipe, owner: Any, editors: Group, reviewer: Any
) -> None:
    communicator, _ = await open_inbox(reviewer)

    created = await sync_to_async(open_one)(story_recipe, owner, editors)
    first = await communicator.receive_json_from(timeout=5)
    await sync_to_async(close)(parked[3])
    second = await communicator.receive_json_from(timeout=5)
    await sync_to_async(close)(created)
    third = await communicator.receive_json_from(timeout=5)

    assert (first["kind"], first["task"]["id"], first["count"]) == (
        "created",
        created.pk,
        MORE_THAN_A_PAGE + 1,
    )
    assert (second["kind"], second["task"]["id"], second["count"]) == (
        "closed",
        parked[3].pk,
        MORE_THAN_A_PAGE,
    )
    assert (third["kind"], third["count"]) == ("closed", MORE_THAN_A_PAGE - 1)
    await communicator.disconnect()


async def test_a_change_heard_twice_leaves_the_count_exact(
    parked: list[HumanTask], editors: Group, reviewer: Any
) -> None:
    # A task opened between joining the group and reading the snapshot is in both.
    communicator, snapshot = await open_inbox(reviewer)
    task = parked[0]
    payload = await sync_to_async(events.task_payload)(task)

    await get_channel_layer().group_send(
        events.reviews_group(editors.pk),
        {"type": "task.changed", "kind": "created", "task": payload},
    )

    again = await communicator.receive_json_from(timeout=5)
    assert again["count"] == snapshot["count"] == MORE_THAN_A_PAGE
    await communicator.disconnect()


async def test_the_catch_up_sends_nothing_while_nothing_changed_and_reads_no_tasks(
    parked: list[HumanTask],
    story_recipe: Recipe,
    owner: Any,
    editors: Group,
    reviewer: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Rounds far apart next to a push's way from the commit to the socket, even on a busy host.
    monkeypatch.setattr(consumers, "CATCH_UP_INTERVAL_S", 0.2)
    task_reads = count_calls(monkeypatch, "tasks_for_reviewer")
    rounds = count_calls(monkeypatch, "_open_task_fingerprints")
    communicator, _ = await open_inbox(reviewer)

    # A change whose push arrives is not sent again by the rounds after it either.
    await sync_to_async(open_one)(story_recipe, owner, editors)
    assert (await communicator.receive_json_from(timeout=5))["type"] == "task"

    assert await communicator.receive_nothing(timeout=1.2)
    assert len(rounds) >= 3
    assert len(task_reads) == 1  # the first message's page; the rounds read fingerprints only
    await communicator.disconnect()


async def test_the_catch_up_resends_the_snapshot_when_tasks_changed_unheard(
    parked: list[HumanTask],
    story_recipe: Recipe,
    owner: Any,
    editors: Group,
    reviewer: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(consumers, "CATCH_UP_INTERVAL_S", 0.1)
    communicator, _ = await open_inbox(reviewer)

    # One task opens and one closes, and neither push arrives: the count is the same.
    def swap_unheard() -> HumanTask:
        close(parked[0], push=False)
        return open_one(story_recipe, owner, editors, push=False)

    opened = await sync_to_async(swap_unheard)()

    again = await communicator.receive_json_from(timeout=5)
    assert (again["type"], again["count"]) == ("tasks", MORE_THAN_A_PAGE)
    assert [task["id"] for task in again["tasks"]] == [
        task.pk for task in parked[1 : REVIEWS_FIRST_PAGE + 1]
    ]
    assert opened.pk not in {task["id"] for task in again["tasks"]}  # it is the newest
    assert await communicator.receive_nothing(timeout=0.5)  # once caught up, nothing more
    await communicator.disconnect()


async def test_the_inboxes_of_a_group_share_one_count_query_per_change(
    parked: list[HumanTask],
    story_recipe: Recipe,
    owner: Any,
    editors: Group,
    reviewer: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(consumers, "CATCH_UP_INTERVAL_S", 60)  # no rounds meanwhile

    def colleague(name: str) -> Any:
        user = UserFactory(username=name)
        user.groups.add(editors)
        return user

    users = [reviewer] + [await sync_to_async(colleague)(f"carl{i}") for i in range(4)]
    inboxes = [(await open_inbox(user))[0] for user in users]
    queries = count_calls(monkeypatch, "_open_task_fingerprints")

    await sync_to_async(close)(parked[0])
    received = await asyncio.gather(*(inbox.receive_json_from(timeout=5) for inbox in inboxes))

    assert [message["count"] for message in received] == [MORE_THAN_A_PAGE - 1] * len(users)
    assert len(queries) == 1
    for inbox in inboxes:
        await inbox.disconnect()


async def test_a_lost_change_is_caught_up_though_later_changes_are_heard(
    parked: list[HumanTask],
    story_recipe: Recipe,
    owner: Any,
    editors: Group,
    reviewer: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(consumers, "CATCH_UP_INTERVAL_S", 0.1)
    communicator, _ = await open_inbox(reviewer)

    await sync_to_async(close)(parked[0], push=False)  # Redis was away
    await sync_to_async(open_one)(story_recipe, owner, editors)  # and is back
    heard = await communicator.receive_json_from(timeout=5)
    again = await communicator.receive_json_from(timeout=5)

    assert (heard["type"], heard["count"]) == ("task", MORE_THAN_A_PAGE)
    assert (again["type"], again["count"]) == ("tasks", MORE_THAN_A_PAGE)
    assert parked[0].pk not in {task["id"] for task in again["tasks"]}
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()


# --- the review queue: claims and decisions seen live by the group's other reviewers -----------


@pytest.fixture
def colleague(editors: Group) -> Any:
    user = UserFactory(username="carl")
    user.groups.add(editors)
    return user


async def test_a_claim_is_seen_live_by_another_reviewer_and_so_is_letting_go(
    parked: list[HumanTask], reviewer: Any, colleague: Any
) -> None:
    communicator, _ = await open_inbox(colleague)
    task = parked[1]

    await sync_to_async(human.task_claim)(task_id=task.pk, user=reviewer)
    claimed = await communicator.receive_json_from(timeout=5)
    await sync_to_async(human.task_unclaim)(task_id=task.pk, user=reviewer)
    let_go = await communicator.receive_json_from(timeout=5)

    assert (claimed["type"], claimed["kind"], claimed["task"]["id"]) == ("task", "claimed", task.pk)
    assert claimed["task"]["claimed_by"] == "rita" and claimed["task"]["claimed_at"]
    assert claimed["count"] == MORE_THAN_A_PAGE  # a claim opens or closes nothing
    assert (let_go["kind"], let_go["task"]["claimed_by"], let_go["task"]["claimed_at"]) == (
        "claimed",
        None,
        None,
    )
    for message in (claimed, let_go):
        assert set(message["task"]) == set(event_schema.TASK)
    await communicator.disconnect()


async def test_a_claim_reaches_the_snapshot_of_an_inbox_opened_later(
    parked: list[HumanTask], reviewer: Any, colleague: Any
) -> None:
    await sync_to_async(human.task_claim)(task_id=parked[0].pk, user=reviewer)

    communicator, snapshot = await open_inbox(colleague)

    assert snapshot["tasks"][0]["claimed_by"] == "rita"
    assert snapshot["tasks"][1]["claimed_by"] is None
    await communicator.disconnect()


async def test_a_task_decided_by_one_reviewer_leaves_another_reviewers_list(
    parked: list[HumanTask], reviewer: Any, colleague: Any
) -> None:
    communicator, _ = await open_inbox(colleague)
    task = parked[2]

    await sync_to_async(human.task_decide)(task_id=task.pk, user=reviewer, decision="approve")
    message = await communicator.receive_json_from(timeout=5)

    assert (message["kind"], message["task"]["id"], message["count"]) == (
        "closed",
        task.pk,
        MORE_THAN_A_PAGE - 1,
    )
    assert (message["task"]["status"], message["task"]["decided_by"]) == ("decided", "rita")
    await communicator.disconnect()
