"""Execute runs: claim the next step under a lease, run it outside any transaction, and
commit it once — StepRun, branch evaluations, the run's new state and its events together.

PostgreSQL holds all state; Celery messages only say "look at run N" and may be lost or repeated.
A worker may go on with the run's next step for a short time slice, then hands the run back to
the queue so that runs share the workers fairly.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from workflows import engine
from workflows.models import RecipeVersion

from . import actors, events, fast_commit
from .models import BranchEvaluation, HumanTask, Run, RunEvent, StepRun
from .providers import ProviderError, ProviderTimeoutError
from .status import RUNNABLE, Outcome, RunStatus, StepStatus, TaskStatus, check_transition

log = logging.getLogger(__name__)

TOKEN_PUSH_INTERVAL_S = 0.1
SCRIPTED_TIMEOUT = "@timeout"  # a dry-run script's way to let a human task time out


def lease_seconds() -> int:
    return settings.RUN_LEASE_SECONDS


@lru_cache(maxsize=128)
def version_graph(
    version_id: int, created_at: datetime
) -> tuple[engine.RecipeGraph, dict[str, Any]]:
    """Load and parse a published version once per process (versions never change).

    Keyed by creation time too: a test database may give a rolled-back version's id to another.
    """
    document = RecipeVersion.objects.values_list("document", flat=True).get(pk=version_id)
    return engine.parse_recipe(document), document


@dataclass
class Claim:
    run_id: int
    token: str
    seq: int
    attempt: int
    step: engine.StepSpec
    graph: engine.RecipeGraph
    document: dict[str, Any]
    state: engine.RunState
    directive: dict[str, Any]
    calls: dict[str, int]
    script: dict[str, Any] | None
    recipe_id: int
    owner_id: int
    # The run's event_seq once the claim is committed: the commit numbers its events from it.
    event_seq: int = 0
    # Actors resolved in this time slice, by alias (looked up once per slice, not per step).
    resolved: dict[str, actors.ResolvedActor] = field(default_factory=dict)


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


# --------------------------------------------------------------------------------------------
# The loop a Celery task runs


def advance(run_id: int, *, time_slice: float | None = None) -> None:
    """Execute the run's runnable steps one by one until it waits, ends, or the slice is used.

    Each step's commit claims the next one in the same transaction while the slice lasts, and
    hands the run back to the queue once it is used.
    """
    slice_s = settings.RUN_TIME_SLICE_SECONDS if time_slice is None else time_slice
    deadline = time.monotonic() + slice_s
    claim = claim_next_step(run_id)
    if claim is None:
        return
    # One lease token for the slice: each commit checks it together with the step's seq.
    with _LeaseKeeper(claim.run_id, claim.token):
        while claim is not None:
            outcome, decision = execute(claim)
            claim = commit(claim, outcome, decision, go_on=time.monotonic() < deadline)


def enqueue(run_id: int) -> None:
    """Ask a worker to look at the run (after the current transaction commits, if any)."""
    Run.objects.filter(pk=run_id).update(enqueued_at=timezone.now())
    _send_on_commit(run_id)


def _send_on_commit(run_id: int) -> None:
    from .tasks import advance_run

    transaction.on_commit(lambda: advance_run.delay(run_id))


# --------------------------------------------------------------------------------------------
# Claim


def claim_next_step(run_id: int) -> Claim | None:
    """Take the lease on the run's next step, or return None if there is nothing to take."""
    now = timezone.now()
    with transaction.atomic():
        run = (
            Run.objects.select_related("version")
            .defer("version__document")  # parsed once per process: see version_graph
            .select_for_update(of=("self",))
            .filter(pk=run_id)
            .first()
        )
        if run is None or run.status not in RUNNABLE or not run.next.get("step"):
            return None
        if run.lease_token and run.lease_expires_at and run.lease_expires_at > now:
            return None  # another worker holds it
        if run.claims >= settings.RUN_MAX_STEP_CLAIMS:
            _finish(
                run,
                RunStatus.FAILED,
                Outcome.FAILED,
                f"step '{run.next['step']}' was lost {run.claims} times: the workers running it "
                "stopped before finishing",
            )
            events.record(run, [("run.finished", _finished_data(run))])
            run.save(
                update_fields=[
                    "status",
                    "outcome",
                    "error",
                    "next",
                    "finished_at",
                    "lease_token",
                    "lease_expires_at",
                    "event_seq",
                ]
            )
            return None
        graph, document = version_graph(run.version_id, run.version.created_at)
        pending: list[tuple[str, dict[str, Any]]] = []
        if run.status == RunStatus.QUEUED:
            check_transition(run.status, RunStatus.RUNNING)
            run.status = RunStatus.RUNNING
            run.started_at = now
            pending.append(("run.started", {"status": run.status}))
        claim = _take_lease(run, graph, document, now, pending)
        events.record(run, pending)
        claim.event_seq = run.event_seq
        run.save(
            update_fields=[
                "status",
                "started_at",
                "lease_token",
                "lease_expires_at",
                "claims",
                "event_seq",
            ]
        )
    return claim


