"""Hear a run's committed events (`runner.signals.run_events_committed`) and record the
deliveries its recipe's callbacks ask for.

This runs after every commit of every run, in the process that committed (a worker between
two steps, a request): for a run whose version has no callbacks it must cost nothing. So the
callbacks of a run are looked up once per process (its version, then the version's parsed
graph, which `runner.versions` caches) and kept; a run queued again (resumed, perhaps on
another version) is looked up afresh.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from runner.models import Run, RunEvent
from runner.versions import version_graph
from workflows import engine

from .services import Wanted, deliveries_record

MAX_RUNS_KEPT = 4096

_versions: OrderedDict[int, tuple[int, datetime] | None] = OrderedDict()
_lock = threading.Lock()


def on_events_committed(sender: Any, *, run_id: int, events: Sequence[RunEvent], **_: Any) -> None:
    """Record and queue the deliveries of these events that the run's callbacks listen to."""
    fresh = any(event.type == "run.queued" for event in events)
    callbacks = run_callbacks(run_id, fresh=fresh)
    wanted = [
        Wanted(event, index, callback)
        for event in events
        for index, callback in enumerate(callbacks)
        if callback.listens_to(event.type)
    ]
    if wanted:
        deliveries_record(run_id=run_id, wanted=wanted)


def run_callbacks(run_id: int, *, fresh: bool = False) -> tuple[engine.Callback, ...]:
    """Return the callbacks of the run's version (none for a run that is gone)."""
    with _lock:
        known = run_id in _versions and not fresh
        version = _versions.get(run_id)
        if known:
            _versions.move_to_end(run_id)
    if not known:
        found = Run.objects.filter(pk=run_id).values_list("version_id", "version__created_at")
        version = found.first()
        with _lock:
            _versions[run_id] = version
            while len(_versions) > MAX_RUNS_KEPT:
                _versions.popitem(last=False)
    if version is None:
        return ()
    try:
        graph, _ = version_graph(*version)
    except engine.RecipeInvalid:
        return ()  # a version this engine no longer reads: its run fails on its own
    return graph.callbacks
