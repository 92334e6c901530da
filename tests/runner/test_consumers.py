"""The websockets, through the real ASGI application (session cookie, origin check, routing)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.db import transaction
from django.test import Client

from config.asgi import application
from runner import consumers, events
from runner.consumers import RunEventsConsumer
from runner.models import HumanTask, Run, StepRun
from runner.publisher import outbox
from runner.status import Outcome, RunStatus, StepStatus
from runner.steps.session import TokenStreamer
from tests.factories import GroupFactory, UserFactory
from tests.live_server import free_port
from workflows.models import Recipe

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = b"http://localhost"


@pytest.fixture(autouse=True)
async def fresh_channel_layer() -> AsyncIterator[None]:
    layer = get_channel_layer()
    await layer.flush()
    yield
    await layer.flush()


def session_cookie(user: Any) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def connect(
    path: str, user: Any = None, *, origin: bytes = ORIGIN
) -> tuple[WebsocketCommunicator, bool, Any]:
    headers = [(b"origin", origin), (b"host", b"localhost")]
    if user is not None:
        headers.append((b"cookie", await sync_to_async(session_cookie)(user)))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect()
    return communicator, connected, code


async def watch_run(run: Run, user: Any) -> WebsocketCommunicator:
    """Open the run's monitor socket as `user` and wait until its (empty) replay is done."""
    communicator, connected, _ = await connect(f"/ws/runs/{run.pk}/", user)
    assert connected
    assert (await communicator.receive_json_from(timeout=5))["type"] == "replayed"
    return communicator


def new_run(recipe: Recipe, user: Any) -> Run:
    return Run.objects.create(
        recipe=recipe, version=recipe.latest_version, created_by=user, inputs={"topic": "owls"}
    )


def started(seq: int) -> events.Event:
    """The `step.started` event of the run's step number `seq`."""
    return events.step_started(
        seq=seq, step="write", name="Write", kind="llm", actor="writer", attempt=1
    )


def finished(seq: int) -> events.Event:
    """The `step.finished` event of the run's step number `seq`."""
    step_run = StepRun(seq=seq, step_key="write", status=StepStatus.SUCCEEDED, response="Once")
    return events.step_finished(step_run)


RUN_SUCCEEDED = events.run_finished(status=RunStatus.SUCCEEDED, outcome=Outcome.COMPLETED, error="")


def add_events(run_id: int, count: int) -> list[int]:
    """Record `count` steps started on the run the way the runner does; return their seqs."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        rows = events.record(run, [started(run.event_seq + i) for i in range(1, count + 1)])
        run.save(update_fields=["event_seq"])
    return [row.seq for row in rows]


def add_events_unpushed(run_id: int, recorded: list[events.Event]) -> list[dict[str, Any]]:
    """Record events whose pushes never reach the layer (Redis was away, or they are late)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        rows = events.record(run, recorded)
        run.save(update_fields=["event_seq"])
        transaction.get_connection().run_on_commit.clear()
    return [events.serialize_event(row) for row in rows]


async def receive_events(communicator: WebsocketCommunicator, until_seq: int) -> list[int]:
    """Collect event seqs (checking there is nothing else but tokens) up to `until_seq`."""
    seqs: list[int] = []
    while not seqs or seqs[-1] < until_seq:
        message = await communicator.receive_json_from(timeout=5)
        if message["type"] == "events":
            seqs += [e["seq"] for e in message["events"]]
    return seqs


# --- who may connect ---------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/ws/runs/{run}/", "/ws/runs/", "/ws/reviews/"])
async def test_it_refuses_an_anonymous_user(story_recipe: Recipe, owner: Any, path: str) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)

    communicator, connected, _ = await connect(path.format(run=run.pk))

    assert not connected
    await communicator.disconnect()


async def test_it_refuses_a_user_who_may_not_see_the_run(story_recipe: Recipe, owner: Any) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    stranger = await sync_to_async(UserFactory)(username="mallory")

    _, connected, code = await connect(f"/ws/runs/{run.pk}/", stranger)

    assert not connected
    assert code == consumers.CLOSE_FORBIDDEN


async def test_it_refuses_a_run_that_does_not_exist(owner: Any) -> None:
    _, connected, code = await connect("/ws/runs/999999/", owner)

    assert (connected, code) == (False, consumers.CLOSE_FORBIDDEN)


async def test_it_refuses_a_malformed_after(story_recipe: Recipe, owner: Any) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)

    _, connected, code = await connect(f"/ws/runs/{run.pk}/?after=x", owner)

    assert (connected, code) == (False, consumers.CLOSE_BAD_REQUEST)