def _take_lease(
    run: Run,
    graph: engine.RecipeGraph,
    document: dict[str, Any],
    now: datetime,
    pending: list[tuple[str, dict[str, Any]]],
    previous: Claim | None = None,
) -> Claim:
    """Lease the run's next step to this worker (the caller saves the run and the events).

    `previous` is the step this worker commits in the same transaction: the next one keeps its
    lease token and the actors it resolved.
    """
    step = graph.step(run.next["step"])
    resume_task = run.next.get("resume_task")
    if resume_task:
        attempt = StepRun.objects.get(task__pk=resume_task).attempt
    else:
        # The state records one response per committed StepRun, in the same transaction.
        responses = previous.state.responses if previous else run.state.get("responses", ())
        attempt = 1 + sum(1 for r in responses if r["step"] == step.key)
        pending.append(
            (
                "step.started",
                {
                    "seq": run.next_seq,
                    "step": step.key,
                    "name": step.name,
                    "kind": step.kind,
                    "actor": run.next.get("actor") or step.actor,
                    "attempt": attempt,
                },
            )
        )
    run.lease_token = previous.token if previous else str(uuid.uuid4())
    run.lease_expires_at = now + timedelta(seconds=lease_seconds())
    run.claims += 1
    return Claim(
        run_id=run.pk,
        token=run.lease_token,
        seq=run.next_seq,
        attempt=attempt,
        step=step,
        graph=graph,
        document=document,
        state=engine.RunState.from_dict(copy.deepcopy(run.state)),
        directive=dict(run.next),
        calls=dict(run.calls),
        script=run.script,
        recipe_id=run.recipe_id,
        owner_id=run.created_by_id,
        resolved=previous.resolved if previous else {},
    )


# --------------------------------------------------------------------------------------------
# Execute (no transaction is open here: model calls may take minutes)


class _Session:
    """What one step execution needs to call actors: the run's call counters and its script."""

    def __init__(self, claim: Claim) -> None:
        self.claim = claim
        self.calls = claim.calls
        self.resolved = claim.resolved

    def resolve(self, alias: str) -> actors.ResolvedActor:
        if alias not in self.resolved:
            self.resolved[alias] = actors.resolve(
                alias, document=self.claim.document, script=self.claim.script
            )
        return self.resolved[alias]

    def ask(self, alias: str, prompt: str, *, timeout_s: float | None = None, on_token: Any = None):  # type: ignore[no-untyped-def]
        actor = self.resolve(alias)
        index = self.calls.get(alias, 0)
        self.calls[alias] = index + 1
        return actor, actors.call(
            actor, prompt, call_index=index, timeout_s=timeout_s, on_token=on_token
        )

    def judge(self, evaluator: str, prompt: str, text: str) -> str:
        instruction = prompt or "Rate the quality of the text from 1 to 10."
        return self.ask(evaluator, engine.evaluation_prompt(instruction, text))[1].text


