"""Send messages to the channel layer from sync code: the worker's, the views'.

`runner.events` decides what is pushed to which group, and when (after commit); this module
only delivers a message to a group, and drops it if the layer cannot take it (consumers catch
up from the event log).
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import logging
import os
import queue
import threading
from concurrent.futures import Future
from typing import Any

import redis
import redis.sentinel
from channels.layers import InMemoryChannelLayer, get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from channels_redis.utils import _consistent_hash, decode_hosts
from django.conf import settings

from . import outages

log = logging.getLogger(__name__)


class Publisher:
    """Send to the channel layer from sync code, without starting an event loop per message.

    With channels_redis's pub/sub layer (REDIS_URL), a message is PUBLISHed with redis-py's
    blocking client: a round trip to Redis, from whichever thread records the event.

    The in-memory layer (the embedded default) only works from the loop of the server that
    holds the websockets, so the consumers hand that loop over with `use_loop` and messages go
    through it; before any consumer has connected nobody can be listening, and the durable
    RunEvent log covers replay. Any other layer gets a long-lived loop of its own.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._redis: RedisGroupPublisher | None = None

    def use_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def _get_loop(self) -> asyncio.AbstractEventLoop | None:
        if self._loop is not None and not self._loop.is_closed():
            return self._loop
        if isinstance(get_channel_layer(), InMemoryChannelLayer):
            return None
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="event-publisher", daemon=True
                ).start()
                self._loop = loop
        return self._loop

    def send(self, group: str, message: dict[str, Any]) -> Future[None] | None:
        layer = get_channel_layer()
        if layer is None:
            return None
        if isinstance(layer, RedisPubSubChannelLayer):
            if self._redis is None or self._redis.layer is not layer:
                config = settings.CHANNEL_LAYERS["default"].get("CONFIG", {})
                self._redis = RedisGroupPublisher(layer, config)
            self._redis.group_send(group, message)
            return None
        loop = self._get_loop()
        if loop is None:
            return None
        future = asyncio.run_coroutine_threadsafe(layer.group_send(group, message), loop)
        future.add_done_callback(_log_failure)
        return future


class RedisGroupPublisher:
    """`group_send` of channels_redis's pub/sub layer, done with redis-py's blocking client.

    The layer's own `group_send` is a coroutine; from a worker it would need an event loop in
    another thread, and handing each message over costs about a millisecond of thread switches
    per step. What it does is small: serialize the message with the layer's serializer and
    PUBLISH it to `{prefix}__group__{group}` on the group's shard (channels_redis.pubsub),
    through the process's `outbox`. tests/runner/test_publisher.py checks that the layer's
    group members receive it.
    """

    def __init__(self, layer: RedisPubSubChannelLayer, config: dict[str, Any]) -> None:
        self.layer = layer
        self.prefix = config.get("prefix", "asgi")
        self.shards = [redis_client(host) for host in decode_hosts(config.get("hosts"))]

    def group_send(self, group: str, message: dict[str, Any]) -> None:
        """Queue the message for publishing (`outbox`)."""
        channel = f"{self.prefix}__group__{group}"
        shard = self.shards[_consistent_hash(channel, len(self.shards))]
        outbox.send(shard, ("PUBLISH", channel, self.layer.serialize(message)))