async def test_it_refuses_a_page_from_another_site(story_recipe: Recipe, owner: Any) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)

    _, connected, _ = await connect(f"/ws/runs/{run.pk}/", owner, origin=b"https://evil.example")

    assert not connected


async def test_a_reviewer_the_recipe_is_shared_with_may_watch(
    story_recipe: Recipe, owner: Any, reviewer: Any, editors: Any
) -> None:
    await sync_to_async(story_recipe.shared_with_groups.add)(editors)
    run = await sync_to_async(new_run)(story_recipe, owner)

    communicator, connected, _ = await connect(f"/ws/runs/{run.pk}/", reviewer)

    assert connected
    await communicator.disconnect()


# --- replay, then live -----------------------------------------------------------------------


async def test_it_replays_the_events_after_n_then_sends_live_ones(
    story_recipe: Recipe, owner: Any
) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    await sync_to_async(add_events)(run.pk, 5)

    communicator, connected, _ = await connect(f"/ws/runs/{run.pk}/?after=2", owner)
    assert connected
    replayed = await communicator.receive_json_from(timeout=5)
    caught_up = await communicator.receive_json_from(timeout=5)
    await sync_to_async(add_events)(run.pk, 2)
    live = await communicator.receive_json_from(timeout=5)

    assert [e["seq"] for e in replayed["events"]] == [3, 4, 5]
    assert replayed["events"][0] | {"at": None} == {
        "seq": 3,
        "type": "step.started",
        "at": None,
        "data": started(3).data,
    }
    assert caught_up == {"type": "replayed", "last": 5}
    assert [e["seq"] for e in live["events"]] == [6, 7]
    await communicator.disconnect()


