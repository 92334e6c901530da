"""A run's monitors in one server process share one subscription and one encoded frame a push."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from runner import consumers, events, fanout
from tests.runner.test_consumers import (  # noqa: F401  (fixtures)
    add_events,
    add_events_unpushed,
    connect,
    fresh_channel_layer,
    new_run,
    receive_events,
    watch_run,
)
from workflows.models import Recipe

pytestmark = pytest.mark.django_db(transaction=True)


def group_members(run_id: int) -> list[str]:
    """The channels in the run's group (the in-memory layer's and the Redis layer's alike)."""
    layer = get_channel_layer()
    group = events.run_group(run_id)
    # The Redis layer keys its groups by their Redis channel.
    key = getattr(layer, "_get_group_channel_name", lambda name: name)(group)
    return list(layer.groups.get(key, ()))


async def test_the_monitors_of_a_run_share_one_subscription_and_each_gets_every_event(
    story_recipe: Recipe, owner: Any
) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    sockets = [await watch_run(run, owner) for _ in range(5)]

    assert len(group_members(run.pk)) == 1
    sent: list[int] = []
    for _ in range(3):
        sent += await sync_to_async(add_events)(run.pk, 2)
    for socket in sockets:
        assert await receive_events(socket, until_seq=sent[-1]) == sent
        assert await socket.receive_nothing(timeout=0.1)

    for socket in sockets:
        await socket.disconnect()
    await asyncio.sleep(0.05)  # the fan-out leaves the group once its last socket has gone
    assert group_members(run.pk) == []
    assert not [key for key in fanout._fanouts if key[1] == run.pk]


async def test_pushes_that_come_while_a_round_goes_out_leave_together_as_one_frame(
    story_recipe: Recipe, owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    socket = await watch_run(run, owner)
    first_round = asyncio.Event()
    release = asyncio.Event()
    send_round = fanout.Fanout._send_round

    async def slow_round(self: fanout.Fanout, messages: list[dict[str, Any]]) -> None:
        await send_round(self, messages)
        if not first_round.is_set():
            first_round.set()
            await release.wait()  # three more pushes arrive meanwhile

    monkeypatch.setattr(fanout.Fanout, "_send_round", slow_round)
    await sync_to_async(add_events)(run.pk, 1)
    await asyncio.wait_for(first_round.wait(), 5)
    for _ in range(3):
        await sync_to_async(add_events)(run.pk, 1)
    await asyncio.sleep(0.05)
    release.set()

    frames = [await socket.receive_json_from(timeout=5) for _ in range(2)]
    assert [[e["seq"] for e in frame["events"]] for frame in frames] == [[1], [2, 3, 4]]
    await socket.disconnect()


async def test_a_monitor_still_replaying_gets_the_live_events_after_its_replay(
    story_recipe: Recipe, owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One socket is live while another one joins behind and replays from the log."""
    run = await sync_to_async(new_run)(story_recipe, owner)
    await sync_to_async(add_events)(run.pk, 3)
    live, connected, _ = await connect(f"/ws/runs/{run.pk}/", owner)
    assert connected
    assert await receive_events(live, until_seq=3) == [1, 2, 3]
    assert (await live.receive_json_from(timeout=5))["type"] == "replayed"

    late, connected, _ = await connect(f"/ws/runs/{run.pk}/?after=1", owner)
    assert connected
    pushed = await sync_to_async(add_events)(run.pk, 2)

    assert await receive_events(live, until_seq=pushed[-1]) == pushed
    assert await receive_events(late, until_seq=pushed[-1]) == [2, 3, *pushed]
    await live.disconnect()
    await late.disconnect()


async def test_a_monitor_behind_a_lost_push_is_sent_the_gap_from_the_log_and_others_are_not(
    story_recipe: Recipe, owner: Any
) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    first = await watch_run(run, owner)
    second = await watch_run(run, owner)
    lost = await sync_to_async(add_events_unpushed)(run.pk, [events.run_status("running")])
    # The next push reaches the fan-out: both sockets miss the lost event before it.
    pushed = await sync_to_async(add_events)(run.pk, 1)

    for socket in (first, second):
        frame = await socket.receive_json_from(timeout=5)
        assert [e["seq"] for e in frame["events"]] == [lost[0]["seq"], *pushed]
    await first.disconnect()
    await second.disconnect()


async def test_streamed_text_reaches_every_monitor_in_step_once(
    story_recipe: Recipe, owner: Any
) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    sockets = [await watch_run(run, owner) for _ in range(3)]

    await get_channel_layer().group_send(
        events.run_group(run.pk),
        {
            "type": "run.token",
            "event": {"type": "step.token", "data": {"seq": 1, "text": "Once", "offset": 0}},
        },
    )

    for socket in sockets:
        assert json.loads(await socket.receive_from(timeout=5)) == {
            "type": "token",
            "seq": 1,
            "text": "Once",
            "offset": 0,
        }
        await socket.disconnect()


async def test_a_fan_out_that_cannot_join_its_group_asks_its_sockets_to_try_again_later(
    story_recipe: Recipe, owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await sync_to_async(new_run)(story_recipe, owner)
    layer = get_channel_layer()
    group_add = layer.group_add

    async def unreachable(group: str, channel: str) -> None:
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(layer, "group_add", unreachable)
    _, connected, code = await connect(f"/ws/runs/{run.pk}/", owner)

    assert (connected, code) == (False, consumers.CLOSE_TRY_AGAIN_LATER)
    assert not [key for key in fanout._fanouts if key[1] == run.pk]
    # Once Redis is back, the next socket starts a fan-out afresh.
    monkeypatch.setattr(layer, "group_add", group_add)
    socket = await watch_run(run, owner)
    pushed = await sync_to_async(add_events)(run.pk, 1)
    assert await receive_events(socket, until_seq=pushed[-1]) == pushed
    await socket.disconnect()
