"""Pushing events to the channel layer from sync code (the worker's, the views')."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
import redis
from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings

from runner import outages
from runner.publisher import RedisGroupPublisher, RedisOutbox, outbox, publisher, redis_client

redis_layer = pytest.mark.skipif(
    not isinstance(get_channel_layer(), RedisPubSubChannelLayer),
    reason="needs REDIS_URL (channels_redis's pub/sub layer)",
)


@redis_layer
async def test_a_published_message_reaches_the_layers_group_members() -> None:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add("run-publish-test", channel)
    message = {"type": "run.events", "run": 1, "events": [{"seq": 1, "data": {"text": "ü"}}]}
    try:
        publisher.send("run-publish-test", message)  # queued for the outbox's thread
        received = await layer.receive(channel)
    finally:
        await layer.group_discard("run-publish-test", channel)
        await layer.flush()
    assert received == message


@redis_layer
def test_an_unreachable_redis_is_logged_not_raised_and_then_skipped(caplog: Any) -> None:
    config = {"hosts": ["redis://127.0.0.1:9/0"]}  # nothing listens on the discard port
    redis_publisher = RedisGroupPublisher(get_channel_layer(), config)
    outages.channel_layer.reset()
    try:
        with caplog.at_level(logging.WARNING, logger="runner.outages"):
            redis_publisher.group_send("run-1", {"type": "run.events", "events": []})
            assert outbox.drain()
        assert "the channel layer's Redis is unreachable" in caplog.text
        # Consumers catch up from the event log: the next pushes do not wait on Redis.
        assert outages.channel_layer.is_open()
    finally:
        outages.channel_layer.reset()


@redis_layer
async def test_many_pushes_from_many_threads_arrive_each_threads_in_order() -> None:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add("run-outbox-test", channel)

    def push(thread: int) -> None:
        for i in range(100):
            publisher.send("run-outbox-test", {"type": "run.events", "run": thread, "events": [i]})

    try:
        threads = [threading.Thread(target=push, args=(t,)) for t in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        received = [await layer.receive(channel) for _ in range(300)]
    finally:
        await layer.group_discard("run-outbox-test", channel)
        await layer.flush()
    for thread in range(3):
        assert [m["events"][0] for m in received if m["run"] == thread] == list(range(100))


class StalledRedis:
    """A Redis client whose pipelines hang until released, then fail."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()

    def pipeline(self, transaction: bool) -> Any:
        self.entered.set()
        self.release.wait(5)
        raise redis.ConnectionError("stalled")


def test_writes_that_find_the_outbox_full_are_dropped_and_redis_skipped(caplog: Any) -> None:
    stalled, crowded = StalledRedis(), RedisOutbox(max_waiting=2)
    outages.channel_layer.reset()
    try:
        crowded.send(stalled, ("PUBLISH", "asgi__group__run-1", b"first"))
        assert stalled.entered.wait(5)  # its thread now waits on Redis
        with caplog.at_level(logging.WARNING, logger="runner.outages"):
            for i in range(3):
                crowded.send(stalled, ("PUBLISH", "asgi__group__run-1", b"%d" % i))
        assert "2 writes wait for it" in caplog.text
        assert outages.channel_layer.is_open()  # the next pushes are skipped, not queued
    finally:
        stalled.release.set()
        crowded.drain()  # its failed write trips the breaker: before the reset, not after
        outages.channel_layer.reset()


class RecordingRedis(StalledRedis):
    """A Redis client whose pipelines record their commands in a shared list; its first
    pipeline hangs until released, so that what is queued meanwhile goes in one batch."""

    def __init__(self, written: list[tuple[Any, ...]]) -> None:
        super().__init__()
        self.written = written

    def pipeline(self, transaction: bool) -> Any:
        if not self.entered.is_set():
            self.entered.set()
            self.release.wait(5)
        client = self

        class Pipeline:
            def __enter__(self) -> Pipeline:
                return self

            def __exit__(self, *exc: object) -> None:
                pass

            def execute_command(self, *command: Any) -> None:
                client.written.append(command)

            def execute(self, raise_on_error: bool) -> None:
                pass

        return Pipeline()


def test_writes_to_two_clients_leave_in_the_order_they_were_queued() -> None:
    written: list[tuple[Any, ...]] = []
    pushes, texts, ordered = RecordingRedis(written), RecordingRedis(written), RedisOutbox()
    texts.entered.set()  # only the first client's first pipeline hangs
    outages.channel_layer.reset()
    ordered.send(pushes, ("PUBLISH", "before"))
    assert pushes.entered.wait(5)  # the outbox's thread waits on it: the next four queue up
    ordered.send(texts, ("HSET", "text", "1"), ("EXPIRE", "text", 60))
    ordered.send(pushes, ("PUBLISH", "token 1"))
    ordered.send(texts, ("HSET", "text", "2"))
    ordered.send(pushes, ("PUBLISH", "token 2"))
    pushes.release.set()
    assert ordered.drain()
    assert [c[1] for c in written] == ["before", "text", "text", "token 1", "text", "token 2"]


def test_the_pushes_and_the_streamed_text_share_one_client_per_redis() -> None:
    url = "redis://127.0.0.1:6379/3"
    # As the channel layer's hosts name it (config/settings.py), and as runner.streams does.
    timeout = settings.BROKER_TIMEOUT_SECONDS
    layers = {"address": url, "socket_timeout": timeout, "socket_connect_timeout": timeout}
    assert redis_client({"address": url}) is redis_client(layers)
    assert redis_client({"address": url}) is not redis_client({"address": url + "5"})