def execute(claim: Claim) -> tuple[StepOutcome, engine.Decision | None]:
    """Run the claimed step and decide what comes next (no database transaction is held)."""
    session = _Session(claim)
    step = claim.step
    started = timezone.now()
    try:
        if step.kind == "human":
            outcome = _execute_human(claim, session)
        elif step.kind == "decision_tree":
            outcome = _execute_tree(claim)
        elif step.kind == "classify":
            outcome = _execute_classify(claim, session)
        else:
            outcome = _execute_llm(claim, session)
    except (LookupError, engine.EngineError) as exc:
        outcome = StepOutcome(status=StepStatus.FAILED, error=str(exc))
    outcome.started_at = started
    if outcome.status == StepStatus.WAITING_HUMAN:
        return outcome, None
    result = engine.StepResult(
        step_key=step.key,
        response=outcome.response,
        decision=outcome.decision or None,
        comment=outcome.response if step.kind == "human" else None,
        timed_out=outcome.timed_out,
        error=outcome.error or None,
        route_selection=outcome.route_selection,
        leaf=outcome.leaf,
    )
    decision = engine.decide(
        claim.graph,
        claim.state,
        result,
        judge=session.judge,
        actor_stats=_actor_stats(claim),
    )
    return outcome, decision


def _render(claim: Claim, feedback: str | None = None) -> str:
    context = claim.state.template_context(claim.step.key, feedback=feedback)
    prompt = engine.render(claim.step.prompt, context)
    suffix = claim.directive.get("prompt_suffix")
    return f"{prompt}\n\n{suffix}" if suffix else prompt


def _execute_llm(claim: Claim, session: _Session) -> StepOutcome:
    step = claim.step
    alias = claim.directive.get("actor") or step.actor
    outcome = StepOutcome(status=StepStatus.SUCCEEDED, actor_alias=alias or "")
    try:
        outcome.prompt = _render(claim)
    except engine.TemplateError as exc:
        return StepOutcome(status=StepStatus.FAILED, error=str(exc), actor_alias=alias or "")
    streamer = _TokenStreamer(claim.run_id, claim.seq)
    began = time.monotonic()
    try:
        actor = session.resolve(alias)
        outcome.actor_name = actor.name
        if step.validation:
            outcome = _with_validation(claim, session, outcome, streamer)
        else:
            _, result = session.ask(
                alias, outcome.prompt, timeout_s=step.timeout_s, on_token=streamer.add
            )
            outcome.response = result.text
            outcome.tokens_in, outcome.tokens_out = result.tokens_in, result.tokens_out
    except ProviderError as exc:
        outcome.status = StepStatus.FAILED
        outcome.error = str(exc)
        outcome.timed_out = isinstance(exc, ProviderTimeoutError)
        if outcome.timed_out:
            outcome.status = StepStatus.TIMED_OUT
    finally:
        streamer.flush()
    outcome.latency_ms = int((time.monotonic() - began) * 1000)
    return outcome


def _with_validation(
    claim: Claim, session: _Session, outcome: StepOutcome, streamer: _TokenStreamer
) -> StepOutcome:
    step = claim.step
    settings_ = step.validation or {}
    judge_alias = settings_.get("judge") or step.actor
    tokens = {"in": 0, "out": 0}

    def generate(feedback: str | None) -> str:
        prompt = _render(claim, feedback)
        if feedback and "{feedback}" not in claim.step.prompt:
            prompt += f"\n\nFeedback on your previous answer: {feedback}"
        _, result = session.ask(
            claim.directive.get("actor") or step.actor,
            prompt,
            timeout_s=step.timeout_s,
            on_token=streamer.add,
        )
        tokens["in"] += result.tokens_in or 0
        tokens["out"] += result.tokens_out or 0
        return result.text

    validated = engine.run_validation_loop(
        generate,
        lambda prompt: session.ask(judge_alias, prompt)[1].text,
        question=outcome.prompt,
        threshold=settings_.get("threshold", 0.75),
        max_attempts=settings_.get("max_attempts", 5),
        fallback=settings_.get("fallback", ""),
    )
    outcome.response = validated.response
    outcome.confidence = validated.confidence
    outcome.tokens_in, outcome.tokens_out = tokens["in"] or None, tokens["out"] or None
    outcome.details["validation"] = {
        "used_fallback": validated.used_fallback,
        "attempts": [
            {
                "response": a.response,
                "rule_score": a.rule_score,
                "confidence": a.confidence,
                "feedback": a.feedback,
            }
            for a in validated.attempts
        ],
    }
    return outcome


