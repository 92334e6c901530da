"""Keep what a run has done so far, in a form that survives a round trip through JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workflows.engine.answers import json_object
from workflows.engine.errors import EngineError
from workflows.engine.graph import RecipeGraph
from workflows.engine.inputs import resolve_inputs
from workflows.engine.vocabulary import DEFAULT_MAX_STEPS


@dataclass
class RunState:
    """The run's memory between steps; `decide` updates it after every step result.

    - `responses`: every step result in order, as `{"seq", "step", "response"}`;
      `latest`: the latest response per step key.
    - `facts`: the inputs overlaid with the previous step's response when it parses as a JSON
      object (decision-tree steps read the facts and leave them as they were).
    - `visits`: how many times each step was entered; a repeat stays in the same visit, and
      `retries` counts, per (step, visit, branch), how often a bounded branch was taken.
    - `repeating` / `actor_override`: the step whose next result continues the current visit,
      and the actor a RETRY_WITH_DIFFERENT_ACTOR chose for it.
    - `decisions` / `last_decision`: reviewers' decisions per human step and the latest one;
      `route_selections` / `last_route_selection` likewise for classify steps.
    """

    inputs: dict[str, Any] = field(default_factory=dict)
    step_order: list[str] = field(default_factory=list)
    max_steps: int = DEFAULT_MAX_STEPS
    step_count: int = 0
    responses: list[dict[str, Any]] = field(default_factory=list)
    latest: dict[str, str] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    visits: dict[str, int] = field(default_factory=dict)
    retries: dict[tuple[str, int, str], int] = field(default_factory=dict)
    decisions: dict[str, str] = field(default_factory=dict)
    last_decision: str | None = None
    route_selections: dict[str, list[str]] = field(default_factory=dict)
    last_route_selection: list[str] | None = None
    approved: bool = False
    error_handled: bool = False
    repeating: str | None = None
    actor_override: str | None = None

    @classmethod
    def start(
        cls,
        graph: RecipeGraph,
        inputs: Mapping[str, object] | None = None,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
    ) -> RunState:
        """Return the state of a new run; raise InputError if `inputs` do not fit the recipe."""
        resolved = resolve_inputs(graph.inputs, inputs or {})
        return cls(
            inputs=resolved,
            step_order=[step.key for step in graph.steps],
            max_steps=max_steps,
            facts=dict(resolved),
        )

    # -- updates made by `decide` ---------------------------------------------------------

    def enter(self, step_key: str) -> int:
        """Count a new visit of `step_key` unless a repeat continues the current one."""
        if self.repeating != step_key:
            self.visits[step_key] = self.visits.get(step_key, 0) + 1
            self.actor_override = None
        self.repeating = None
        return self.visits[step_key]

    def record(self, step_key: str, response: str, *, overlay_facts: bool = True) -> int:
        """Store a step's response, count the step and refresh the facts; return its seq."""
        self.step_count += 1
        self.responses.append({"seq": self.step_count, "step": step_key, "response": response})
        self.latest[step_key] = response
        if overlay_facts:
            parsed = json_object(response) if "{" in response else None
            self.facts = {**self.inputs, **parsed} if parsed else dict(self.inputs)
        return self.step_count

    def record_decision(self, step_key: str, decision: str) -> None:
        """Store a reviewer's decision on a human step."""
        self.decisions[step_key] = decision
        self.last_decision = decision

    def record_routes(self, step_key: str, selection: tuple[str, ...]) -> None:
        """Store the routes a classify step selected."""
        self.route_selections[step_key] = list(selection)
        self.last_route_selection = list(selection)

    def retries_used(self, step_key: str, branch: str) -> int:
        """Return how often `branch` of `step_key` was taken in the step's current visit."""
        return self.retries.get((step_key, self.visits.get(step_key, 0), branch), 0)

    def count_retry(self, step_key: str, branch: str) -> None:
        """Count one more bounded retry of `branch` in the step's current visit."""
        key = (step_key, self.visits.get(step_key, 0), branch)
        self.retries[key] = self.retries.get(key, 0) + 1

    # -- reads ----------------------------------------------------------------------------

    def template_context(self, step_key: str, feedback: str | None = None) -> dict[str, object]:
        """Return the names `render` may substitute in the prompt of `step_key`.

        Inputs by name; `stepN_response` (N is the step's position in the recipe) and
        `steps.KEY.response`, the step's latest response, or "" if it has not run;
        `feedback`, the validator's feedback on a retry, or "".
        """
        if self.step_order and step_key not in self.step_order:
            raise EngineError(f"unknown step '{step_key}'")
        context: dict[str, object] = dict(self.inputs)
        for number, key in enumerate(self.step_order, start=1):
            response = self.latest.get(key, "")
            context[f"step{number}_response"] = response
            context[f"steps.{key}.response"] = response
        context["feedback"] = feedback or ""
        return context

    # -- JSON -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Return the state as JSON-serialisable data (see `from_dict`)."""
        return {
            "inputs": self.inputs,
            "step_order": self.step_order,
            "max_steps": self.max_steps,
            "step_count": self.step_count,
            "responses": self.responses,
            "latest": self.latest,
            "facts": self.facts,
            "visits": self.visits,
            "retries": [
                {"step": step, "visit": visit, "branch": branch, "count": count}
                for (step, visit, branch), count in self.retries.items()
            ],
            "decisions": self.decisions,
            "last_decision": self.last_decision,
            "route_selections": self.route_selections,
            "last_route_selection": self.last_route_selection,
            "approved": self.approved,
            "error_handled": self.error_handled,
            "repeating": self.repeating,
            "actor_override": self.actor_override,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunState:
        """Rebuild a state from `to_dict` data; missing keys take their defaults."""
        return cls(
            inputs=dict(data.get("inputs") or {}),
            step_order=list(data.get("step_order") or []),
            max_steps=int(data.get("max_steps", DEFAULT_MAX_STEPS)),
            step_count=int(data.get("step_count", 0)),
            responses=[dict(r) for r in data.get("responses") or []],
            latest=dict(data.get("latest") or {}),
            facts=dict(data.get("facts") or {}),
            visits={str(k): int(v) for k, v in (data.get("visits") or {}).items()},
            retries={
                (str(r["step"]), int(r["visit"]), str(r["branch"])): int(r["count"])
                for r in data.get("retries") or []
            },
            decisions=dict(data.get("decisions") or {}),
            last_decision=data.get("last_decision"),
            route_selections={
                str(k): list(v) for k, v in (data.get("route_selections") or {}).items()
            },
            last_route_selection=data.get("last_route_selection"),
            approved=bool(data.get("approved", False)),
            error_handled=bool(data.get("error_handled", False)),
            repeating=data.get("repeating"),
            actor_override=data.get("actor_override"),
        )
