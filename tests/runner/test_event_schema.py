"""The events' schema: it covers every builder, DESIGN.md's list and what the pages read.

Every runner test also checks the events it records against it (`event_checks.py`).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User

from runner import events
from runner.event_schema import EVENT_SCHEMAS, event_problems
from runner.models import HumanTask, StepRun
from runner.status import Outcome, RunStatus, StepStatus, TaskStatus
from workflows import engine

STATIC = Path(__file__).resolve().parents[2] / "static"

# DESIGN.md §4, "Events": the types the contract names (the schema may hold more).
DESIGN_EVENT_TYPES = {
    "run.started",
    "step.started",
    "step.token",
    "step.finished",
    "branch.evaluated",
    "branch.taken",
    "human_task.created",
    "human_task.decided",
    "run.finished",
}


def a_task() -> HumanTask:
    """An unsaved task, decided, of a group (what the `human_task.*` builders read)."""
    return HumanTask(
        pk=7,
        run_id=3,
        step_key="review",
        group=Group(pk=1, name="editors"),
        question="Is this story good?",
        material="Once upon a time",
        options=["approve", "reject"],
        due_at=datetime(2026, 11, 24, 12, tzinfo=UTC),
        status=TaskStatus.DECIDED,
        decision="approve",
        comment="fine",
        decided_by=User(pk=2, username="rita"),
    )


def a_step_run() -> StepRun:
    return StepRun(
        seq=2,
        attempt=1,
        step_key="write",
        status=StepStatus.SUCCEEDED,
        response="Once upon a time",
        latency_ms=12,
        tokens_in=3,
        tokens_out=5,
        confidence=0.9,
        details={"attempts": []},
    )


DECISION = engine.Decision(
    kind="goto",
    next_step="review",
    branch="good",
    action="goto",
    prompt_suffix=None,
    actor=None,
    reason="score 7 >= 5",
)

# One call of every builder, with the values the runner gives it.
BUILT: dict[str, Callable[[], events.Event]] = {
    "run_queued": lambda: events.run_queued(version=1),
    "run_started": events.run_started,
    "run_status": lambda: events.run_status(RunStatus.WAITING_HUMAN),
    "run_finished": lambda: events.run_finished(
        status=RunStatus.FAILED, outcome=Outcome.FAILED, error="step 'write' failed"
    ),
    "step_started": lambda: events.step_started(
        seq=1, step="write", name="Write", kind="llm", actor="writer", attempt=1
    ),
    "step_token": lambda: events.step_token(seq=1, text="Once", offset=0),
    "step_tool_call": lambda: events.step_tool_call(
        seq=1,
        call={
            "tool": "demo.add",
            "arguments": {"a": 2},
            "result": "",
            "is_error": True,
            "error": "server down",
            "truncated": False,
            "latency_ms": 3,
        },
    ),
    "step_finished": lambda: events.step_finished(a_step_run()),
    "branch_evaluated": lambda: events.branch_evaluated(
        seq=2,
        step="judge",
        evaluation=engine.Evaluation("good", 1, True, True, "score 7 >= 5"),
    ),
    "branch_taken": lambda: events.branch_taken(seq=2, step="judge", decision=DECISION),
    "human_task_created": lambda: events.human_task_created(a_task()),
    "human_task_decided": lambda: events.human_task_decided(a_task()),
    "human_task_timed_out": lambda: events.human_task_timed_out(a_task()),
    "human_task_escalated": lambda: events.human_task_escalated(a_task()),
    "human_task_closed": lambda: events.human_task_closed(a_task()),
}


def builders() -> set[str]:
    """The functions of `runner.events` that build an Event."""
    return {
        name
        for name, function in inspect.getmembers(events, inspect.isfunction)
        if function.__module__ == events.__name__
        and inspect.signature(function).return_annotation == "Event"
    }


def test_every_builder_is_called_here() -> None:
    assert set(BUILT) == builders()


@pytest.mark.parametrize("name", sorted(BUILT))
def test_each_builders_event_matches_the_schema(name: str) -> None:
    event = BUILT[name]()

    assert event_problems(event) == []
    assert event.type.replace(".", "_") == name


def test_the_schema_has_a_builder_for_each_of_its_types() -> None:
    assert {build().type for build in BUILT.values()} == set(EVENT_SCHEMAS)


def test_the_schema_holds_every_type_design_md_names() -> None:
    assert set(EVENT_SCHEMAS) >= DESIGN_EVENT_TYPES


def test_the_pages_read_only_types_the_schema_holds() -> None:
    read = {
        match
        for script in STATIC.glob("*/*.js")
        for match in re.findall(r'case "(\w+\.\w+)":', script.read_text())
    }

    assert read  # the monitor's and the test run's event switches
    assert set(EVENT_SCHEMAS) >= read


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        (events.Event("run.paused", {}), "run.paused: not an event type"),
        (events.Event("run.status", {}), "run.status.status: missing"),
        (
            events.Event("run.status", {"status": "running", "why": ""}),
            "run.status.why: not in the schema",
        ),
        (
            events.Event("step.token", {"seq": "1", "text": "", "offset": 0}),
            "step.token.seq: '1' is not",
        ),
        (
            events.Event("step.token", {"seq": True, "text": "", "offset": 0}),
            "step.token.seq: True is not",
        ),
        (
            events.Event("step.started", {**BUILT["step_started"]().data, "actor": 3}),
            "step.started.actor: 3 is not",
        ),
    ],
)
def test_it_tells_what_is_wrong_with_an_event(event: events.Event, problem: str) -> None:
    problems = event_problems(event)

    assert len(problems) == 1
    assert problems[0].startswith(problem)