class RedisOutbox:
    """Send the Redis writes of live delivery (pushes, and the streamed text kept for monitors:
    `runner.streams`) from one thread per process, those waiting in pipelines.

    A step's thread only queues them, and a worker with hundreds of steps in flight makes one
    round trip for many: 300 runs of 3 streamed one-second calls took a worker 6.0 and 6.5 s of
    CPU this way, 6.7 and 7.5 s when each push made its own (benchmarks/inflight.py, side by
    side). They are sent in the order queued, so a streamed text is kept before the push that
    follows it. Like a push, a write is best effort: if Redis cannot take it, it is dropped
    (consumers catch up from the event log) and Redis skipped for a moment rather than waited
    on at every push; so is a write that finds `max_waiting` writes queued before it.
    """

    MAX_PIPELINE = 500

    def __init__(self, *, max_waiting: int = 10_000) -> None:
        self.max_waiting = max_waiting
        self._reset()

    def _reset(self) -> None:
        # Each item: a client and its commands, or None and an Event to set once sent (drain).
        self._queue: queue.Queue[tuple[redis.Redis | None, Any]] = queue.Queue(self.max_waiting)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def send(self, client: redis.Redis, *commands: tuple[Any, ...]) -> None:
        """Queue `commands` (each a Redis command and its arguments) for `client`, together."""
        if outages.channel_layer.is_open():
            return
        self._start()
        try:
            self._queue.put_nowait((client, commands))
        except queue.Full:
            outages.channel_layer.trip(RuntimeError(f"{self.max_waiting} writes wait for it"))

    def drain(self, timeout: float = 5.0) -> bool:
        """Wait until what was queued before has been sent (or dropped); False on a timeout."""
        self._start()
        sent = threading.Event()
        self._queue.put((None, sent))
        return sent.wait(timeout)

    def drain_at_exit(self) -> None:
        if self._thread is not None:
            self.drain(timeout=1.0)

    def _start(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="redis-outbox", daemon=True)
                thread.start()
                self._thread = thread

    def _run(self) -> None:
        while True:
            waiting = [self._queue.get()]
            while len(waiting) < self.MAX_PIPELINE:
                try:
                    waiting.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._write(waiting)

    def _write(self, waiting: list[tuple[redis.Redis | None, Any]]) -> None:
        # One pipeline per run of writes to the same client, in turn: the order holds across
        # clients too (the pushes' and the streamed text's are one client: `redis_client`).
        for client, items in itertools.groupby(waiting, key=lambda item: item[0]):
            if client is None:
                for _, sent in items:
                    sent.set()
            elif not outages.channel_layer.is_open():
                self._pipeline(client, [command for _, commands in items for command in commands])

    @staticmethod
    def _pipeline(client: redis.Redis, commands: list[tuple[Any, ...]]) -> None:
        try:
            with client.pipeline(transaction=False) as pipe:
                for command in commands:
                    pipe.execute_command(*command)
                pipe.execute(raise_on_error=False)
        except redis.RedisError as exc:
            outages.channel_layer.trip(exc)
        except Exception as exc:  # the thread must outlive any one write
            log.warning("could not push an event: %s", exc)

    def forget_thread_in_child(self) -> None:
        """A forked child has no outbox thread (nor what its parent had queued)."""
        self._reset()


def redis_client(host: dict[str, Any]) -> redis.Redis:
    """The process's client for a Redis of the channel layer's `hosts` form: one per server and
    options, so that the pushes and the streamed text go through one client (`RedisOutbox`)."""
    # A stalled Redis must not hold a worker: the event log covers what a push loses.
    timeout = settings.BROKER_TIMEOUT_SECONDS
    host = {"socket_timeout": timeout, "socket_connect_timeout": timeout, **host}
    key = repr(sorted(host.items()))
    with _clients_lock:
        if key not in _clients:
            _clients[key] = _new_redis_client(host)
        return _clients[key]


_clients: dict[str, redis.Redis] = {}
_clients_lock = threading.Lock()


def _new_redis_client(host: dict[str, Any]) -> redis.Redis:
    host = dict(host)
    if "address" in host:
        return redis.Redis.from_url(host.pop("address"), **host)
    if "master_name" in host:
        sentinel = redis.sentinel.Sentinel(
            host.pop("sentinels"), sentinel_kwargs=host.pop("sentinel_kwargs", None)
        )
        return sentinel.master_for(host.pop("master_name"), **host)
    return redis.Redis(**host)


def _log_failure(future: Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("could not push an event: %s", future.exception())


publisher = Publisher()
outbox = RedisOutbox()
os.register_at_fork(after_in_child=outbox.forget_thread_in_child)
# A command that pushes and exits (a decision from the CLI) sends what it queued first.
atexit.register(outbox.drain_at_exit)
