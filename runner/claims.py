"""What a worker holds while it runs one step: the claim, the step's outcome, and the commit
that stores them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings

from workflows import engine

from . import actors
from .events import Event
from .model_calls import CallRecord
from .models import BranchEvaluation, HumanTask, ModelCall, StepRun
from .status import RUNNABLE, RunStatus, StepStatus

TOKEN_PUSH_INTERVAL_S = 0.1
SCRIPTED_TIMEOUT = "@timeout"  # a dry-run script's way to let a human task time out


def lease_seconds() -> int:
    return settings.RUN_LEASE_SECONDS


@dataclass
class Claim:
    """The lease on a run's next step (`seq`), and what executing it needs."""

    run_id: int
    token: str
    seq: int
    attempt: int
    step: engine.StepSpec
    graph: engine.RecipeGraph
    document: dict[str, Any]
    state: engine.RunState
    next: dict[str, Any]  # the run's `next`: the step, and how to run it
    calls: dict[str, int]
    script: dict[str, Any] | None
    recipe_id: int
    owner_id: int
    created_at: datetime  # the run's: its trace id is derived from it (runner.tracing)
    # The run's event_seq once the claim is committed: the commit numbers its events from it.
    event_seq: int = 0
    # Actors resolved in this time slice, by alias (looked up once per slice, not per step).
    resolved: dict[str, actors.ResolvedActor] = field(default_factory=dict)
    # What the run's committed steps spent (its totals), and when it started: its budget
    # counts from them. Only the lease holder adds to the totals, so the claim keeps them.
    spent: engine.Spend = field(default_factory=engine.Spend)
    started_at: datetime | None = None
    # The run's start options (`Run.options`: how its classify steps classify).
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepOutcome:
    status: str
    prompt: str = ""
    response: str = ""
    decision: str = ""
    error: str = ""
    timed_out: bool = False
    actor_alias: str = ""
    actor_name: str = ""
    # The prompt variant asked with ("": the step's own prompt), and how the learner chose
    # the actor and variant (`engine.Choice.as_json`) when it did.
    variant: str = ""
    choice: dict[str, Any] | None = None
    latency_ms: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    confidence: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    started_at: Any = None
    leaf: str | None = None
    route_selection: tuple[str, ...] | None = None
    task: HumanTask | None = None  # resumed human step
    scripted_decision: str | None = None  # dry run: the script decides the human step
    human_group_id: int | None = None
    material: str = ""  # what reviewers read beside the question
    hits: tuple[engine.Citation, ...] | None = None  # what the step's sources found
    # the calls the step made to tools (None: it could call none); kept in details too
    tool_calls: tuple[dict[str, Any], ...] | None = None
    # every call the step made to a model, its evaluators' included (runner.model_calls)
    model_calls: list[CallRecord] = field(default_factory=list)
    budget_exceeded: bool = False  # the run's budget refused one of its calls


@dataclass
class StepCommit:
    """What one step's commit writes, all or nothing, if the worker still holds the lease.

    `step_run` is inserted with its `evaluations`, or updated if it exists (a human step resumed
    by its decision). A human step that opens its task is not decided yet: its StepRun waits
    (inserted with the task, `store.insert_task`), and the run's state and seq stay as they
    were; `task` is that task if a dry-run script answered it at once (its answer is saved
    with the commit, and `next` points at it for the run to go on with the step).
    `events` are the step's, in order; the store adds those of the next step it claims. With
    `go_on`, the run's next step is claimed in the same commit; without, a run that has one is
    handed back to the queue. `model_calls` are the step's calls to models, inserted with it;
    their totals are added to the run's.
    """

    claim: Claim
    step_run: StepRun
    evaluations: list[BranchEvaluation]
    events: list[Event]
    next: dict[str, Any]
    status: str = RunStatus.RUNNING
    outcome: str = ""
    error: str = ""
    task: HumanTask | None = None
    go_on: bool = False
    model_calls: list[ModelCall] = field(default_factory=list)

    @property
    def decided(self) -> bool:
        """Whether the step is decided (not a human step waiting for its task's answer)."""
        return self.step_run.status != StepStatus.WAITING_HUMAN

    @property
    def next_step(self) -> str | None:
        """The key of the step the run executes next, if it has one (and still runs)."""
        step: str | None = self.next.get("step") if self.status in RUNNABLE else None
        return step

    @property
    def hands_back(self) -> bool:
        """Whether the commit hands the run back to the queue (the caller sends its message)."""
        return self.next_step is not None and not self.go_on
