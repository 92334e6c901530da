"""Run one claimed step — LLM, human, decision tree or classify — outside any transaction.

Model calls may take minutes, so nothing here holds a database transaction; the lease
keeper renews the claim meanwhile. `execute` returns the outcome and the engine's decision,
which `execution.commit` stores."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

from django.db import connection
from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from workflows import engine

from . import actors, events
from .claims import TOKEN_PUSH_INTERVAL_S, Claim, StepOutcome, lease_seconds
from .models import HumanTask, Run, StepRun
from .outages import DATABASE_ERRORS
from .providers import ProviderError, ProviderTimeoutError
from .status import StepStatus, TaskStatus

log = logging.getLogger(__name__)

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
    except DATABASE_ERRORS:
        raise  # the database went away, not the step: the task is retried (runner.tasks)
    except Exception as exc:
        # Anything else is a bug here or in a provider: fail the step once, with the reason,
        # rather than leave the lease to expire and run the (paid) step again and again.
        log.exception("run %s: step %s failed unexpectedly", claim.run_id, claim.step.key)
        outcome = StepOutcome(status=StepStatus.FAILED, error=f"unexpected error: {exc!r}")
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
    """Push streamed text live, a batch every 100 ms rather than one message per token.

    What is left when the answer ends is not pushed: `step.finished` follows at once with the
    whole text (and an answer quicker than a batch needs no live text).
    """

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


class LeaseKeeper:
    """Renew the run's lease while a step runs, so that only a dead worker's lease expires."""

    def __init__(self, run_id: int, token: str) -> None:
        self.run_id, self.token = run_id, token
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._renew, name=f"lease-{run_id}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _renew(self) -> None:
        interval = lease_seconds() / 3
        try:
            while not self.stop.wait(interval):
                try:
                    Run.objects.filter(pk=self.run_id, lease_token=self.token).update(
                        lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds())
                    )
                except DATABASE_ERRORS as exc:
                    # Keep trying: the lease must not lapse because of a short outage.
                    log.warning("run %s: could not renew the lease: %s", self.run_id, exc)
                    connection.close()
        finally:
            connection.close()


def _render_material(claim: Claim) -> str:
    """Return what the reviewers of a human step read: its `material`, else the last answer."""
    if claim.step.material:
        return engine.render(claim.step.material, claim.state.template_context(claim.step.key))
    return _latest_response(claim.state) or ""


def _latest_response(state: engine.RunState) -> str | None:
    responses = state.responses
    return responses[-1]["response"] if responses else None