def _execute_tree(claim: Claim) -> StepOutcome:
    tree = claim.step.tree or {}
    result = engine.evaluate_tree(tree, claim.state.facts)
    return StepOutcome(
        status=StepStatus.SUCCEEDED,
        response=result.leaf,
        leaf=result.leaf,
        details={"trace": list(result.trace)},
    )


def _execute_classify(claim: Claim, session: _Session) -> StepOutcome:
    step = claim.step
    prompt = _render(claim)
    began = time.monotonic()
    try:
        result = engine.classify(
            prompt,
            step.routes,
            lambda question: session.ask(step.actor, question, timeout_s=step.timeout_s)[1].text,
            bypass=step.bypass,
            max_reclassify=step.max_reclassify,
        )
    except ProviderError as exc:
        return StepOutcome(
            status=StepStatus.FAILED, prompt=prompt, error=str(exc), actor_alias=step.actor or ""
        )
    return StepOutcome(
        status=StepStatus.SUCCEEDED,
        prompt=prompt,
        response=", ".join(result.selected),
        route_selection=tuple(result.selected),
        actor_alias=step.actor or "",
        latency_ms=int((time.monotonic() - began) * 1000),
        details={"trace": list(result.trace), "selected": list(result.selected)},
    )


def _execute_human(claim: Claim, session: _Session) -> StepOutcome:
    step = claim.step
    task_id = claim.directive.get("resume_task")
    if task_id:
        task = HumanTask.objects.get(pk=task_id)
        return StepOutcome(
            status=StepStatus.TIMED_OUT
            if task.status == TaskStatus.TIMED_OUT
            else StepStatus.DECIDED,
            prompt=task.question,
            response=task.comment,
            decision=task.decision,
            timed_out=task.status == TaskStatus.TIMED_OUT,
            actor_alias=step.actor or "",
            task=task,
        )
    actor = session.resolve(step.actor or "")
    outcome = StepOutcome(
        status=StepStatus.WAITING_HUMAN,
        prompt=_render(claim),
        material=_render_material(claim),
        actor_alias=actor.alias,
        actor_name=actor.name,
        human_group_id=actor.group_id,
    )
    if actor.scripted:
        index = session.calls.get(actor.alias, 0)
        session.calls[actor.alias] = index + 1
        outcome.scripted_decision = actor.scripted[min(index, len(actor.scripted) - 1)]
    return outcome


def _actor_stats(claim: Claim) -> Sequence[engine.ActorStats]:
    """Outcomes per actor on this step, for a retry with another actor that names none.

    Derived from the recipe's committed LLM StepRuns, and only queried if the engine asks.
    """
    if not any(
        b.action == "RETRY_WITH_DIFFERENT_ACTOR" and not b.params.get("alternative_actor")
        for b in claim.step.branches
    ):
        return []
    return _LazyActorStats(claim)


def actor_stat_rows(**filters: Any) -> Any:
    """Per (recipe, step, actor) of LLM steps: attempts, successes and total latency (ms)."""
    return (
        StepRun.objects.filter(kind="llm", **filters)
        .exclude(actor_alias="")
        .values("run__recipe_id", "step_key", "actor_alias")
        .annotate(
            attempts=Count("id"),
            successes=Count("id", filter=Q(status=StepStatus.SUCCEEDED)),
            total_latency_ms=Coalesce(Sum("latency_ms"), 0),
        )
        .order_by("run__recipe_id", "step_key", "actor_alias")
    )


