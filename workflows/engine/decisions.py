"""What a step produced (StepResult) and what the engine decided from it (Decision)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from workflows.engine.actions import DecisionKind
from workflows.engine.learner import Choice
from workflows.engine.output_schema import SchemaCheck
from workflows.engine.self_check import ValidationSummary
from workflows.engine.sources import Citation


@dataclass(frozen=True, slots=True)
class StepResult:
    """What one execution of a step produced, as the runner reports it.

    `decision` is a human step's choice (its `response` or `comment` is the reviewer's
    comment); `route_selection` the routes a classify step selected; `leaf` the leaf a
    decision-tree step reached (None: `decide` walks the tree itself); `hits` what the step's
    `sources` found, numbered (None: it searched none); `tool_calls` the calls it made to
    tools, as `StepRun.details["tool_calls"]` stores them (None: it could call none).
    `budget_exceeded`: the step failed because the run's budget refused a model call (its
    `error` says which limit); a branch with a `budget` condition then takes the run on.
    `validation`: how the step's validation loop ended (None: it ran none);
    `classification_failure`: why a classify step got no readable answer (None: it did).
    `transient`: the step failed in a way trying again may help (a timeout, a connection
    error, a provider's 429 or 5xx after its own retries): its severity is RETRIABLE.
    `actor` / `variant`: the alias that answered (another than the step's own after a retry
    or the learner's choice) and the prompt variant it was asked with. `schema`: how its
    answers met its `output_schema` (None: none was checked), for `schema_valid`.
    """

    step_key: str
    response: str = ""
    decision: str | None = None
    comment: str | None = None
    timed_out: bool = False
    error: str | None = None
    route_selection: tuple[str, ...] | None = None
    leaf: str | None = None
    hits: tuple[Citation, ...] | None = None
    tool_calls: Sequence[Mapping[str, Any]] | None = None
    budget_exceeded: bool = False
    validation: ValidationSummary | None = None
    classification_failure: str | None = None
    # Who answered and with which prompt variant (None: the step's own actor, or unknown).
    actor: str | None = None
    variant: str = ""
    # Trying again may help (see above): the failure's severity is RETRIABLE.
    transient: bool = False
    schema: SchemaCheck | None = None
    # An http step's response status (None: it got none, or the step is of another kind).
    http_status: int | None = None
    # Facts the step found (a decision tree's detectors), laid over the run's (None: none).
    facts: Mapping[str, Any] | None = None


# How a finished run ended: the runner's `Outcome` has the same values.
RunOutcome = Literal["completed", "approved", "error_handled", "ended", "failed"]


# Evaluation and Decision are built on every step, ten at a time: plain slotted dataclasses
# construct twice as fast as frozen ones, so they are not frozen.
@dataclass(slots=True)
class Evaluation:
    """One branch evaluated after a step: whether it matched, was taken, and why."""

    branch: str
    priority: int
    matched: bool
    taken: bool
    reason: str


@dataclass(slots=True)
class Decision:
    """Where the run goes next, and every evaluation that led there.

    `next_step` is set for goto, repeat and retry_actor; `actor` is the alias to run it with
    (None: the step's own actor); `prompt_suffix` is plain text to append to the rendered
    prompt; `branch` / `action` name the taken branch (None for the sequential fallback).
    A `fail` decision ends the run as failed, for `reason`: the step limit was reached, or
    the step failed and the branch taken does not ask about errors or timeouts.
    `outcome` is the run's outcome when the decision finishes it (None: the run goes on).
    `feedback`: the failure the taken branch sends back to `next_step`, for its `{feedback}`
    (an error severity of RECLASSIFICATION or REPLANNING, see `severity.py`).
    """

    kind: DecisionKind
    next_step: str | None
    branch: str | None
    action: str | None
    prompt_suffix: str | None
    actor: str | None
    reason: str
    evaluations: list[Evaluation] = field(default_factory=list)
    outcome: RunOutcome | None = None
    # The prompt variant the next attempt asks with ("": the step's own), and how the
    # learner chose its actor and variant when it did (a retry with another actor).
    variant: str = ""
    choice: Choice | None = None
    # The failure sent back to `next_step` (see above).
    feedback: str | None = None
    # Seconds the run waits in the queue before running `next_step` again (a repeat or a
    # retry whose branch asks for a delay: `retry_delays.py`).
    delay_s: float = 0.0
