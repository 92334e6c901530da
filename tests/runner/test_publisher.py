"""Pushing events to the channel layer from sync code (the worker's, the views')."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer

from runner import outages
from runner.publisher import RedisGroupPublisher, publisher

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
        publisher.send("run-publish-test", message)  # blocking, from this thread
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
        assert "the channel layer's Redis is unreachable" in caplog.text
        # Consumers catch up from the event log: the next pushes do not wait on Redis.
        assert outages.channel_layer.is_open()
    finally:
        outages.channel_layer.reset()
