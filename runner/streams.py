"""The text each running step has streamed so far, for a monitor opened in the middle of it.

Live text is pushed as it comes, each push carrying only what is new and where it starts
(`events.push_token`); it is not in the event log, where `step.finished` carries the whole
answer. A monitor that connects mid-answer would see it from the push after it connected, so
the worker also keeps the text so far here, and the monitor's socket sends it first
(`runner.consumers.RunEventsConsumer`).

With REDIS_URL the text lives in Redis (a hash per run: step seq -> text, gone an hour after
the last write or when the step ends), shared by the workers and the server processes. Without
it, the embedded worker runs in the server's own process and a dictionary does. Like a push,
keeping the text is best effort: a Redis that fails loses the live text, never the step. The
writes go through the process's outbox (`runner.publisher.outbox`), in order with the pushes:
the text is kept before the push that follows it, so a monitor that joins the run's group and
then reads the text so far misses nothing.
"""

from __future__ import annotations

import threading

import redis
from django.conf import settings

from . import outages
from .publisher import outbox, redis_client

KEY_PREFIX = "branchline:streamed"
KEEP_SECONDS = 3600

_lock = threading.Lock()
_local: dict[int, dict[int, str]] = {}


def _redis(url: str) -> redis.Redis:
    return redis_client({"address": url})  # the pushes' own client (runner.publisher)


def _key(run_id: int) -> str:
    return f"{KEY_PREFIX}:{run_id}"


def keep(run_id: int, seq: int, text: str) -> None:
    """Keep `text` as all that step `seq` of the run has streamed so far."""
    if not settings.REDIS_URL:
        with _lock:
            _local.setdefault(run_id, {})[seq] = text
        return
    key = _key(run_id)
    outbox.send(
        _redis(settings.REDIS_URL), ("HSET", key, str(seq), text), ("EXPIRE", key, KEEP_SECONDS)
    )


def forget(run_id: int, seq: int) -> None:
    """Drop what step `seq` streamed: it has ended, and its answer is in the log."""
    if not settings.REDIS_URL:
        with _lock:
            steps = _local.get(run_id, {})
            steps.pop(seq, None)
            if not steps:
                _local.pop(run_id, None)
        return
    outbox.send(_redis(settings.REDIS_URL), ("HDEL", _key(run_id), str(seq)))


def so_far(run_id: int) -> dict[int, str]:
    """Return what each streaming step of the run has streamed so far, by step seq."""
    if not settings.REDIS_URL:
        with _lock:
            return dict(_local.get(run_id, {}))
    if outages.channel_layer.is_open():
        return {}
    try:
        found = _redis(settings.REDIS_URL).hgetall(_key(run_id))
    except redis.RedisError as exc:
        outages.channel_layer.trip(exc)
        return {}
    return {int(seq): text.decode() for seq, text in found.items()}
