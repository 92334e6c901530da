"""Websocket consumers: a run's events, the reviewers' tasks and the run list's status badges.

Websockets only push (DESIGN.md §5, STYLE habit 8): decisions and cancels come back as HTTP
POSTs. What they push comes from `runner.events`, after commit.

Messages sent to the browser, as JSON:

`/ws/runs/{id}/?after=N`
    {"type": "events", "events": [{"seq", "type", "at", "data"}, ...]}  every event after N,
        each once and in seq order: first replayed from RunEvent, then live;
    {"type": "replayed", "last": SEQ}  once, when the replay has caught up;
    {"type": "token", "seq": STEP_SEQ, "text": "...", "offset": N}  streamed text of a running
        step, N characters (code points) into its answer (not in the log): after the replay,
        one with offset 0 and all it has streamed so far (`runner.streams`), then each push;
    {"type": "tool_call", "data": STEP_TOOL_CALL}  a call a running step made to a tool (not
        stored): the payload of `step.tool_call` in `runner.event_schema`.
`/ws/reviews/`
    {"type": "tasks", "count": N, "tasks": [TASK, ...]}  on connect, and again when the catch-up
        finds the client out of date: how many tasks the user's groups have open, and the first
        REVIEWS_FIRST_PAGE of them in the inbox's order (oldest first; the page loads more
        over HTTP);
    {"type": "task", "kind": "created" | "closed" | "claimed", "task": TASK, "count": N}  then
        every change, with the open count read after it (so the count is exact, however many
        tasks are open); `claimed`: a reviewer claimed the open task or let it go, and
        TASK's `claimed_by` (a username, null once let go) and `claimed_at` say who and since
        when. TASK is `runner.events.task_payload` (`runner.event_schema.TASK`).
`/ws/runs/` (send {"watch": [RUN_ID, ...]} to follow runs besides one's own)
    {"type": "status", "run": ID, "status": "...", "outcome": "..."}

A connection the user may not open (anonymous, or a run they may not see) is closed before it is
accepted, which the browser sees as a failed handshake. What a client sends is checked: a text
frame of at most 4 KiB (else close 1009), JSON (else 1007), an object of a known shape (else
4400); only `/ws/runs/` takes messages.

Pushes travel through Redis and are lost while it is unreachable. The database is not: every
server process checks its sockets against it every couple of seconds (`_CatchUp`) and sends what
they missed, so a run that finished during an outage shows finished soon after, on its monitor
and in the run list, and a task created during one reaches the inbox.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections import defaultdict
from collections.abc import Iterable
from contextlib import suppress
from typing import Any
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.db.models import Count, Sum

from workflows.validators import whole_number

from . import events, fanout, streams
from .events import task_payload
from .models import HumanTask, Run, RunEvent
from .outages import BROKER_ERRORS, DATABASE_ERRORS
from .publisher import publisher
from .selectors import runs_visible_to, tasks_for_reviewer
from .status import TERMINAL, TaskStatus

log = logging.getLogger(__name__)

# Why a connection was refused (4000-4999 are the application's). A browser only sees a failed
# handshake; ASGI clients such as the tests' communicator get the code.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_BAD_REQUEST = 4400
CLOSE_TOO_BIG = 1009  # RFC 6455: a message too big to process
CLOSE_NOT_JSON = 1007  # RFC 6455: data inconsistent with the message type
CLOSE_TRY_AGAIN_LATER = 1013  # RFC 6455 registry: a service the server needs is unavailable
MAX_FRAME_CHARS = 4096

CATCH_UP_INTERVAL_S = 2.0

REPLAY_BATCH = 500
# The tasks an inbox's first message carries: what the inbox page shows before "Load more".
REVIEWS_FIRST_PAGE = 25
# Catch-up rounds a socket is found behind, running, before it is sent what it missed (a run
# monitor) or its snapshot again (an inbox): behind in one round may be a push on its way.
ROUNDS_BEHIND = 2
MAX_WATCHED_RUNS = 200


# Event loops whose channel layer has its keep-listening subscription (see _keep_listening).
_listening: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


async def _keep_listening(layer: Any) -> None:
    """Hold one subscription on this server loop's channel layer for as long as it runs.

    channels-redis' pub/sub layer reads Redis only while it has a subscription; with none (the
    last viewer left) it polls every 100 ms, so the first events a new viewer should see waited
    up to 100 ms, then arrived in a burst. A channel nobody reads keeps the reader on the socket.
    """
    loop = asyncio.get_running_loop()
    if loop not in _listening:
        await layer.new_channel("keep-listening.")  # if Redis is away, the next connect tries
        _listening.add(loop)


class _CatchUp:
    """The sockets of one server loop, checked against the database every few seconds.

    Pushes go through Redis and are lost while it is unreachable; the database is not. Each
    round makes one query per kind of socket, however many are open: a run monitor behind its
    run's event log in two rounds running is sent what it missed, a run list is sent the statuses of watched runs that
    changed, an inbox whose groups' open tasks are not what it was told is sent its snapshot
    anew (found by comparing fingerprints, not by reading the tasks; see ReviewsConsumer).
    """

    def __init__(self) -> None:
        self.watchers: defaultdict[int, set[RunEventsConsumer]] = defaultdict(set)
        self.lists: set[RunListConsumer] = set()
        self.inboxes: set[ReviewsConsumer] = set()
        self.task = asyncio.create_task(self._run())

    def add(self, consumer: RunEventsConsumer) -> None:
        self.watchers[consumer.run_id].add(consumer)

    def discard(self, consumer: _Consumer) -> None:
        if isinstance(consumer, RunListConsumer):
            self.lists.discard(consumer)
        elif isinstance(consumer, ReviewsConsumer):
            self.inboxes.discard(consumer)
        elif isinstance(consumer, RunEventsConsumer):
            run_id = getattr(consumer, "run_id", None)  # unset on a refused connection
            if run_id in self.watchers:
                self.watchers[run_id].discard(consumer)
                if not self.watchers[run_id]:
                    del self.watchers[run_id]

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(CATCH_UP_INTERVAL_S)
            for catch_up in (self._monitors, self._lists, self._inboxes):
                try:
                    await catch_up()
                except Exception:  # the database may be down too: try again next round
                    log.warning("catching up websockets failed", exc_info=True)

    async def _monitors(self) -> None:
        if not self.watchers:
            return
        latest = await _latest_event_seqs(list(self.watchers))
        for run_id, seq in latest.items():
            for consumer in list(self.watchers.get(run_id, ())):
                if consumer.last_seq >= seq:
                    consumer.rounds_behind = 0
                    continue
                # Behind in one round is mostly a push on its way (a busy run's fan-out is
                # a round or two behind its commits); behind in two running, one was lost.
                consumer.rounds_behind += 1
                if consumer.rounds_behind >= ROUNDS_BEHIND:
                    consumer.rounds_behind = 0
                    await _each(consumer.catch_up())

    async def _lists(self) -> None:
        watched = {run_id for consumer in self.lists for run_id in consumer.watched}
        if not watched:
            return
        statuses = await _run_statuses(sorted(watched))
        for consumer in list(self.lists):
            for run_id in list(consumer.watched):
                status = statuses.get(run_id)
                if status is not None and consumer.statuses.get(run_id) != status[0]:
                    await _each(consumer.send_status(run_id, *status))

    async def _inboxes(self) -> None:
        groups = {group_id for consumer in self.inboxes for group_id in consumer.group_ids}
        if not groups:
            return
        fingerprints = await _open_task_fingerprints(sorted(groups))
        for consumer in list(self.inboxes):
            if consumer.told == _union(fingerprints, consumer.group_ids):
                consumer.rounds_behind = 0
                continue
            # Behind in one round may be a push on its way (sent after the commit this round
            # read); behind in two running, a push was lost.
            consumer.rounds_behind += 1
            if consumer.rounds_behind >= ROUNDS_BEHIND:
                await _each(consumer.send_snapshot())


async def _each(sending: Any) -> None:
    """Await one client's catch-up; its failure (a closed socket) does not stop the others."""
    try:
        await sending
    except Exception:
        log.warning("catching up a websocket failed", exc_info=True)


