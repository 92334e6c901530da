"""LLM steps: ask the step's actor the rendered prompt, through the validation loop if set.

A step with `sources` searches them first (`sources.py`); its prompt shows the hits. A step
with `tools` answers through the tool loop (`tool_loop.py`); its calls are kept in
`details["tool_calls"]`. Each call to a model is recorded by the session with its purpose
(the answer, each further validation attempt, the judge); the step's tokens are their sums.
A step with `images` shows them to its model with each answer's prompt (`images.py`); which
were sent is kept in `details["images"]`. A step with an `output_schema` answers until an
answer meets it (`_structured`); how its answers fared is kept in `details["output_schema"]`.
How long each phase took (sources, tools, build, call, validate, finalise) is kept in
`details["execution"]` (`phases.py`).
"""

from __future__ import annotations

import json
import time

from workflows import engine
from workflows.engine import output_schema
from workflows.engine.output_schema import SchemaCheck

from .. import actors
from ..claims import StepOutcome
from ..model_calls import Purpose
from ..providers import OutputSchema, ProviderError, ProviderTimeoutError
from ..status import StepStatus
from .actor_stats import learning
from .images import ImagesFailed, step_images
from .phases import FAILED, Phases
from .session import Session, TokenStreamer
from .sources import Retrieval, SourcesFailed, retrieve
from .tool_calls import ToolCallLog
from .tool_loop import ToolLoopFailed, run_tool_loop

KIND = "llm"
# Where the step's details keep how its answers met its output schema.
SCHEMA_DETAILS = "output_schema"
# Where they keep which images its answers were shown (never their bytes).
IMAGES_DETAILS = "images"


def execute(session: Session) -> StepOutcome:
    claim = session.claim
    step = claim.step
    outcome = StepOutcome(status=StepStatus.SUCCEEDED)
    _choose(session, outcome)
    alias = outcome.actor_alias
    phases = session.phases
    try:
        if step.sources:
            with phases.phase("sources"):
                _search(session, outcome)
        with phases.phase("build"):
            outcome.prompt = session.prompt()
            if step.images:
                _show_images(session, outcome)
    except (engine.TemplateError, SourcesFailed, ImagesFailed) as exc:
        outcome.status, outcome.error = StepStatus.FAILED, str(exc)
        return outcome
    streamer = TokenStreamer(claim.run_id, claim.seq, claim.token)
    log = ToolCallLog(claim.run_id, claim.seq) if step.tools else None
    began = time.monotonic()
    call_failed = False
    try:
        outcome.actor_name = session.resolve(alias).name
        if step.validation:
            _validate(session, alias, outcome, streamer, log)
        elif step.output_schema is not None:
            _structured(session, alias, outcome, streamer)
        else:
            phases.attempts = 1
            outcome.response = _answer(session, alias, outcome.prompt, streamer, log)
    except ToolLoopFailed as exc:
        outcome.status, outcome.error = StepStatus.FAILED, str(exc)
        call_failed = True
    except ProviderError as exc:
        outcome.status = StepStatus.FAILED
        outcome.error = str(exc)
        outcome.timed_out = isinstance(exc, ProviderTimeoutError)
        if outcome.timed_out:
            outcome.status = StepStatus.TIMED_OUT
        call_failed = True
    finally:
        streamer.close()
    called = time.monotonic() - began
    outcome.latency_ms = int(called * 1000)
    _add_call_phases(phases, called, log, failed=call_failed)
    if log is not None:
        outcome.details["tool_calls"] = log.calls
        outcome.tool_calls = tuple(log.calls)
    return outcome


def _add_call_phases(
    phases: Phases, called: float, log: ToolCallLog | None, *, failed: bool
) -> None:
    """Split the time of the model's turns into its tool calls, the judge's (or the schema
    checks', already timed as `validate`) and the model's own calls."""
    tool_seconds = 0.0
    if log is not None and log.calls:
        tool_seconds = sum(int(c.get("latency_ms") or 0) for c in log.calls) / 1000
        tool_failed = any(c.get("is_error") for c in log.calls)
        phases.add("tools", tool_seconds, FAILED if tool_failed else "ok")
    phases.add("call", called - tool_seconds - phases.seconds("validate"))
    if failed:
        phases.add("call", 0, FAILED)


def _choose(session: Session, outcome: StepOutcome) -> None:
    """Set the actor and prompt variant of this attempt: those the visit goes on with (a
    repeat or a retry says so in `next`), else the learner's pick for a learning step, else
    the step's own. A repeat's suffix on the step's own prompt is recorded as a variant, so
    a suffix that led to success becomes one the learner may choose up front."""
    claim = session.claim
    step = claim.step
    if "variant" in claim.next or not engine.learns(step):
        outcome.actor_alias = claim.next.get("actor") or step.actor or ""
        outcome.variant = claim.next.get("variant", "")
        outcome.choice = claim.next.get("choice")
    else:
        choice = engine.first_choice(claim.graph, step, learning(claim))
        if choice is None:  # no candidate at all: lint refuses such a recipe
            raise LookupError(f"step '{step.key}': the learner has no actor to choose")
        outcome.actor_alias, outcome.variant = choice.arm.actor, choice.arm.variant
        outcome.choice = choice.as_json()
    session.variant = outcome.variant
    suffix = claim.next.get("prompt_suffix")
    if suffix and not outcome.variant:
        outcome.variant = engine.suffix_variant(suffix) or ""


