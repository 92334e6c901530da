"""One subscription per run per server process, and one encoded frame per push for all of the
run's monitors in it.

A monitor's socket (`RunEventsConsumer`) does not join its run's channel-layer group: the run's
`Fanout` does, once for every socket of this process following the run. Each message the group
receives is unpacked once, its frame JSON-encoded once and the same text sent down every socket
that is up to date; a socket that is not (replaying its log, or behind by a lost push) gets the
message through its own path (`RunEventsConsumer.forward`), which filters and fills gaps from the
log. Pushes that arrive while a round of sends is going out are sent together in the next round
as one frame: when commits come faster than frames go out, sockets get fewer, larger frames
instead of a queue that grows (`benchmarks/ws_fanout.py`).

It pays at real model latencies too: 100 sockets on one run whose steps answer after 1 s got
each commit's events within 7.7 ms (p95) at 68 µs of daphne's CPU a frame, against 20.6 ms and
124 µs with each socket in the group itself (`ws_fanout.py --steps 20 --delay-ms 1000`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Protocol

from . import events


class RunEventsConsumer(Protocol):
    """What the fan-out needs of a run monitor's socket (`runner.consumers.RunEventsConsumer`)."""

    run_id: int
    last_seq: int
    channel_layer: Any
    base_send: Any  # the ASGI send

    def takes_frame(self, after: int) -> bool: ...

    async def forward(self, message: dict[str, Any]) -> None: ...

    async def close(self, code: int | bool | None = None) -> None: ...


log = logging.getLogger(__name__)

ROUND_GAP_S = 0.0005
# Sockets sent to before the loop gets a turn: daphne's transport writes a frame to its socket
# only on the loop's next turn, so without one the first socket of a round would wait for the
# last to be framed.
WRITE_EVERY = 16

# The fan-outs of each server loop's runs (the in-memory layer and the tests run several loops).
_fanouts: dict[tuple[asyncio.AbstractEventLoop, int], Fanout] = {}


async def join(consumer: RunEventsConsumer) -> Fanout:
    """Add `consumer` to its run's fan-out in this loop, starting it if needed; return once the
    fan-out receives the run's group (so a push committed from now on reaches the consumer)."""
    key = (asyncio.get_running_loop(), consumer.run_id)
    fanout = _fanouts.get(key)
    if fanout is None:
        fanout = _fanouts[key] = Fanout(key, consumer.channel_layer)
    fanout.consumers.add(consumer)
    try:
        await asyncio.shield(fanout.subscribed)
    except BaseException:
        fanout.leave(consumer)
        raise
    return fanout