class _LazyActorStats(Sequence[engine.ActorStats]):
    """The step's actor statistics, aggregated from StepRuns on first use."""

    def __init__(self, claim: Claim) -> None:
        self.claim = claim
        self._stats: list[engine.ActorStats] | None = None

    def _load(self) -> list[engine.ActorStats]:
        if self._stats is None:
            claim = self.claim
            rows = {
                r["actor_alias"]: r
                for r in actor_stat_rows(run__recipe_id=claim.recipe_id, step_key=claim.step.key)
            }
            self._stats = [
                engine.ActorStats(
                    actor=alias,
                    successes=rows[alias]["successes"] if alias in rows else 0,
                    attempts=rows[alias]["attempts"] if alias in rows else 0,
                    mean_latency_ms=rows[alias]["total_latency_ms"] / rows[alias]["attempts"]
                    if alias in rows
                    else 0.0,
                )
                for alias, ref in claim.document.get("actors", {}).items()
                if not ref.startswith("@human:")
            ]
        return self._stats

    def __getitem__(self, index: Any) -> Any:
        return self._load()[index]

    def __len__(self) -> int:
        return len(self._load())

    def __iter__(self) -> Iterator[engine.ActorStats]:
        return iter(self._load())


class _TokenStreamer:
    """Push streamed text live, a batch every 100 ms rather than one message per token."""

    def __init__(self, run_id: int, seq: int) -> None:
        self.run_id, self.seq = run_id, seq
        self.buffer: list[str] = []
        self.last_push = time.monotonic()

    def add(self, text: str) -> None:
        self.buffer.append(text)
        if time.monotonic() - self.last_push >= TOKEN_PUSH_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            events.push_token(self.run_id, self.seq, "".join(self.buffer))
            self.buffer.clear()
        self.last_push = time.monotonic()


class _LeaseKeeper:
    """Renew the run's lease while a step runs, so that only a dead worker's lease expires."""

    def __init__(self, run_id: int, token: str) -> None:
        self.run_id, self.token = run_id, token
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._renew, name=f"lease-{run_id}", daemon=True)

    def __enter__(self) -> _LeaseKeeper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _renew(self) -> None:
        interval = lease_seconds() / 3
        try:
            while not self.stop.wait(interval):
                Run.objects.filter(pk=self.run_id, lease_token=self.token).update(
                    lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds())
                )
        finally:
            connection.close()


# --------------------------------------------------------------------------------------------
# Commit


class _Fenced(Exception):
    """The worker's lease was taken over, or the run stopped: the commit must write nothing."""


def commit(
    claim: Claim,
    outcome: StepOutcome,
    decision: engine.Decision | None,
    *,
    go_on: bool = False,
) -> Claim | None:
    """Store the step's result and the run's next move in one transaction.

    If the run has a next step to execute now, it is claimed in the same transaction and
    returned with `go_on`; without, the run is handed back to the queue. A worker whose lease
    was taken over (it was presumed dead) commits nothing.

    The run's row is not read: the claim knows it (only the lease holder moves a leased run).
    The first statement is the fenced UPDATE of the run, which also locks its row until commit.
    """
    try:
        with transaction.atomic():
            if outcome.status == StepStatus.WAITING_HUMAN:
                return _commit_task_created(claim, outcome, go_on)
            assert decision is not None
            return _commit_step_result(claim, outcome, decision, go_on)
    except _Fenced:
        log.info(
            "run %s: step %s result discarded (lease lost or run stopped)",
            claim.run_id,
            claim.seq,
        )
        return None
    except IntegrityError:
        # The unique (run, seq, attempt) refused a second copy of a committed step.
        log.warning("run %s: step %s was already committed", claim.run_id, claim.seq)
        return None


def _working_run(claim: Claim) -> Run:
    """The run as its claim left it (never saved: `_fence` writes the changed fields)."""
    return Run(
        pk=claim.run_id,
        recipe_id=claim.recipe_id,
        created_by_id=claim.owner_id,
        status=RunStatus.RUNNING,
        next=dict(claim.directive),
        next_seq=claim.seq,
        event_seq=claim.event_seq,
        calls=claim.calls,
        script=claim.script,
        lease_token=claim.token,
    )


def _fence(claim: Claim, changes: dict[str, Any], new_events: int) -> int:
    """Apply `changes` to the run if this worker still holds the claimed step; else raise.

    Returns the run's event_seq before this commit: the caller numbers its `new_events` events
    from the next one. Another writer may have added events since the claim (none does to a
    leased run today); then the UPDATE is retried with the run's current event_seq.
    """
    fenced = Run.objects.filter(
        pk=claim.run_id, lease_token=claim.token, next_seq=claim.seq, status__in=RUNNABLE
    )
    base = claim.event_seq
    while not fenced.filter(event_seq=base).update(event_seq=base + new_events, **changes):
        current = fenced.values_list("event_seq", flat=True).first()
        if current is None:
            raise _Fenced
        base = current
    return base


