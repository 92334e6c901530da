"""What one step execution works with: the run's actors, its earlier answers, its live text."""

from __future__ import annotations

import time
from collections import ChainMap
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from knowledge.embeddings import EmbeddingCall
from workflows import engine
from workflows.engine.file_templates import DocumentText
from workflows.engine.files import FILES, file_refs, is_file_type

from .. import actors, capacity, events, model_calls, streams, tracing
from ..claims import TOKEN_PUSH_INTERVAL_S, Claim
from ..lease import keeper
from ..model_calls import BudgetExceeded, CallRecord, Purpose
from ..models import RunFile, StepRun
from ..providers import (
    ChatResult,
    ImagePart,
    OutputSchema,
    ProviderError,
    ProviderTimeoutError,
)
from ..run_files import files_of_run
from .actor_stats import strategies_learned
from .phases import Phases


class Answers:
    """The run's earlier answers by seq, each read from its StepRun when a template names it.

    The run's state keeps only where the answers are (see `engine.RunState`), so a step reads
    the few it names, whatever the run's length.
    """

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self._read: dict[int, str] = {}

    def __call__(self, seq: int) -> str:
        if seq not in self._read:
            found = StepRun.objects.filter(run_id=self.run_id, seq=seq).values_list(
                "response", flat=True
            )
            response = found.first()
            if response is None:
                raise LookupError(f"the answer of step #{seq} is missing from the run")
            self._read[seq] = response
        return self._read[seq]


class StoredHits:
    """The hits earlier steps found, by seq, each read from its StepRun when a step asks
    (a template names `{sources}`, a condition counts or checks citations).

    The run's state keeps only the seq of the latest result that searched (`sources_seq`).
    """

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self._read: dict[int, tuple[engine.Citation, ...]] = {}

    def __call__(self, seq: int) -> Sequence[engine.Citation]:
        if seq not in self._read:
            # Only the hits: not the rest of the details (a validation loop's attempts).
            found = (
                StepRun.objects.filter(run_id=self.run_id, seq=seq)
                .values_list("pk", "details__retrieval__hits")
                .first()
            )
            if found is None:
                raise LookupError(f"the hits of step #{seq} are missing from the run")
            hits = found[1]
            self._read[seq] = tuple(
                engine.Citation.from_json(hit)
                for hit in (hits if isinstance(hits, list) else [])
                if isinstance(hit, dict)
            )
        return self._read[seq]


class Documents:
    """The documents of the run's file inputs, by input name, as templates and detectors read
    them (`engine.DocumentText`): the run's files are read once, when a step first asks.

    The run's state keeps only the refs of its files (`workflows.engine.files.REF_FIELDS`);
    their order is the refs' order, and a ref whose file is gone is an error.
    """

    def __init__(self, run_id: int, inputs: Mapping[str, Any]) -> None:
        self.run_id = run_id
        self._inputs = inputs
        self._read: dict[str, tuple[DocumentText, ...]] = {}
        self._files: dict[str, RunFile] | None = None

    def __call__(self, name: str) -> tuple[DocumentText, ...]:
        if name not in self._read:
            if self._files is None:
                self._files = {
                    str(row.id): row for rows in files_of_run(self.run_id).values() for row in rows
                }
            documents = []
            for ref in file_refs(self._inputs.get(name)):
                row = self._files.get(str(ref.get("file")))
                if row is None or row.input_name != name:
                    raise LookupError(
                        f"the file {ref.get('name')!r} of input '{name}' is missing from the run"
                    )
                documents.append(DocumentText.of(row.name, row.text, row.pages or ()))
            self._read[name] = tuple(documents)
        return self._read[name]


# Where an llm step's prompt shows its sources' hits when it does not name `{sources}`.
SOURCES_HEADING = "Sources:"
NO_SOURCES = "(none found)"