async def test_it_delivers_every_event_once_in_order_when_events_arrive_during_the_replay(
    story_recipe: Recipe, owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    await sync_to_async(add_events)(run.pk, 4)
    loop = asyncio.get_running_loop()
    held = threading.Semaphore(0)
    original_fetch = RunEventsConsumer.__dict__["fetch_events"].func
    original_handler = RunEventsConsumer.forward
    calls = []

    async def counting_handler(self: RunEventsConsumer, message: dict[str, Any]) -> None:
        await original_handler(self, message)
        for _ in message["events"]:  # the fan-out may pass on two pushes as one message
            held.release()

    def racing_fetch(self: RunEventsConsumer, after: int, limit: int) -> list[dict[str, Any]]:
        rows = original_fetch(self, after, limit)
        calls.append(after)
        if len(calls) == 1:
            # While the replay has read 2..4: two events commit (and are pushed live), and a late
            # push of events 3 and 4, committed before the read, arrives too.
            add_events(run.pk, 2)
            stale = [events.serialize_event(e) for e in run.events.filter(seq__in=[3, 4])]
            asyncio.run_coroutine_threadsafe(
                get_channel_layer().group_send(
                    events.run_group(run.pk), {"type": "run.events", "run": run.pk, "events": stale}
                ),
                loop,
            ).result(timeout=5)
            for _ in range(4):  # events 5 and 6, then 3 and 4 again
                assert held.acquire(timeout=5), "the live messages did not reach the consumer"
        return rows

    monkeypatch.setattr(RunEventsConsumer, "forward", counting_handler)
    monkeypatch.setattr(
        RunEventsConsumer, "fetch_events", consumers.database_sync_to_async(racing_fetch)
    )

    communicator, connected, _ = await connect(f"/ws/runs/{run.pk}/?after=1", owner)
    assert connected
    seqs = await receive_events(communicator, until_seq=6)
    caught_up = await communicator.receive_json_from(timeout=5)
    await sync_to_async(add_events)(run.pk, 1)
    seqs += await receive_events(communicator, until_seq=7)

    assert seqs == [2, 3, 4, 5, 6, 7]
    assert caught_up == {"type": "replayed", "last": 6}
    assert await communicator.receive_nothing(timeout=0.2)
    await communicator.disconnect()


async def test_it_pages_through_a_long_log(
    story_recipe: Recipe, owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumers, "REPLAY_BATCH", 3)
    run = await sync_to_async(new_run)(story_recipe, owner)
    await sync_to_async(add_events)(run.pk, 10)

    communicator, connected, _ = await connect(f"/ws/runs/{run.pk}/", owner)

    assert connected
    assert await receive_events(communicator, until_seq=10) == list(range(1, 11))
    assert (await communicator.receive_json_from(timeout=5))["type"] == "replayed"
    await communicator.disconnect()


async def test_it_fetches_events_a_later_push_overtook(story_recipe: Recipe, owner: Any) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    communicator = await watch_run(run, owner)

    # Events 1 and 2 commit, but only 2 is pushed (its push overtook 1's, from another process).
    committed = await sync_to_async(add_events_unpushed)(run.pk, [started(1), finished(1)])
    overtaking = committed[1:]
    await get_channel_layer().group_send(
        events.run_group(run.pk), {"type": "run.events", "run": run.pk, "events": overtaking}
    )

    assert await receive_events(communicator, until_seq=2) == [1, 2]
    await communicator.disconnect()


async def test_it_passes_streamed_tokens_on(story_recipe: Recipe, owner: Any) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    communicator = await watch_run(run, owner)

    await sync_to_async(events.push_token)(run.pk, 1, " a time", 9)

    assert await communicator.receive_json_from(timeout=5) == {
        "type": "token",
        "seq": 1,
        "text": " a time",
        "offset": 9,
    }
    await communicator.disconnect()


async def test_a_monitor_opened_mid_answer_gets_the_text_streamed_so_far_first(
    story_recipe: Recipe, owner: Any
) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    streamer = TokenStreamer(run.pk, 1, "a lease token")
    streamer.add("Once upon")
    await sync_to_async(streamer.flush)()  # pushed before anyone watched: kept all the same
    assert await sync_to_async(outbox.drain)()  # the worker's writes to Redis have left

    communicator, connected, _ = await connect(f"/ws/runs/{run.pk}/", owner)
    assert connected
    assert await communicator.receive_json_from(timeout=5) == {
        "type": "token",
        "seq": 1,
        "text": "Once upon",
        "offset": 0,
    }
    assert (await communicator.receive_json_from(timeout=5))["type"] == "replayed"
    streamer.add(" a time")
    await sync_to_async(streamer.flush)()
    assert await communicator.receive_json_from(timeout=5) == {
        "type": "token",
        "seq": 1,
        "text": " a time",
        "offset": 9,
    }

    # Once the answer has ended (its text is in step.finished), a new monitor gets none.
    await sync_to_async(streamer.close)()
    assert await sync_to_async(outbox.drain)()
    late = await watch_run(run, owner)  # its first message is `replayed`: no token before
    await communicator.disconnect()
    await late.disconnect()


async def test_it_passes_a_running_steps_tool_calls_on(story_recipe: Recipe, owner: Any) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    communicator = await watch_run(run, owner)
    call = {
        "tool": "demo.add",
        "arguments": {"a": 2, "b": 3},
        "result": "5.0",
        "is_error": False,
        "truncated": False,
        "latency_ms": 12,
    }

    await sync_to_async(events.push_tool_call)(run.pk, 1, call)

    assert await communicator.receive_json_from(timeout=5) == {
        "type": "tool_call",
        "data": {"seq": 1, **call, "error": None},
    }
    await communicator.disconnect()


# --- reviewers' tasks --------------------------------------------------------------------------


def open_task(run: Run, group: Any) -> HumanTask:
    step = StepRun.objects.create(
        run=run,
        seq=1,
        step_key="review",
        step_name="Review",
        kind="human",
        status=StepStatus.WAITING_HUMAN,
        prompt="Is it good?",
    )
    return HumanTask.objects.create(
        run=run,
        step_run=step,
        step_key="review",
        group=group,
        question="Is it good?",
        material="A <b>story</b>",
        options=["approve", "reject", "revise"],
    )


async def test_a_reviewer_gets_the_open_tasks_then_changes_for_their_groups_only(
    story_recipe: Recipe,
    owner: Any,
    reviewer: Any,
    editors: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The pushes below do not match the database: no catch-up may correct them meanwhile.
    monkeypatch.setattr(consumers, "CATCH_UP_INTERVAL_S", 60)
    run = await sync_to_async(new_run)(story_recipe, owner)
    task = await sync_to_async(open_task)(run, editors)
    others = await sync_to_async(GroupFactory)(name="lawyers")

    communicator, connected, _ = await connect("/ws/reviews/", reviewer)
    assert connected
    snapshot = await communicator.receive_json_from(timeout=5)

    def change(group_id: int, kind: str) -> None:
        with transaction.atomic():
            events.push_task_change([group_id], kind, {"id": task.pk, "group": "x"})

    await sync_to_async(change)(others.pk, "created")
    await sync_to_async(change)(editors.pk, "closed")
    pushed = await communicator.receive_json_from(timeout=5)

    assert snapshot["count"] == 1
    assert [t["id"] for t in snapshot["tasks"]] == [task.pk]
    assert snapshot["tasks"][0]["material"] == "A <b>story</b>"
    # The count is read from the database (the task is still open there).
    pushed_task = {"id": task.pk, "group": "x"}
    assert pushed == {"type": "task", "kind": "closed", "task": pushed_task, "count": 1}
    assert await communicator.receive_nothing(timeout=0.2)
    await communicator.disconnect()


async def test_a_user_outside_the_group_gets_no_tasks(
    story_recipe: Recipe, owner: Any, editors: Any
) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    await sync_to_async(open_task)(run, editors)

    communicator, connected, _ = await connect("/ws/reviews/", owner)

    assert connected
    assert await communicator.receive_json_from(timeout=5) == {
        "type": "tasks",
        "count": 0,
        "tasks": [],
    }
    await communicator.disconnect()


# --- the run list ------------------------------------------------------------------------------


def set_status(run: Run, event: events.Event) -> None:
    """Move the run to the status its `event` tells."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        locked.status = event.data["status"]
        events.record(locked, [event])
        locked.save(update_fields=["status", "event_seq"])


async def test_the_run_list_hears_of_the_users_own_runs(story_recipe: Recipe, owner: Any) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    communicator, connected, _ = await connect("/ws/runs/", owner)
    assert connected

    await sync_to_async(set_status)(run, events.run_started())

    assert await communicator.receive_json_from(timeout=5) == {
        "type": "status",
        "run": run.pk,
        "status": "running",
        "outcome": "",
    }
    await communicator.disconnect()


async def test_the_run_list_watches_visible_active_runs_only(
    story_recipe: Recipe, owner: Any, reviewer: Any, editors: Any
) -> None:
    shared = await sync_to_async(new_run)(story_recipe, owner)
    await sync_to_async(story_recipe.shared_with_groups.add)(editors)

    def hidden_run() -> Run:
        secret = Recipe.objects.create(slug="secret", name="Secret", owner=owner)
        return Run.objects.create(
            recipe=secret, version=story_recipe.latest_version, created_by=owner
        )

    hidden = await sync_to_async(hidden_run)()
    communicator, connected, _ = await connect("/ws/runs/", reviewer)
    assert connected

    await communicator.send_json_to({"watch": [shared.pk, hidden.pk, "x", True]})
    current = await communicator.receive_json_from(timeout=5)
    await sync_to_async(set_status)(hidden, events.run_status(RunStatus.RUNNING))
    await sync_to_async(set_status)(shared, events.run_started())
    changed = await communicator.receive_json_from(timeout=5)

    assert current == {"type": "status", "run": shared.pk, "status": "queued", "outcome": ""}
    assert changed == {"type": "status", "run": shared.pk, "status": "running", "outcome": ""}
    assert await communicator.receive_nothing(timeout=0.2)
    await communicator.disconnect()


# --- the channel layer ---------------------------------------------------------------------------


async def test_a_server_loop_keeps_one_subscription_so_its_layer_never_stops_reading() -> None:
    subscribed = []

    class Layer:
        async def new_channel(self, prefix: str) -> str:
            subscribed.append(prefix)
            return prefix + "1"

    for _ in range(3):
        await consumers._keep_listening(Layer())

    assert subscribed == ["keep-listening."]


# --- pushes lost while Redis was away ----------------------------------------------------


async def test_it_sends_events_whose_pushes_were_lost(
    story_recipe: Recipe, owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumers, "CATCH_UP_INTERVAL_S", 0.2)
    run = await sync_to_async(new_run)(story_recipe, owner)
    communicator = await watch_run(run, owner)

    # The run finishes, and none of its pushes reaches the layer (Redis was unreachable).
    await sync_to_async(add_events_unpushed)(run.pk, [finished(1), RUN_SUCCEEDED])

    message = await communicator.receive_json_from(timeout=5)
    assert [(e["seq"], e["type"]) for e in message["events"]] == [
        (1, "step.finished"),
        (2, "run.finished"),
    ]
    await communicator.disconnect()


async def test_a_caught_up_event_is_not_sent_again_when_its_push_arrives_late(
    story_recipe: Recipe, owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumers, "CATCH_UP_INTERVAL_S", 0.2)
    run = await sync_to_async(new_run)(story_recipe, owner)
    communicator = await watch_run(run, owner)

    late = await sync_to_async(add_events_unpushed)(run.pk, [started(1)])
    assert await receive_events(communicator, until_seq=1) == [1]
    await get_channel_layer().group_send(
        events.run_group(run.pk), {"type": "run.events", "run": run.pk, "events": late}
    )

    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()


# --- what clients send ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "frame", "code"),
    [
        ("/ws/runs/", "not json", consumers.CLOSE_NOT_JSON),
        ("/ws/runs/", "{", consumers.CLOSE_NOT_JSON),
        ("/ws/runs/", "[" * 2000 + "]" * 2000, consumers.CLOSE_NOT_JSON),
        ("/ws/runs/", '{"watch": [1]}' + " " * 5000, consumers.CLOSE_TOO_BIG),
        ("/ws/runs/", '"watch"', consumers.CLOSE_BAD_REQUEST),
        ("/ws/runs/", '{"watch": 1}', consumers.CLOSE_BAD_REQUEST),
        ("/ws/runs/", '{"watch": [1], "also": 2}', consumers.CLOSE_BAD_REQUEST),
        ("/ws/runs/", '{"unwatch": [1]}', consumers.CLOSE_BAD_REQUEST),
        ("/ws/reviews/", '{"watch": [1]}', consumers.CLOSE_BAD_REQUEST),
        ("/ws/runs/{run}/", '{"type": "ping"}', consumers.CLOSE_BAD_REQUEST),
        ("/ws/runs/{run}/", "x" * (2 * 1024 * 1024), consumers.CLOSE_TOO_BIG),
    ],
)
async def test_it_closes_on_a_frame_it_does_not_take(
    story_recipe: Recipe, owner: Any, path: str, frame: str, code: int
) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    communicator, connected, _ = await connect(path.format(run=run.pk), owner)
    assert connected

    await communicator.send_to(text_data=frame)

    while (message := await communicator.receive_output(timeout=5))["type"] != "websocket.close":
        pass
    assert message["code"] == code


async def test_it_closes_on_a_binary_frame(owner: Any) -> None:
    communicator, connected, _ = await connect("/ws/runs/", owner)
    assert connected

    await communicator.send_to(bytes_data=b'{"watch": [1]}')

    assert (await communicator.receive_output(timeout=5))["code"] == consumers.CLOSE_NOT_JSON


async def test_it_asks_to_try_again_later_while_the_layers_redis_is_unreachable(
    story_recipe: Recipe, owner: Any, settings: Any
) -> None:
    port = free_port()  # nothing listens there
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [f"redis://127.0.0.1:{port}/0"]},
        }
    }
    run = await sync_to_async(new_run)(story_recipe, owner)

    _, connected, code = await connect(f"/ws/runs/{run.pk}/", owner)

    assert (connected, code) == (False, consumers.CLOSE_TRY_AGAIN_LATER)


async def test_a_monitor_that_leaves_while_redis_is_away_is_no_longer_caught_up(
    story_recipe: Recipe, owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    communicator = await watch_run(run, owner)
    catch_up = consumers._catch_ups[asyncio.get_running_loop()]
    assert run.pk in catch_up.watchers

    async def unreachable(*args: Any) -> None:
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(get_channel_layer(), "group_discard", unreachable)
    await communicator.disconnect()

    assert run.pk not in catch_up.watchers


async def test_an_inbox_gets_its_open_tasks_again_when_a_push_was_lost(
    story_recipe: Recipe,
    owner: Any,
    reviewer: Any,
    editors: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(consumers, "CATCH_UP_INTERVAL_S", 0.2)
    run = await sync_to_async(new_run)(story_recipe, owner)
    communicator, connected, _ = await connect("/ws/reviews/", reviewer)
    assert connected
    assert await communicator.receive_json_from(timeout=5) == {
        "type": "tasks",
        "count": 0,
        "tasks": [],
    }

    task = await sync_to_async(open_task)(run, editors)  # its push never came

    again = await communicator.receive_json_from(timeout=5)
    assert (again["type"], again["count"]) == ("tasks", 1)
    assert [t["id"] for t in again["tasks"]] == [task.pk]
    assert await communicator.receive_nothing(timeout=0.5)  # once caught up, nothing more
    await communicator.disconnect()


async def test_a_run_list_learns_a_watched_run_finished_when_the_push_was_lost(
    story_recipe: Recipe, owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumers, "CATCH_UP_INTERVAL_S", 0.2)
    run = await sync_to_async(new_run)(story_recipe, owner)
    communicator, connected, _ = await connect("/ws/runs/", owner)
    assert connected
    await communicator.send_json_to({"watch": [run.pk]})
    assert (await communicator.receive_json_from(timeout=5))["status"] == "queued"

    def finish_quietly() -> None:
        Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED, outcome="completed")

    await sync_to_async(finish_quietly)()

    assert await communicator.receive_json_from(timeout=5) == {
        "type": "status",
        "run": run.pk,
        "status": "succeeded",
        "outcome": "completed",
    }
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()