@database_sync_to_async
def _latest_event_seqs(run_ids: list[int]) -> dict[int, int]:
    return dict(Run.objects.filter(pk__in=run_ids).values_list("pk", "event_seq"))


@database_sync_to_async
def _run_statuses(run_ids: list[int]) -> dict[int, tuple[str, str]]:
    rows = Run.objects.filter(pk__in=run_ids).values_list("pk", "status", "outcome")
    return {pk: (status, outcome) for pk, status, outcome in rows}


# Open tasks in brief: how many, and the sum of their ids. One aggregate reads it however many
# tasks are open; a task that opens or closes changes it (a set of opened tasks whose ids add up
# to those of as many closed ones, between two catch-up rounds, would not); and a change that is
# heard updates it without a query: a task opened adds one and its id, one closed takes them off.
Fingerprint = tuple[int, int]


def _read_fingerprints(group_ids: list[int]) -> dict[int, Fingerprint]:
    """Return the fingerprint of each of these groups that has open tasks."""
    rows = (
        HumanTask.objects.filter(status=TaskStatus.OPEN, group_id__in=group_ids)
        .order_by()  # not the model's ordering: it would join the GROUP BY
        .values("group_id")
        .annotate(count=Count("pk"), ids=Sum("pk"))
        .values_list("group_id", "count", "ids")
    )
    # PostgreSQL sums bigints as numeric (a Decimal here).
    return {group_id: (count, int(ids)) for group_id, count, ids in rows}


