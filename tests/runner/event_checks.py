"""A fixture that checks every event a runner test records or streams against the schema.

Used by `tests/runner/conftest.py` for every runner test, as Zulip's tests check every event
they see. Events are also recorded by worker threads, where an exception would be lost or would
stop the worker: problems are collected, and the test fails at its end.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import wraps
from typing import Any

import pytest

from runner import events
from runner.event_schema import event_problems


@pytest.fixture(autouse=True)
def events_match_their_schema(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail the test if an event it recorded (through `events.rows`) or streamed (through
    `events.step_token`) does not match `runner.event_schema`."""
    problems: list[str] = []
    make_rows, make_token, make_tool_call = events.rows, events.step_token, events.step_tool_call

    @wraps(make_rows)
    def checked_rows(run_id: int, recorded: Iterable[events.Event], **kwargs: Any) -> Any:
        recorded = list(recorded)
        for event in recorded:
            problems.extend(event_problems(event))
        return make_rows(run_id, recorded, **kwargs)

    @wraps(make_token)
    def checked_token(**kwargs: Any) -> events.Event:
        event = make_token(**kwargs)
        problems.extend(event_problems(event))
        return event

    @wraps(make_tool_call)
    def checked_tool_call(**kwargs: Any) -> events.Event:
        event = make_tool_call(**kwargs)
        problems.extend(event_problems(event))
        return event

    monkeypatch.setattr(events, "rows", checked_rows)
    monkeypatch.setattr(events, "step_tool_call", checked_tool_call)
    monkeypatch.setattr(events, "step_token", checked_token)
    yield
    assert not problems, "events that do not match runner.event_schema:\n" + "\n".join(problems)