def _release_or_go_on(
    run: Run, claim: Claim, pending: list[tuple[str, dict[str, Any]]], go_on: bool
) -> tuple[Claim | None, dict[str, Any]]:
    """Release the lease, and claim the run's next step or hand the run back to the queue.

    Returns the next claim, if any, and the run's fields this commit changes.
    """
    now = timezone.now()
    run.lease_token, run.lease_expires_at, run.claims = "", None, 0
    next_claim = None
    changes: dict[str, Any] = {}
    if run.status in RUNNABLE and run.next.get("step"):
        if go_on:
            next_claim = _take_lease(run, claim.graph, claim.document, now, pending, claim)
        else:
            run.enqueued_at = changes["enqueued_at"] = now
            _send_on_commit(run.pk)
    changes.update(
        lease_token=run.lease_token,
        lease_expires_at=run.lease_expires_at,
        claims=run.claims,
        calls=claim.calls,
    )
    if run.next != claim.directive:
        changes["next"] = run.next
    if run.next_seq != claim.seq:
        changes["next_seq"], changes["state"] = run.next_seq, run.state
    if run.status != RunStatus.RUNNING:
        changes.update(
            status=run.status, outcome=run.outcome, error=run.error, finished_at=run.finished_at
        )
    return next_claim, changes


def _step_run_fields(claim: Claim, outcome: StepOutcome) -> dict[str, Any]:
    return {
        "status": outcome.status,
        "prompt": outcome.prompt,
        "response": outcome.response,
        "decision": outcome.decision,
        "error": outcome.error,
        "latency_ms": outcome.latency_ms,
        "tokens_in": outcome.tokens_in,
        "tokens_out": outcome.tokens_out,
        "confidence": outcome.confidence,
        "details": outcome.details,
        "finished_at": timezone.now(),
    }


def _new_step_run(claim: Claim, outcome: StepOutcome) -> StepRun:
    step_run = _step_run(claim, outcome)
    step_run.save(force_insert=True)
    return step_run


def _step_run(claim: Claim, outcome: StepOutcome) -> StepRun:
    """The step's StepRun, not saved yet."""
    step = claim.step
    return StepRun(
        run_id=claim.run_id,
        seq=claim.seq,
        attempt=claim.attempt,
        step_key=step.key,
        step_name=step.name,
        kind=step.kind,
        actor_alias=outcome.actor_alias,
        actor_name=outcome.actor_name,
        started_at=outcome.started_at,
        **_step_run_fields(claim, outcome),
    )