_open_task_fingerprints = database_sync_to_async(_read_fingerprints)


def _union(fingerprints: dict[int, Fingerprint], group_ids: set[int]) -> Fingerprint:
    """Return the fingerprint of the open tasks of all these groups (a task has one group)."""
    mine = [fingerprints[g] for g in group_ids if g in fingerprints]
    return (sum(count for count, _ in mine), sum(ids for _, ids in mine))


class _SharedReads:
    """The fingerprint reads of one server loop, shared by the inboxes that ask at one moment.

    A task change reaches every inbox of its group at once, and each wants the open count after
    it: one query answers them all, instead of one each, queued in the one thread that runs all
    consumers' database work. An inbox only joins a query that has not started yet: it heard of
    the change after its commit (pushes follow commits), so a query that starts later sees it.
    """

    def __init__(self) -> None:
        self.wanted: set[int] = set()
        self.result: asyncio.Future[dict[int, Fingerprint]] | None = None
        self.query: asyncio.Task[None] | None = None  # held: the loop keeps weak references

    async def read(self, group_ids: Iterable[int]) -> dict[int, Fingerprint]:
        if self.result is None:
            self.result = asyncio.get_running_loop().create_future()
            # Retrieved, so that a failure all its readers left before is not logged as lost.
            self.result.add_done_callback(lambda f: f.cancelled() or f.exception())
            self.query = asyncio.create_task(self._query(self.result))
        self.wanted.update(group_ids)
        # Shielded: a reader that leaves (its client went) does not cancel the others' answer.
        return await asyncio.shield(self.result)

    async def _query(self, result: asyncio.Future[dict[int, Fingerprint]]) -> None:
        await asyncio.sleep(0)  # the other inboxes that heard of the same change join meanwhile
        wanted, self.wanted, self.result = self.wanted, set(), None
        try:
            result.set_result(await _open_task_fingerprints(sorted(wanted)))
        except Exception as exc:
            result.set_exception(exc)
        finally:
            result.cancel()  # cancelled itself (its loop is closing): its readers must not wait


_shared_reads: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _SharedReads] = (
    weakref.WeakKeyDictionary()
)


async def _fingerprints_now(group_ids: Iterable[int]) -> dict[int, Fingerprint]:
    """Read these groups' fingerprints, sharing the query with the loop's other inboxes."""
    loop = asyncio.get_running_loop()
    reads = _shared_reads.get(loop)
    if reads is None:
        reads = _shared_reads[loop] = _SharedReads()
    return await reads.read(group_ids)


_catch_ups: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _CatchUp] = (
    weakref.WeakKeyDictionary()
)


def _catch_up() -> _CatchUp:
    loop = asyncio.get_running_loop()
    catch_up = _catch_ups.get(loop)
    if catch_up is None or catch_up.task.done():
        catch_up = _catch_ups[loop] = _CatchUp()
    return catch_up


