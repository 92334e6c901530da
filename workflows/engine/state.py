"""Keep what a run has done so far, in a form that survives a round trip through JSON."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from workflows.engine.answers import json_object
from workflows.engine.errors import AnswerUnreadable, EngineError
from workflows.engine.file_templates import DocumentText
from workflows.engine.graph import RecipeGraph
from workflows.engine.inputs import resolve_inputs
from workflows.engine.intent import read_intent
from workflows.engine.sources import Citation, format_sources
from workflows.engine.templating import TemplateContext
from workflows.engine.vocabulary import DEFAULT_MAX_STEPS


@dataclass
class RunState:
    """The run's memory between steps; `decide` updates it after every step result.

    It holds what the engine needs to decide, not the answers themselves, so that its size
    does not grow with the run's length (the runner stores it at every step):

    - `step_count`: results recorded so far; the latest one is number `step_count`, the
      runner's StepRun `seq` (numbered from 1 in the same order), where its answer lives.
      `latest_seq`: that number for the latest result of each step key; `attempts`: how
      many results each step key has had.
    - `facts`: the inputs overlaid with the previous step's response when it parses as a JSON
      object (decision-tree steps read the facts and leave them as they were).
    - `visits`: how many times each step was entered; a repeat stays in the same visit, and
      `retries` counts, per (step, visit, branch), how often a bounded branch was taken in
      the step's current visit.
    - `repeating` / `actor_override`: the step whose next result continues the current visit,
      and the actor a RETRY_WITH_DIFFERENT_ACTOR chose for it. `tried_actors`: per step, the
      actors a retry with another actor left in its current visit, never chosen again in it.
    - `decisions` / `last_decision`: reviewers' decisions per human step and the latest one;
      `route_selections` / `last_route_selection` likewise for classify steps.
    - `sources_seq`: the seq of the latest result that searched sources (its StepRun holds
      the hits), None before any did.
    - `reclassified`: per classify step, how often a RECLASSIFICATION branch sent a failure
      back to it in this run; `replans`: per (step, branch), how often a REPLANNING branch
      did (`severity.py`). Unlike `retries` they count over the whole run: a branch that goes
      back starts a new visit.
    - `progress`: per intent step, its criteria and which of them a `criteria_met` judge
      found met so far in the run (`{"criteria": [...], "met": [...]}`): a loop that builds
      its answer up stops once every criterion was met by some answer (`criteria_met`).
    - `intent_pattern`: the pattern of the latest intent an intent step read (`intent.py`),
      "" before any: what learned strategies are kept under and looked up by.
    """

    inputs: dict[str, Any] = field(default_factory=dict)
    step_order: list[str] = field(default_factory=list)
    max_steps: int = DEFAULT_MAX_STEPS
    step_count: int = 0
    latest_seq: dict[str, int] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
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
    tried_actors: dict[str, list[str]] = field(default_factory=dict)
    sources_seq: int | None = None
    reclassified: dict[str, int] = field(default_factory=dict)
    replans: dict[str, dict[str, int]] = field(default_factory=dict)
    progress: dict[str, dict[str, Any]] = field(default_factory=dict)
    intent_pattern: str = ""

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
            self.tried_actors.pop(step_key, None)
            # Only the current visit's retries are read again: forget the earlier visits'.
            self.retries = {k: n for k, n in self.retries.items() if k[0] != step_key}
        self.repeating = None
        return self.visits[step_key]

    def record(
        self,
        step_key: str,
        response: str,
        *,
        overlay_facts: bool = True,
        merge_facts: bool = False,
    ) -> int:
        """Count a step's result and refresh the facts from its response; return its seq.

        With `merge_facts`, a JSON object response is laid over the current facts instead
        of the inputs (a transform step's results add to the facts it read).
        The response itself is not kept: the runner stores it under the returned seq.
        """
        self.step_count += 1
        self.latest_seq[step_key] = self.step_count
        self.attempts[step_key] = self.attempts.get(step_key, 0) + 1
        if overlay_facts:
            parsed = json_object(response) if "{" in response else None
            base = self.facts if merge_facts else self.inputs
            self.facts = {**base, **parsed} if parsed else dict(base)
        return self.step_count

    def record_intent(self, response: str) -> None:
        """Note the pattern of the intent an intent step answered (kept when unreadable)."""
        with suppress(AnswerUnreadable):
            self.intent_pattern = read_intent(response).pattern

    def record_decision(self, step_key: str, decision: str) -> None:
        """Store a reviewer's decision on a human step."""
        self.decisions[step_key] = decision
        self.last_decision = decision

    def record_routes(self, step_key: str, selection: tuple[str, ...]) -> None:
        """Store the routes a classify step selected."""
        self.route_selections[step_key] = list(selection)
        self.last_route_selection = list(selection)

    def record_hits(self, seq: int) -> None:
        """Note that result `seq` searched sources: `{sources}` of later steps shows its hits."""
        self.sources_seq = seq

    def retries_used(self, step_key: str, branch: str) -> int:
        """Return how often `branch` of `step_key` was taken in the step's current visit."""
        return self.retries.get((step_key, self.visits.get(step_key, 0), branch), 0)

    def count_retry(self, step_key: str, branch: str) -> None:
        """Count one more bounded retry of `branch` in the step's current visit."""
        key = (step_key, self.visits.get(step_key, 0), branch)
        self.retries[key] = self.retries.get(key, 0) + 1

    def replans_used(self, step_key: str, branch: str) -> int:
        """Return how often REPLANNING branch `branch` of `step_key` was taken in the run."""
        return self.replans.get(step_key, {}).get(branch, 0)

    def count_replan(self, step_key: str, branch: str) -> None:
        """Count one more replanning through `branch` of `step_key`."""
        counts = self.replans.setdefault(step_key, {})
        counts[branch] = counts.get(branch, 0) + 1

    def note_tried(self, step_key: str, actor: str) -> None:
        """Remember that `actor` ran `step_key` in its current visit and a retry left it."""
        tried = self.tried_actors.setdefault(step_key, [])
        if actor not in tried:
            tried.append(actor)

    # -- reads ----------------------------------------------------------------------------

    def template_context(
        self,
        step_key: str,
        answers: Callable[[int], str],
        feedback: str | None = None,
        *,
        hits: Callable[[int], Sequence[Citation]] | None = None,
        own_hits: Sequence[Citation] | None = None,
        learned: Callable[[str], str] | None = None,
        documents: Callable[[str], Sequence[DocumentText]] | None = None,
        file_inputs: Mapping[str, bool] | None = None,
    ) -> TemplateContext:
        """Return the names `render` may substitute in the templates of `step_key`.

        Inputs by name; `stepN_response` (N is the step's position in the recipe) and
        `steps.KEY.response`, the step's latest answer, `answers(seq)`, or "" if it has not
        run; `feedback`, the validator's feedback on a retry, or "". `sources`: `own_hits`,
        the step's own (when it searched), else the run's latest hits; `steps.KEY.sources` the
        hits of KEY's latest result; each read as `hits(seq)`, formatted, "" when none.
        `learned_strategies`: `learned(intent_pattern)`, "" without it. `files.NAME.…`: the
        documents of a file input (`file_inputs`: name -> takes several), `documents(NAME)`.
        `answers`, `hits`, `learned` and `documents` are asked only for what a template names.
        """
        if self.step_order and step_key not in self.step_order:
            raise EngineError(f"unknown step '{step_key}'")

        def answer(key: str) -> str:
            seq = self.latest_seq.get(key)
            return "" if seq is None else answers(seq)

        def sources(key: str | None) -> str:
            if key is None and own_hits is not None:
                return format_sources(own_hits)
            seq = self.sources_seq if key is None else self.latest_seq.get(key)
            return "" if seq is None or hits is None else format_sources(hits(seq))

        pattern = self.intent_pattern
        shown = None if learned is None else lambda: learned(pattern)
        return TemplateContext(
            self.inputs,
            self.step_order,
            answer,
            feedback or "",
            sources,
            shown,
            documents=documents,
            file_inputs=file_inputs,
        )

    def last_answer(self, answers: Callable[[int], str]) -> str:
        """Return the answer of the run's latest result (any step's), or "" before the first."""
        return answers(self.step_count) if self.step_count else ""

    # -- JSON -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Return the state as JSON-serialisable data (see `from_dict`)."""
        return {
            "inputs": self.inputs,
            "step_order": self.step_order,
            "max_steps": self.max_steps,
            "step_count": self.step_count,
            "latest_seq": self.latest_seq,
            "attempts": self.attempts,
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
            "tried_actors": self.tried_actors,
            "sources_seq": self.sources_seq,
            "reclassified": self.reclassified,
            "replans": self.replans,
            "progress": self.progress,
            "intent_pattern": self.intent_pattern,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunState:
        """Rebuild a state from `to_dict` data; missing keys take their defaults.

        A state stored before answers moved out of it (with `responses`, every result in full)
        loads too: the references are taken from its list, the texts left to the StepRuns.
        """
        if "responses" in data:
            latest_seq, attempts = _references(data["responses"] or [])
        else:
            latest_seq = {str(k): int(v) for k, v in (data.get("latest_seq") or {}).items()}
            attempts = {str(k): int(v) for k, v in (data.get("attempts") or {}).items()}
        return cls(
            inputs=dict(data.get("inputs") or {}),
            step_order=list(data.get("step_order") or []),
            max_steps=int(data.get("max_steps", DEFAULT_MAX_STEPS)),
            step_count=int(data.get("step_count", 0)),
            latest_seq=latest_seq,
            attempts=attempts,
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
            # A state stored before `tried_actors` existed knows none: the retry then excludes
            # the step's own actor and the current one, as it did.
            tried_actors={
                str(k): [str(a) for a in v] for k, v in (data.get("tried_actors") or {}).items()
            },
            sources_seq=int(data["sources_seq"]) if data.get("sources_seq") is not None else None,
            # A state stored before severities existed has sent no failure back.
            reclassified={str(k): int(v) for k, v in (data.get("reclassified") or {}).items()},
            replans={
                str(step): {str(b): int(n) for b, n in branches.items()}
                for step, branches in (data.get("replans") or {}).items()
            },
            progress={str(k): dict(v) for k, v in (data.get("progress") or {}).items()},
            intent_pattern=str(data.get("intent_pattern") or ""),
        )


def _references(responses: Iterable[Mapping[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
    """Return `latest_seq` and `attempts` from a stored list of `{"seq", "step", "response"}`."""
    latest_seq: dict[str, int] = {}
    attempts: dict[str, int] = {}
    for result in responses:
        key = str(result["step"])
        latest_seq[key] = int(result["seq"])
        attempts[key] = attempts.get(key, 0) + 1
    return latest_seq, attempts