class Session:
    """One execution of the claimed step: it calls actors, counting the run's calls per alias
    (a script answers by that count) and recording each call with what it cost
    (`model_calls`, for the step's commit), and renders the step's templates."""

    def __init__(self, claim: Claim) -> None:
        self.claim = claim
        self.calls = claim.calls
        self.resolved = claim.resolved
        self.answers = Answers(claim.run_id)
        self.stored_hits = StoredHits(claim.run_id)
        self.documents = Documents(claim.run_id, claim.state.inputs)
        # What the step's own sources found (None: it searched none), once it searched.
        self.hits: tuple[engine.Citation, ...] | None = None
        # The prompt variant the attempt asks with ("": the step's own prompt).
        self.variant = ""
        self._creator: AbstractBaseUser | None = None
        self._strategies: dict[str, str] = {}  # {learned_strategies} by intent pattern
        # Every call to a model, in order: the step's and its evaluators' (after the step).
        self.model_calls: list[CallRecord] = []
        # Why the run's budget refused a call of the step, once it did.
        self.budget_stop: str | None = None
        # Whether the step's latest model call failed with an error retrying may help (a
        # timeout, a connection error, a 429 or 5xx after the provider's own retries).
        self.failed_transiently = False
        # Whether the step's kind has run (its evaluators are asked after): from then on, the
        # step has done work that giving it back to the queue would lose (`_slot`).
        self.executed = False
        # How long each phase of the step took (`phases.py`), for its record.
        self.phases = Phases()
        # What an llm step's answers are shown beside the prompt (its `images`), once read.
        self.images: tuple[ImagePart, ...] = ()

    def creator(self) -> AbstractBaseUser:
        """Return the user who started the run: the step's searches read what they may."""
        if self._creator is None:
            self._creator = get_user_model().objects.get(pk=self.claim.owner_id)
        return self._creator

    def resolve(self, alias: str) -> actors.ResolvedActor:
        if alias not in self.resolved:
            self.resolved[alias] = actors.resolve(
                alias, document=self.claim.document, script=self.claim.script
            )
        return self.resolved[alias]

    def next_call(self, alias: str) -> int:
        """Count one more call of `alias` in this run; return its index (from 0)."""
        index = self.calls.get(alias, 0)
        self.calls[alias] = index + 1
        return index

    def ask(
        self,
        alias: str,
        prompt: str,
        *,
        purpose: str = Purpose.OTHER,
        timeout_s: float | None = None,
        on_token: Any = None,
        messages: tuple[dict[str, Any], ...] | None = None,
        tools: tuple[dict[str, Any], ...] | None = None,
        output_schema: OutputSchema | None = None,
        images: tuple[ImagePart, ...] = (),
    ) -> ChatResult:
        """Ask the model of `alias` once; record the call, answered or failed, as `purpose`.

        `output_schema`, when given, is sent to a server that enforces it; `images` are shown
        to the model with the prompt (the record keeps only the prompt).

        Raise BudgetExceeded before anything is sent (the call is neither made nor counted)
        when it would pass a limit of the run's budget; a failed call is recorded with its
        error and latency, then its exception propagates. A call of an actor with limits
        holds one of its slots (`_slot`).
        """
        keeper.check(self.claim.token)  # nor asks anything more once its lease is gone
        actor = self.resolve(alias)
        self._check_budget(actor, prompt, messages, tools)
        with self._slot(actor, float(timeout_s or actors.default_timeout(actor))):
            return self._call(
                actor,
                alias,
                prompt,
                purpose,
                timeout_s,
                on_token,
                messages,
                tools,
                output_schema,
                images,
            )

    @contextmanager
    def _slot(self, actor: actors.ResolvedActor, timeout_s: float) -> Iterator[None]:
        """Hold a slot of the actor for the call, if it has limits (`runner.capacity`).

        The step's first call (to its own actor, or the one the learner chose) does not wait
        in the worker: ActorFull propagates and `runner.advance` gives the step back to the
        queue, losing nothing since nothing was asked yet. Any other call (a judge, an
        evaluator, a further attempt) waits for a slot here, up to the call's own time
        budget, since the step already holds work; then it fails as a timeout of that call.
        """
        if actor.limits.unlimited:
            yield
            return
        claim = self.claim
        first = not self.model_calls and not self.executed
        wait_s = 0.0 if first else timeout_s
        try:
            slot_id = capacity.acquire_waiting(
                actor.name,
                actor.limits,
                timeout_s=timeout_s,
                wait_s=wait_s,
                run_id=claim.run_id,
                seq=claim.seq,
            )
        except capacity.ActorFull as full:
            if not wait_s:
                raise
            raise ProviderTimeoutError(
                f"actor '{actor.name}' had no free slot for {wait_s:g} s ({full.reason})"
            ) from None
        try:
            yield
        finally:
            capacity.release(slot_id)

    def _call(
        self,
        actor: actors.ResolvedActor,
        alias: str,
        prompt: str,
        purpose: str,
        timeout_s: float | None,
        on_token: Any,
        messages: tuple[dict[str, Any], ...] | None,
        tools: tuple[dict[str, Any], ...] | None,
        output_schema: OutputSchema | None = None,
        images: tuple[ImagePart, ...] = (),
    ) -> ChatResult:
        started_at, began = timezone.now(), time.monotonic()
        try:
            with tracing.model_call_span(actor, prompt, purpose=purpose, messages=messages) as span:
                result = actors.call(
                    actor,
                    prompt,
                    call_index=self.next_call(alias),
                    timeout_s=timeout_s,
                    on_token=on_token,
                    messages=messages,
                    tools=tools,
                    output_schema=output_schema,
                    images=images,
                )
                span.result(result)
        except Exception as exc:
            self.failed_transiently = isinstance(exc, ProviderError) and exc.retryable
            latency_ms = int((time.monotonic() - began) * 1000)
            self.model_calls.append(
                model_calls.failed(
                    actor, purpose, str(exc), latency_ms=latency_ms, started_at=started_at
                )
            )
            raise
        # Nothing to branch on, judge or store: a failed call (its tokens were paid), which
        # may be retried.
        empty = not result.text.strip() and not result.tool_calls
        error = f"actor '{actor.name}' answered with no text" if empty else ""
        self.model_calls.append(
            model_calls.answered(
                actor,
                purpose,
                result,
                prompt=prompt,
                messages=messages,
                tools=tools,
                started_at=started_at,
                error=error,
            )
        )
        self.failed_transiently = empty
        if empty:
            raise ProviderError(error, retryable=True)
        return result

    def judge(self, evaluator: str, prompt: str, text: str) -> str:
        """Answer an `ai_evaluation` condition (the engine's `Judge`)."""
        instruction = prompt or "Rate the quality of the text from 1 to 10."
        question = engine.evaluation_prompt(instruction, text)
        return self.ask(evaluator, question, purpose=Purpose.EVALUATION).text

    def latest_answer(self, step_key: str) -> str | None:
        """Return the latest answer of step `step_key` in the run, None before it answered
        (the engine's `AnswerOf`, for conditions that read an earlier step's answer)."""
        seq = self.claim.state.latest_seq.get(step_key)
        return None if seq is None else self.answers(seq)

    def record_embedding(self, call: EmbeddingCall) -> None:
        """Record a knowledge base's embedding call made by one of the step's searches."""
        self.model_calls.append(model_calls.embedded(call))
        tracing.embeddings_call(call)

    def spend(self) -> engine.Spend:
        """Return what the run has spent: its committed steps' calls, this step's so far, and
        the seconds since it started."""
        started = self.claim.started_at
        seconds = max(0.0, (timezone.now() - started).total_seconds()) if started else 0.0
        step = model_calls.totals(self.model_calls).spend
        return self.claim.spent + step + engine.Spend(seconds=seconds)

    def _check_budget(
        self,
        actor: actors.ResolvedActor,
        prompt: str,
        messages: Sequence[dict[str, Any]] | None,
        tools: Sequence[dict[str, Any]] | None,
    ) -> None:
        """Raise BudgetExceeded if the call about to be made would pass a limit of the run's
        budget (its prompt's tokens and their cost count as spent)."""
        budget = self.claim.graph.budget
        if budget is None:
            return
        upcoming = engine.Spend(calls=1)
        # Counting the prompt's tokens costs a tokenizer pass: only a limit on them needs it.
        if budget.max_tokens is not None or budget.max_cost is not None:
            tokens = model_calls.prompt_tokens(prompt, messages, tools)
            cost = model_calls.cost_of(actor.prices, tokens, 0) or Decimal(0)
            upcoming = engine.Spend(tokens=tokens, cost=cost, calls=1)
        reason = engine.check_budget(budget, self.spend(), upcoming)
        if reason is not None:
            self.budget_stop = reason
            raise BudgetExceeded(reason)

    def render(
        self,
        template: str,
        feedback: str | None = None,
        *,
        secrets: Mapping[str, str] | None = None,
    ) -> str:
        """Render one of the step's templates; raise TemplateError naming a bad name.

        `{feedback}` is `feedback` (the validation loop's), else the failure a later step
        sent back to this one (an error severity of RECLASSIFICATION or REPLANNING), else "".
        `secrets` gives the `{secrets.NAME}` an http step's templates name, by NAME.
        """
        claim = self.claim
        if feedback is None:
            feedback = claim.next.get("feedback")
        context: Mapping[str, object] = claim.state.template_context(
            claim.step.key,
            self.answers,
            feedback,
            hits=self.stored_hits,
            own_hits=self.hits,
            learned=self.learned_strategies,
            documents=self.documents,
            file_inputs=file_inputs(self.claim.graph),
        )
        if secrets:
            context = ChainMap({f"secrets.{k}": v for k, v in secrets.items()}, context)
        return engine.render(template, context)

    def learned_strategies(self, pattern: str) -> str:
        """`{learned_strategies}`: what worked before for the run's intent pattern (read once
        a step: each validation attempt renders the prompt again)."""
        known = self._strategies.get(pattern)
        if known is None:
            claim = self.claim
            found = strategies_learned(
                recipe_id=claim.recipe_id, pattern=pattern, share=claim.graph.learning.share
            )
            known = self._strategies[pattern] = engine.format_strategies(found)
        return known

    def template(self) -> str:
        """The prompt template of the attempt's variant: a declared variant's own, or the
        step's with a learned suffix appended (`engine.suffix_variant`)."""
        step = self.claim.step
        if not self.variant:
            return step.prompt
        if self.variant.startswith(engine.SUFFIX_MARK):
            return f"{step.prompt}\n\n{self.variant.removeprefix(engine.SUFFIX_MARK)}"
        declared = next((v for v in step.variants if v.name == self.variant), None)
        if declared is None:  # the recipe changed since the choice: ask with its own prompt
            return step.prompt
        return declared.prompt

    def prompt(self, feedback: str | None = None) -> str:
        """Return the step's prompt, with the hits of its sources at its end unless it shows
        them (`{sources}`), then the suffix a repeat branch asked for."""
        template = self.template()
        prompt = self.render(template, feedback)
        shows_hits = engine.SOURCES_NAME in engine.template_names(template) and (
            engine.SOURCES_NAME not in self.claim.graph.inputs
        )
        if self.hits is not None and not shows_hits:
            shown = engine.format_sources(self.hits) or NO_SOURCES
            prompt = f"{prompt}\n\n{SOURCES_HEADING}\n{shown}"
        suffix = self.claim.next.get("prompt_suffix")
        return f"{prompt}\n\n{suffix}" if suffix else prompt