class _Consumer(AsyncJsonWebsocketConsumer):
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve the socket; while the channel layer's Redis or the database is unreachable,
        close it with "try again later" (the client reconnects and replays) instead of failing
        with a 500."""
        try:
            await super().__call__(scope, receive, send)
        except (*BROKER_ERRORS, *DATABASE_ERRORS) as exc:
            log.warning("websocket %s closed: a service is unreachable (%s)", scope["path"], exc)
            with suppress(Exception):  # the socket may be gone already
                await send({"type": "websocket.close", "code": CLOSE_TRY_AGAIN_LATER})

    async def websocket_connect(self, message: dict[str, Any]) -> None:
        await _keep_listening(self.channel_layer)
        await super().websocket_connect(message)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """Check a client's frame before anything reads it; close on one that is not JSON."""
        if text_data is None or len(text_data) > MAX_FRAME_CHARS:
            await self.close(code=CLOSE_TOO_BIG if text_data else CLOSE_NOT_JSON)
            return
        try:
            content = json.loads(text_data)
        except (ValueError, RecursionError):  # deep nesting fits in a small frame
            await self.close(code=CLOSE_NOT_JSON)
            return
        await self.receive_json(content, **kwargs)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Refuse messages: only the run list's socket takes any."""
        await self.close(code=CLOSE_BAD_REQUEST)

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        """Leave the catch-up first: leaving the groups needs Redis, which may be the reason the
        client went."""
        catch_up = _catch_ups.get(asyncio.get_running_loop())
        if catch_up is not None:
            catch_up.discard(self)
        await super().websocket_disconnect(message)

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Call the message's handler without Channels' connection clean-up hop first.

        Channels closes stale database connections before every handler, in the one thread that
        runs all consumers' database work: a thread hop on every live push, which also waits
        behind any replay query in progress. These handlers reach the database only through
        `database_sync_to_async`, which does that clean-up itself.
        """
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)


class RunEventsConsumer(_Consumer):
    """Send a run's events after `?after=N`: replayed from the database, then live.

    The consumer joins its run's fan-out (`runner.fanout`: one subscription to the run's group
    per process, one encoded frame per push for all the sockets in step) *before* reading the
    log, so nothing committed after the read can be missed; live messages that arrive while the
    replay runs are held back, and once the replay is done only those newer than the last
    replayed event are sent. Later, an event that jumps over a sequence number (pushes from
    different processes may overtake each other) makes the consumer fetch the missing ones from
    the log first. Every event thus goes out once, in order.
    """

    run_id: int
    last_seq: int
    replaying: bool
    held: list[dict[str, Any]]
    forwarding: int  # messages handed to `_forward_in_turn` and not sent yet
    rounds_behind: int
    forward_tasks: set[asyncio.Task[None]]

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        after = _query_int(self.scope, "after", default=0)
        if after is None:
            await self.close(code=CLOSE_BAD_REQUEST)
            return
        if not await self._may_see_run(user):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        # Pushes from this process (the embedded worker, decisions made in HTTP requests) must go
        # through the loop that holds the in-memory layer's queues: this one.
        publisher.use_loop(asyncio.get_running_loop())
        self.last_seq = after
        self.replaying = True
        self.held = []
        self.send_lock = asyncio.Lock()
        self.forwarding = 0
        self.forward_tasks = set()
        self.rounds_behind = 0  # catch-up rounds found behind its run's log, running
        self.run_fanout = await fanout.join(self)  # the run's group: one per run per process
        await self.accept()
        self.replay_task = asyncio.create_task(self._replay())

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        """Stop the replay and leave the fan-out first; the base class leaves the catch-up."""
        task = getattr(self, "replay_task", None)
        if task is not None and not task.done():
            task.cancel()
        if getattr(self, "run_fanout", None) is not None:
            self.run_fanout.leave(self)
        await super().websocket_disconnect(message)

    async def _replay(self) -> None:
        try:
            async with self.send_lock:  # live messages are held meanwhile (`replaying`)
                await self._send_from_log()
            async with self.send_lock:
                # No await between taking the held messages and leaving replay mode: a live
                # message dispatched from now on waits for the lock, then goes out after these.
                held, self.held, self.replaying = self.held, [], False
                # Joined before this read: a push it lacks is held or still to come.
                for seq, text in sorted((await sync_to_async(streams.so_far)(self.run_id)).items()):
                    await self.send_json(fanout.token_payload(seq, text, 0))
                for message in held:
                    await self._forward(message)
                await self.send_json({"type": "replayed", "last": self.last_seq})
            _catch_up().add(self)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("run %s: replay failed", self.run_id)
            await self.close(code=1011)

    async def catch_up(self) -> None:
        """Send the events of the log this client has not had (their pushes were lost)."""
        async with self.send_lock:
            await self._send_from_log()

    async def _send_from_log(self) -> None:
        """Send every event after `last_seq` from the log, in batches; the caller holds the lock."""
        while True:
            batch = await self.fetch_events(self.last_seq, REPLAY_BATCH)
            if batch:
                self.last_seq = batch[-1]["seq"]
                await self.send_json({"type": "events", "events": batch})
            if len(batch) < REPLAY_BATCH:
                return

    @database_sync_to_async
    def fetch_events(self, after: int, limit: int) -> list[dict[str, Any]]:
        """Return up to `limit` of the run's events after seq `after`, in order."""
        rows = RunEvent.objects.filter(run_id=self.run_id, seq__gt=after).order_by("seq")[:limit]
        return [events.serialize_event(row) for row in rows]

    @database_sync_to_async
    def fetch_between(self, after: int, before: int) -> list[dict[str, Any]]:
        rows = RunEvent.objects.filter(run_id=self.run_id, seq__gt=after, seq__lt=before).order_by(
            "seq"
        )
        return [events.serialize_event(row) for row in rows]

    def takes_frame(self, after: int) -> bool:
        """Whether the fan-out's shared frame, of the events after seq `after` (or of a token),
        is what this socket is to be sent next: it has sent everything up to `after`, and is
        neither replaying nor sending anything else."""
        return (
            self.last_seq == after
            and not self.replaying
            and not self.forwarding
            and not self.send_lock.locked()
        )

    async def forward(self, message: dict[str, Any]) -> None:
        """Take a group message that the fan-out's shared frame does not fit: hold it during
        the replay, else send it in turn (filtered, gaps filled from the log), without holding
        up the fan-out's other sockets."""
        if self.replaying:
            self.held.append(message)
            return
        self.forwarding += 1
        task = asyncio.create_task(self._forward_in_turn(message))
        self.forward_tasks.add(task)
        task.add_done_callback(self.forward_tasks.discard)

    async def _forward_in_turn(self, message: dict[str, Any]) -> None:
        try:
            async with self.send_lock:  # FIFO: messages go out in the order they came
                await self._forward(message)
        except Exception:
            log.warning("run %s: forwarding a push failed", self.run_id, exc_info=True)
        finally:
            self.forwarding -= 1

    async def _forward(self, message: dict[str, Any]) -> None:
        """Send a group message on; the caller holds the send lock."""
        if message["type"] != "run.events":  # streamed text or a tool call
            await self.send_json(fanout.live_payload(message))
            return
        fresh = sorted(
            (e for e in message["events"] if e["seq"] > self.last_seq), key=lambda e: e["seq"]
        )
        if not fresh:
            return
        if fresh[0]["seq"] > self.last_seq + 1:
            # Events are numbered under the run's row lock, so the missing ones are committed.
            missing = await self.fetch_between(self.last_seq, fresh[0]["seq"])
            fresh = missing + fresh
        self.last_seq = fresh[-1]["seq"]
        await self.send_json({"type": "events", "events": fresh})

    @database_sync_to_async
    def _may_see_run(self, user: Any) -> bool:
        return runs_visible_to(user).filter(pk=self.run_id).exists()