def _commit_task_created(claim: Claim, outcome: StepOutcome, go_on: bool) -> Claim | None:
    """Store a human step's task (rare next to model steps: two UPDATEs of the run are fine)."""
    from .human import task_payload

    base = _fence(claim, {"claims": 0}, 0)  # first: refuse a stale worker, lock the row
    run = _working_run(claim)
    run.event_seq = base
    run.state = claim.state.to_dict()  # unchanged (the step has not been decided yet)
    step = claim.step
    step_run = _new_step_run(claim, outcome)
    escalation_group_id = None
    doc_step = next(s for s in claim.document["steps"] if s["key"] == step.key)
    if doc_step.get("escalate_to"):
        escalation_group_id = actors.resolve(
            doc_step["escalate_to"], document=claim.document, script=None
        ).group_id
    task = HumanTask.objects.create(
        run_id=claim.run_id,
        step_run=step_run,
        step_key=step.key,
        group_id=outcome.human_group_id,
        escalation_group_id=escalation_group_id,
        question=outcome.prompt,
        material=outcome.material,
        options=list(step.options),
        due_at=timezone.now() + timedelta(seconds=step.timeout_s) if step.timeout_s else None,
    )
    pending: list[tuple[str, dict[str, Any]]] = [("human_task.created", task_payload(task))]
    if outcome.scripted_decision is not None:
        decision, _, comment = outcome.scripted_decision.partition(":")
        if decision.strip() == SCRIPTED_TIMEOUT:
            # A script can let the task lapse, to walk `execution_timeout` branches.
            task.status = TaskStatus.TIMED_OUT
            event = "human_task.timed_out"
        else:
            task.status, task.decision, task.comment = (
                TaskStatus.DECIDED,
                decision.strip(),
                comment.strip(),
            )
            task.decided_at = timezone.now()
            event = "human_task.decided"
        task.save(update_fields=["status", "decision", "comment", "decided_at"])
        pending.append((event, task_payload(task)))
        run.next = {"step": step.key, "resume_task": task.pk}
    else:
        check_transition(run.status, RunStatus.WAITING_HUMAN)
        run.status = RunStatus.WAITING_HUMAN
        run.next = {}
        pending.append(("run.status", {"status": run.status}))
        events.push_task_change([task.group_id], "created", task_payload(task))
    next_claim, changes = _release_or_go_on(run, claim, pending, go_on)
    events.record(run, pending)
    Run.objects.filter(pk=claim.run_id).update(event_seq=run.event_seq, **changes)
    if next_claim is not None:
        next_claim.event_seq = run.event_seq
    return next_claim


def _commit_step_result(
    claim: Claim, outcome: StepOutcome, decision: engine.Decision, go_on: bool
) -> Claim | None:
    """Decide the run's new state in memory, then write it: fenced UPDATE first, then rows."""
    step = claim.step
    run = _working_run(claim)
    pending: list[tuple[str, dict[str, Any]]] = [
        (
            "step.finished",
            {
                "seq": claim.seq,
                "step": step.key,
                "attempt": claim.attempt,
                "status": outcome.status,
                "response": outcome.response,
                "decision": outcome.decision,
                "error": outcome.error,
                "latency_ms": outcome.latency_ms,
                "tokens_in": outcome.tokens_in,
                "tokens_out": outcome.tokens_out,
                "confidence": outcome.confidence,
                "details": outcome.details,
            },
        ),
    ]
    pending += [
        (
            "branch.evaluated",
            {
                "seq": claim.seq,
                "step": step.key,
                "branch": e.branch,
                "priority": e.priority,
                "matched": e.matched,
                "taken": e.taken,
                "reason": e.reason,
            },
        )
        for e in decision.evaluations
    ]
    pending.append(
        (
            "branch.taken",
            {
                "seq": claim.seq,
                "step": step.key,
                "branch": decision.branch,
                "action": decision.action,
                "kind": decision.kind,
                "next_step": decision.next_step,
                "reason": decision.reason,
            },
        )
    )
    _apply_decision(run, claim, outcome, decision, pending)
    run.state = claim.state.to_dict()
    run.next_seq = claim.seq + 1
    next_claim, changes = _release_or_go_on(run, claim, pending, go_on)

    if outcome.task is None and connection.vendor == "postgresql":
        event_seq = _commit_in_one_statement(claim, outcome, decision, changes, pending)
    else:
        event_seq = _commit_with_orm(claim, outcome, decision, changes, pending)
    if next_claim is not None:
        next_claim.event_seq = event_seq
    return next_claim


def _commit_in_one_statement(
    claim: Claim,
    outcome: StepOutcome,
    decision: engine.Decision,
    changes: dict[str, Any],
    pending: list[tuple[str, dict[str, Any]]],
) -> int:
    """PostgreSQL: the fence, StepRun, evaluations and events in one statement (fast_commit).

    Returns the run's event_seq after this commit.
    """
    rows = [RunEvent(run_id=claim.run_id, type=type_, data=data) for type_, data in pending]
    base = fast_commit.commit_step(
        run_id=claim.run_id,
        token=claim.token,
        seq=claim.seq,
        statuses=sorted(RUNNABLE),
        changes=changes,
        step_run=_step_run(claim, outcome),
        evaluations=_evaluations(None, decision),
        run_events=rows,
    )
    if base is None:
        raise _Fenced
    events.push_on_commit(claim.run_id, claim.owner_id, rows)
    return base + len(rows)