def file_inputs(graph: engine.RecipeGraph) -> dict[str, bool]:
    """The recipe's file inputs, each with whether it takes several files."""
    return {
        name: spec.get("type") == FILES
        for name, spec in graph.inputs.items()
        if is_file_type(spec.get("type"))
    }


class TokenStreamer:
    """Push streamed text live, a batch every 100 ms rather than one message per token, and
    keep the text so far for a monitor that opens mid-answer (`runner.streams`).

    What is left when the answer ends is not pushed: `step.finished` follows at once with the
    whole text (and an answer quicker than a batch needs no live text).
    """

    def __init__(self, run_id: int, seq: int, token: str) -> None:
        self.run_id, self.seq, self.token = run_id, seq, token
        self.buffer: list[str] = []
        self.pushed = ""
        self.last_push = time.monotonic()

    def add(self, text: str) -> None:
        keeper.check(self.token)  # a step whose run was cancelled stops reading its answer
        self.buffer.append(text)
        if time.monotonic() - self.last_push >= TOKEN_PUSH_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            text = "".join(self.buffer)
            offset = len(self.pushed)
            self.pushed += text
            self.buffer.clear()
            # Kept before it is pushed: a monitor that reads the text so far after joining the
            # run's group then has every push it lacks, and drops what it has by the offset.
            streams.keep(self.run_id, self.seq, self.pushed)
            events.push_token(self.run_id, self.seq, text, offset)
        self.last_push = time.monotonic()

    def close(self) -> None:
        """The answer has ended: drop the text kept for monitors."""
        if self.pushed:
            streams.forget(self.run_id, self.seq)