class ReviewsConsumer(_Consumer):
    """Send the open count and the first open tasks of the user's reviewer groups, then every
    task created, closed, claimed or let go, each with the open count after it."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        publisher.use_loop(asyncio.get_running_loop())
        self.group_ids = set(await self._group_ids(user))
        # The fingerprint of the open tasks the client was told of (by the snapshot, then by each
        # change), for the catch-up to compare with the database's.
        self.told: Fingerprint = (0, 0)
        self.rounds_behind = 0
        # Each message is read and sent under the lock: the client gets them in the order they
        # were read, and `told` matches what it was sent.
        self.send_lock = asyncio.Lock()
        for group_id in sorted(self.group_ids):
            group = events.reviews_group(group_id)
            self.groups.append(group)
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        # Joined first, then the snapshot: a change in between arrives after it. Applying it
        # twice leaves the cards and the count (read anew) right; `told` is off until the
        # catch-up sends the snapshot again.
        await self.send_snapshot()
        _catch_up().inboxes.add(self)

    async def send_snapshot(self) -> None:
        """Send the open count and the first page of the user's open tasks; the page reconciles
        what it shows with them."""
        async with self.send_lock:
            self.told, tasks = await self._snapshot(self.scope["user"])
            self.rounds_behind = 0
            await self.send_json({"type": "tasks", "count": self.told[0], "tasks": tasks})

    async def task_changed(self, message: dict[str, Any]) -> None:
        """Handle `task.changed` from a reviewers' group: pass it on with the count after it
        (a claim changes no count: `told` stays)."""
        task = message["task"]
        async with self.send_lock:
            count, _ = _union(await _fingerprints_now(self.group_ids), self.group_ids)
            told_count, told_ids = self.told
            if message["kind"] == "created" and task.get("status") == TaskStatus.OPEN:
                self.told = (told_count + 1, told_ids + task["id"])
            elif message["kind"] == "closed":
                self.told = (told_count - 1, told_ids - task["id"])
            await self.send_json(
                {"type": "task", "kind": message["kind"], "task": task, "count": count}
            )

    @database_sync_to_async
    def _group_ids(self, user: Any) -> list[int]:
        return list(user.groups.values_list("pk", flat=True))

    @database_sync_to_async
    def _snapshot(self, user: Any) -> tuple[Fingerprint, list[dict[str, Any]]]:
        told = _union(_read_fingerprints(sorted(self.group_ids)), self.group_ids)
        tasks = tasks_for_reviewer(user)[:REVIEWS_FIRST_PAGE]
        return told, [task_payload(task) for task in tasks]


class RunListConsumer(_Consumer):
    """Send status changes of the user's own runs, and of the runs the page asks to watch."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        publisher.use_loop(asyncio.get_running_loop())
        self.watched: set[int] = set()
        self.statuses: dict[int, str] = {}  # the last status sent of each watched run
        group = events.runs_list_group(user.pk)
        self.groups.append(group)
        await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        _catch_up().lists.add(self)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Watch the runs listed in `{"watch": [id, ...]}` that the user may see and are active."""
        ids = content.get("watch") if isinstance(content, dict) else None
        if not isinstance(ids, list) or len(content) != 1:
            await self.close(code=CLOSE_BAD_REQUEST)
            return
        wanted = {i for i in ids if isinstance(i, int) and not isinstance(i, bool)} - self.watched
        room = MAX_WATCHED_RUNS - len(self.watched)
        if not wanted or room <= 0:
            return
        for run_id, status in await self._active_visible(sorted(wanted)[:room]):
            self.watched.add(run_id)
            group = events.run_group(run_id)
            self.groups.append(group)
            await self.channel_layer.group_add(group, self.channel_name)
            # The run may have moved on since the page was rendered.
            await self.send_status(run_id, status)

    async def send_status(self, run_id: int, status: str, outcome: str = "") -> None:
        """Send a run's status; a watched run that finished is watched no more."""
        self.statuses[run_id] = status
        if status in TERMINAL:
            self.watched.discard(run_id)
        await self.send_json(
            {"type": "status", "run": run_id, "status": status, "outcome": outcome}
        )

    async def run_status(self, message: dict[str, Any]) -> None:
        """Handle `run.status` from the user's own runs."""
        await self.send_status(message["run"], message["status"])

    async def run_events(self, message: dict[str, Any]) -> None:
        """Handle `run.events` of a watched run: pass on its status changes only."""
        for event in message["events"]:
            if event["type"] in events.STATUS_EVENT_TYPES:
                data = event["data"]
                await self.send_status(message["run"], data.get("status"), data.get("outcome", ""))

    async def run_token(self, message: dict[str, Any]) -> None:
        """Streamed text is of no use to a list."""

    async def run_tool_call(self, message: dict[str, Any]) -> None:
        """Nor are a running step's tool calls."""

    @database_sync_to_async
    def _active_visible(self, ids: list[int]) -> list[tuple[int, str]]:
        runs = runs_visible_to(self.scope["user"]).filter(pk__in=ids).exclude(status__in=TERMINAL)
        return list(runs.values_list("pk", "status"))


def _query_int(scope: dict[str, Any], name: str, *, default: int) -> int | None:
    """Return a whole-number query parameter, the default when absent, None when malformed."""
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get(name)
    if not values:
        return default
    return whole_number(values[-1])