class Fanout:
    """The sockets of one run in one server loop, fed from one subscription to the run's group."""

    def __init__(self, key: tuple[asyncio.AbstractEventLoop, int], layer: Any) -> None:
        self.key = key
        self.run_id = key[1]
        self.layer = layer
        self.consumers: set[RunEventsConsumer] = set()
        self.pending: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()
        self.subscribed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.tasks = [asyncio.create_task(self._receive()), asyncio.create_task(self._deliver())]

    def leave(self, consumer: RunEventsConsumer) -> None:
        """Remove `consumer`; the last one out stops the fan-out and leaves the group."""
        self.consumers.discard(consumer)
        if self.consumers or _fanouts.get(self.key) is not self:
            return
        del _fanouts[self.key]
        for task in self.tasks:
            task.cancel()

    async def _receive(self) -> None:
        group = events.run_group(self.run_id)
        channel = ""
        try:
            channel = await self.layer.new_channel("fanout.")
            await self.layer.group_add(group, channel)
        except asyncio.CancelledError:
            self.subscribed.cancel()  # its last socket left before it could listen
            raise
        except Exception as exc:
            # The sockets waiting on it see the failure (Redis unreachable: "try again later").
            self._stop()
            self.subscribed.set_exception(exc)
            return
        self.subscribed.set_result(None)
        try:
            while True:
                message = await self.layer.receive(channel)
                self.pending.append(message)  # not before the await: `_deliver` swaps the list
                self.arrived.set()
        except asyncio.CancelledError:
            # The last socket left. Leaving the group needs Redis, which may be why it left.
            try:
                await asyncio.wait_for(self.layer.group_discard(group, channel), 1)
            except Exception:  # the group's membership expires on its own
                log.debug("run %s: could not leave the group", self.run_id, exc_info=True)
            raise
        except Exception:
            # The layer failed (Redis gone): the sockets close and their clients reconnect.
            log.warning("run %s: the fan-out stopped", self.run_id, exc_info=True)
            self._stop()
            for consumer in list(self.consumers):
                await consumer.close(code=1013)

    def _stop(self) -> None:
        if _fanouts.get(self.key) is self:
            del _fanouts[self.key]
        for task in self.tasks:
            if task is not asyncio.current_task():
                task.cancel()

    async def _deliver(self) -> None:
        while True:
            await self.arrived.wait()
            self.arrived.clear()
            messages, self.pending = self.pending, []
            try:
                await self._send_round(messages)
            except Exception:  # one round's failure must not stop the run's later pushes
                log.exception("run %s: sending a round of pushes failed", self.run_id)
            # A moment for the pushes that came during the round to be read off the layer
            # (its reader takes one message per turn of the loop), so the next round carries
            # them all, and for this round's frames to be written out.
            await asyncio.sleep(ROUND_GAP_S)

    async def _send_round(self, messages: list[dict[str, Any]]) -> None:
        """Send the messages received since the last round, in order: each run of consecutive
        event messages as one frame, each token or tool call as its own."""
        batch: list[dict[str, Any]] = []
        for message in messages:
            if message["type"] == "run.events":
                batch.extend(message["events"])
                continue
            if batch:
                await self._send_events(batch)
                batch = []
            await self._send_live(message)
        if batch:
            await self._send_events(batch)

    async def _send_events(self, batch: list[dict[str, Any]]) -> None:
        fresh = sorted({event["seq"]: event for event in batch}.values(), key=lambda e: e["seq"])
        first, last = fresh[0]["seq"], fresh[-1]["seq"]
        contiguous = last - first + 1 == len(fresh)
        frame: dict[str, str] | None = None
        message = {"type": "run.events", "run": self.run_id, "events": fresh}
        for count, consumer in enumerate(list(self.consumers), 1):
            if contiguous and consumer.takes_frame(first - 1):
                if frame is None:
                    frame = _frame({"type": "events", "events": fresh})
                consumer.last_seq = last
                await _send(consumer, frame)
            else:
                await consumer.forward(message)
            if count % WRITE_EVERY == 0:
                await asyncio.sleep(0)

    async def _send_live(self, message: dict[str, Any]) -> None:
        """A token or tool call: not stored, not numbered; to every socket in step."""
        frame = _frame(live_payload(message))
        for consumer in list(self.consumers):
            if consumer.takes_frame(consumer.last_seq):
                await _send(consumer, frame)
            else:
                await consumer.forward(message)


def token_payload(seq: int, text: str, offset: int) -> dict[str, Any]:
    """What the browser is sent of a running step's streamed text (a push, or all so far)."""
    return {"type": "token", "seq": seq, "text": text, "offset": offset}


def live_payload(message: dict[str, Any]) -> dict[str, Any]:
    """What a `run.token` or `run.tool_call` group message sends the browser."""
    data = message["event"]["data"]
    if message["type"] == "run.token":
        return token_payload(data["seq"], data["text"], data["offset"])
    return {"type": "tool_call", "data": data}


def _frame(payload: dict[str, Any]) -> dict[str, str]:
    return {"type": "websocket.send", "text": json.dumps(payload)}


async def _send(consumer: RunEventsConsumer, frame: dict[str, str]) -> None:
    """Send one socket its frame (the ASGI message, shared by all the sockets: the consumer's
    own `send` would build it again for each); a socket that has gone does not stop the
    others."""
    try:
        await consumer.base_send(frame)
    except Exception:
        log.debug("run %s: a socket could not be sent to", consumer.run_id, exc_info=True)