def _answer(
    session: Session,
    alias: str,
    prompt: str,
    streamer: TokenStreamer,
    log: ToolCallLog | None,
    purpose: str = Purpose.ANSWER,
) -> str:
    """Ask the model once, or through the tool loop when the step offers tools (whose calls
    are tool-calling turns); return its answer."""
    if log is not None:
        return run_tool_loop(session, alias, prompt, log, on_token=streamer.add).text
    step = session.claim.step
    result = session.ask(
        alias,
        prompt,
        purpose=purpose,
        timeout_s=step.timeout_s,
        on_token=streamer.add,
        images=session.images,
    )
    return result.text


def _show_images(session: Session, outcome: StepOutcome) -> None:
    """Read the step's images for its answers (not its judge's); record which were sent."""
    images = step_images(session.claim.run_id, session.claim.step.images)
    session.images = images.parts
    outcome.details[IMAGES_DETAILS] = images.sent


def _search(session: Session, outcome: StepOutcome) -> None:
    """Search the step's sources before the call; the prompt then shows their hits.

    A search without a query searches for the prompt (rendered without any hits).
    """
    session.hits = ()
    query = session.render(session.claim.step.prompt)
    retrieval = Retrieval()
    try:
        retrieve(session, query, retrieval)
    finally:
        outcome.details["retrieval"] = retrieval.as_json()
    session.hits = outcome.hits = retrieval.hits


def _validate(
    session: Session,
    alias: str,
    outcome: StepOutcome,
    streamer: TokenStreamer,
    log: ToolCallLog | None,
) -> None:
    """Answer through the validation loop: a judge scores each answer, feedback asks again.

    The first answer is the step's `answer` call, the next ones `validation` attempts.
    """
    step = session.claim.step
    settings_ = step.validation or {}
    judge_alias: str = settings_.get("judge") or alias
    scoring = engine.Scoring.of(settings_)
    attempts = [0]
    phases = session.phases

    def generate(feedback: str | None) -> str:
        prompt = session.prompt(feedback)
        if feedback and "{feedback}" not in session.template():
            prompt += f"\n\nFeedback on your previous answer: {feedback}"
        purpose = Purpose.ANSWER if attempts[0] == 0 else Purpose.VALIDATION
        attempts[0] += 1
        phases.attempts = attempts[0]
        return _answer(session, alias, prompt, streamer, log, purpose)

    def judge(prompt: str) -> str:
        with phases.phase("validate"):
            return session.ask(judge_alias, prompt, purpose=Purpose.JUDGE).text

    validated = engine.run_validation_loop(
        generate,
        judge,
        question=outcome.prompt,
        scoring=scoring,
        max_attempts=settings_.get("max_attempts", 5),
        fallback=settings_.get("fallback", ""),
    )
    outcome.response = validated.response
    outcome.confidence = validated.confidence
    if validated.used_fallback:
        phases.add("validate", 0, FAILED)
    outcome.details["validation"] = {
        "used_fallback": validated.used_fallback,
        # How each confidence was reckoned: a run made before these were kept scored its
        # rules 0-1 (a share of the checks) with weights 0.3 and 0.7.
        "scoring": scoring.as_json(),
        "attempts": [
            {
                "response": a.response,
                "rule_score": a.rule_score,
                "judge_total": a.judge_total,
                "confidence": a.confidence,
                "arithmetic": a.arithmetic,
                "feedback": a.feedback,
                **({"judge_problem": a.judge_problem} if a.judge_problem else {}),
            }
            for a in validated.attempts
        ],
    }


def _structured(
    session: Session, alias: str, outcome: StepOutcome, streamer: TokenStreamer
) -> None:
    """Answer until an answer meets the step's output schema, or its attempts run out.

    A server that enforces schemas is sent it (`response_format`); any other model is told
    it at the end of the prompt. Each answer after the first is asked for with the last
    one's errors as feedback (a `validation` call). The response is the answer's JSON object
    (its fields become the facts); a step none of whose answers meets the schema fails with
    their errors, which a `schema_valid` branch reads.
    """
    step = session.claim.step
    schema = dict(step.output_schema or {})
    enforced = actors.enforces_schema(session.resolve(alias))
    wire = (
        OutputSchema(
            output_schema.wire_name(step.key), schema, output_schema.strict_compatible(schema)
        )
        if enforced
        else None
    )
    tries: list[dict[str, object]] = []
    record: dict[str, object] = {"enforced": enforced, "answers": tries}
    outcome.details[SCHEMA_DETAILS] = record
    value: dict[str, object] | None = None
    errors: list[str] = []
    for attempt in range(step.output_schema_attempts):
        feedback = output_schema.feedback(errors) if errors else None
        prompt = session.prompt(feedback)
        if feedback and "{feedback}" not in session.template():
            prompt += f"\n\n{feedback}"
        if not enforced:
            prompt += f"\n\n{output_schema.instruction(schema)}"
        if attempt == 0:
            outcome.prompt = prompt
        answer = session.ask(
            alias,
            prompt,
            purpose=Purpose.ANSWER if attempt == 0 else Purpose.VALIDATION,
            timeout_s=step.timeout_s,
            on_token=streamer.add,
            output_schema=wire,
            images=session.images,
        ).text
        with session.phases.phase("validate"):
            value, errors = output_schema.check_answer(schema, answer)
        session.phases.attempts = attempt + 1
        tries.append({"response": answer, "errors": errors})
        if not errors:
            break
    if errors:
        session.phases.add("validate", 0, FAILED)
    check = SchemaCheck(valid=not errors, errors=tuple(errors), attempts=len(tries))
    record.update(check.as_json())
    if errors or value is None:
        outcome.status, outcome.error = StepStatus.FAILED, check.reason()
        return
    outcome.response = json.dumps(value, ensure_ascii=False)