def _commit_with_orm(
    claim: Claim,
    outcome: StepOutcome,
    decision: engine.Decision,
    changes: dict[str, Any],
    pending: list[tuple[str, dict[str, Any]]],
) -> int:
    """The fenced UPDATE first, then the rows. Returns the run's event_seq after this commit."""
    base = _fence(claim, changes, len(pending))
    if outcome.task is not None:
        step_run = outcome.task.step_run
        fields = _step_run_fields(claim, outcome)
        del fields["prompt"]
        for name, value in fields.items():
            setattr(step_run, name, value)
        step_run.save(update_fields=list(fields))
    else:
        step_run = _new_step_run(claim, outcome)
    BranchEvaluation.objects.bulk_create(_evaluations(step_run, decision))
    events.append(claim.run_id, claim.owner_id, base, pending)
    return base + len(pending)


def _evaluations(step_run: StepRun | None, decision: engine.Decision) -> list[BranchEvaluation]:
    return [
        BranchEvaluation(
            step_run=step_run,
            order=i,
            branch=e.branch,
            priority=e.priority,
            matched=e.matched,
            taken=e.taken,
            reason=e.reason,
        )
        for i, e in enumerate(decision.evaluations)
    ]


def _apply_decision(
    run: Run,
    claim: Claim,
    outcome: StepOutcome,
    decision: engine.Decision,
    pending: list[tuple[str, dict[str, Any]]],
) -> None:
    step = claim.step
    failed = outcome.status in (StepStatus.FAILED, StepStatus.TIMED_OUT)
    if failed and not _handles_failure(step, decision.branch):
        # Only a branch that asks about errors or timeouts handles a failed step; anything
        # else (a default, the next step in sequence) would go on working on nothing.
        _finish(
            run,
            RunStatus.FAILED,
            Outcome.FAILED,
            f"step '{step.key}' failed: {outcome.error or 'timed out'}",
        )
    elif decision.kind in ("goto", "repeat", "retry_actor"):
        run.next = {"step": decision.next_step or step.key}
        if decision.kind == "repeat" and decision.prompt_suffix:
            run.next["prompt_suffix"] = decision.prompt_suffix
        if decision.kind == "retry_actor" and decision.actor:
            run.next["actor"] = decision.actor
        return
    elif decision.kind == "complete":
        state = claim.state
        outcome_ = (
            Outcome.APPROVED
            if state.approved
            else Outcome.ERROR_HANDLED
            if state.error_handled
            else Outcome.COMPLETED
        )
        _finish(run, RunStatus.SUCCEEDED, outcome_, "")
    elif decision.kind == "end":
        _finish(run, RunStatus.ENDED, Outcome.ENDED, "")
    else:
        _finish(run, RunStatus.FAILED, Outcome.FAILED, decision.reason)
    pending.append(("run.finished", _finished_data(run)))


FAILURE_CONDITIONS = frozenset({"execution_error", "execution_timeout"})


def _handles_failure(step: engine.StepSpec, branch_name: str | None) -> bool:
    branch = next((b for b in step.branches if b.name == branch_name), None)
    if branch is None:
        return False
    pending = [branch.when]
    while pending:
        condition = pending.pop()
        if condition.type in FAILURE_CONDITIONS:
            return True
        pending.extend(condition.conditions)
    return False


def _finished_data(run: Run) -> dict[str, Any]:
    return {"status": run.status, "outcome": run.outcome, "error": run.error}


def _render_material(claim: Claim) -> str:
    """Return what the reviewers of a human step read: its `material`, else the last answer."""
    if claim.step.material:
        return engine.render(claim.step.material, claim.state.template_context(claim.step.key))
    return _latest_response(claim.state) or ""


def _latest_response(state: engine.RunState) -> str | None:
    responses = state.responses
    return responses[-1]["response"] if responses else None


def _finish(run: Run, status: str, outcome: str, error: str) -> None:
    check_transition(run.status, status)
    run.status, run.outcome, run.error = status, outcome, error
    run.next = {}
    run.finished_at = timezone.now()
    run.lease_token, run.lease_expires_at = "", None
